"""Checks and conversions of command-line values that several commands share.

Each turns a bad value into a `click.UsageError` (exit status 2), so every command words
the same mistake the same way.  The compiler is imported inside the functions: command
modules import this one at load time, and `cake --help` loads every command module.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:
    from cake_agents.store import RunsStore


def display(path: Path) -> str:
    """The path as the user should read it: relative to the working directory when it lies
    under it (so reports and diagnostics stay short and stable), else as given."""
    try:
        return path.resolve().relative_to(Path.cwd().resolve()).as_posix()
    except ValueError:
        return path.as_posix()


def parse_dims(*texts: str) -> dict[str, int]:
    """`M=256,N=256` (one or more such texts, later ones winning) -> {"M": 256, "N": 256}.

    The compiler's parser of dims (the one calibration files use) decides what is valid.
    """
    from cake_core.cost.fit import parse_dims as parse_one

    out: dict[str, int] = {}
    for text in texts:
        try:
            out.update(parse_one(text))
        except ValueError as exc:
            raise click.UsageError(str(exc)) from exc
    return out


def check_arch(arch: str | None) -> None:
    """Reject an `--arch` the hardware table does not know, suggesting the closest name."""
    if arch is None:
        return
    from cake_core.hardware import get_arch, suggest_arch

    if get_arch(arch) is None:
        hint = suggest_arch(arch)
        raise click.UsageError(f"unknown arch {arch!r}"
                               + (f"; did you mean {hint!r}?" if hint else ""))


def open_runs_store(runs_dir: str, option: str) -> RunsStore:
    """The runs store under `runs_dir`; a usage error naming `option` when there is none."""
    from cake_agents.store import STORE_NAME, RunsStore

    path = Path(runs_dir) / STORE_NAME
    if not path.is_file():
        raise click.UsageError(f"no runs store at {path} (run `cake evolve TASK` first, or "
                               f"give {option})")
    return RunsStore(path)
