"""Names that become paths: run ids, and what else a user or a store row can choose.

A run id names a folder under the runs directory (`<run-dir>/<run-id>/`), and it comes
from places a user or another program controls: the command line (`--resume`, `cake runs
report RUN`) and the rows of `runs.sqlite`.  Before one becomes a path it must be a plain
name, so that no id, however it got into the store, can send a write outside the runs
directory.
"""

from __future__ import annotations

import re
from pathlib import Path

from cake_agents.context import SetupError

_PLAIN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,199}")


class UnsafeName(SetupError):
    """A name that would leave its directory (a separator, `..`, a leading dot, ...)."""


def plain_name(name: str, what: str) -> str:
    """`name` if it is a single path component that stays in its directory."""
    if not _PLAIN.fullmatch(name) or ".." in name:
        raise UnsafeName(f"{what} {name!r} is not a plain name (letters, digits, '.', '_', "
                         "'+', '-'; no path separators or '..'): refused")
    return name


def run_folder(root: Path, run_id: str) -> Path:
    """`<root>/<run_id>`, for a run id that is a plain name."""
    return Path(root) / plain_name(run_id, "run id")
