"""`cake examples [DEST]`: copy the example kernels and their tasks out of the installation.

An installed wheel carries the examples as package data; copied into ./examples (the
default), the README's tour runs as written from any directory, and the copies are the
user's own to edit: a task in ./examples/tasks/ is found by name like a shipped one.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import click


@click.command(name="examples")
@click.argument("dest", default="examples", type=click.Path(file_okay=False))
def examples(dest: str) -> None:
    """Copy the example kernels (and their tasks, in tasks/) into DEST.

    Files already in DEST are kept as they are.
    """
    from cake_core.shipped import EXAMPLES_DIR

    target = Path(dest)
    # the tasks and the helper modules they import (`tasks/_attention.py`)
    shipped = sorted([*EXAMPLES_DIR.glob("*.cake"), *EXAMPLES_DIR.glob("tasks/*.py")])
    copied, kept = 0, []
    for src in shipped:
        out = target / src.relative_to(EXAMPLES_DIR)
        if out.exists():
            kept.append(out.as_posix())
            continue
        out.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, out)
        copied += 1
    for path in kept:
        click.echo(f"kept {path} (already there)")
    click.echo(f"copied {copied} file{'s' if copied != 1 else ''} to {target.as_posix()}/ "
               f"(kernels, and their tasks in tasks/); try: cake check {target.as_posix()}/")
