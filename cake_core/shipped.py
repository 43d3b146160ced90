"""Where the data CAKE ships beside its code lives: example kernels, tasks, rule pages.

The repository keeps these files where a reader looks for them (examples/,
examples/tasks/, docs/rules/); the wheel carries the same files as package data under
cake_core/data/ (setup.py maps the folders there, so there is one copy of each).  An
installed wheel reads its package data; a checkout, installed editable or on the path,
reads the repository's folders.
"""

from __future__ import annotations

from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent
_CHECKOUT = _PACKAGE.parent


def _shipped(packaged: str, in_checkout: str) -> Path:
    here = _PACKAGE / "data" / packaged
    return here if here.is_dir() else _CHECKOUT / in_checkout


EXAMPLES_DIR = _shipped("examples", "examples")
"""The example kernels (*.cake), the tasks in its `tasks/` folder."""
TASKS_DIR = EXAMPLES_DIR / "tasks"
RULES_DIR = _shipped("rules", "docs/rules")
"""One page per diagnostic code, `<CODE>.md`."""
