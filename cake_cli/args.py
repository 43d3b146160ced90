"""Checks and conversions of command-line values that several commands share.

Each turns a bad value into a `click.UsageError` (exit status 2), so every command words
the same mistake the same way.  The compiler is imported inside the functions: command
modules import this one at load time, and `cake --help` loads every command module.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:
    from cake_agents.store import RunsStore
    from cake_core.diagnostics.selection import Selection
    from cake_core.source import SourceFile


def read_sources(paths: tuple[str, ...],
                 stdin_filename: str | None) -> tuple[list[SourceFile], bool]:
    """The sources to check, and whether the one source is stdin (`-`).

    A directory stands for every .cake file under it; `--stdin-filename` names the text
    read from stdin and makes sense only with `-`.
    """
    from cake_core.source import SourceFile, display_path

    if "-" in paths:
        if len(paths) > 1:
            raise click.UsageError("`-` (stdin) cannot be combined with other paths")
        raw = sys.stdin.buffer.read()
        return [SourceFile.from_bytes(raw, stdin_filename or "<stdin>")], True
    if stdin_filename is not None:
        raise click.UsageError("--stdin-filename needs `-` among the paths")
    files: list[Path] = []
    for p in paths:
        path = Path(p)
        if path.is_dir():
            files.extend(sorted(f for f in path.rglob("*.cake") if f.is_file()))
        elif path.is_file():
            files.append(path)
        else:
            raise click.UsageError(f"no such file or directory: {p}")
    if not files:
        raise click.UsageError("no .cake files found")
    sources = []
    for f in files:
        try:
            sources.append(SourceFile.read(f, display_path(f)))
        except OSError as exc:
            raise click.UsageError(f"cannot read {f}: {exc.strerror}") from exc
    return sources, False


def parse_selection(select: tuple[str, ...], ignore: tuple[str, ...],
                    extend_select: tuple[str, ...]) -> Selection:
    """`--select`, `--ignore` and `--extend-select` (each repeatable and comma-separated)
    as a selection; a selector that matches no known code is a usage error."""
    from cake_core.diagnostics.codes import all_rules
    from cake_core.diagnostics.selection import Selection, unknown_selectors

    def split(values: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(s.strip().upper() for v in values for s in v.split(",") if s.strip())

    selection = Selection(split(select) or None, split(ignore), split(extend_select))
    bad = unknown_selectors(selection, [r.code for r in all_rules()])
    if bad:
        raise click.UsageError(f"unknown rule selector {bad[0]!r} (a code such as CK302, "
                               f"or a prefix of codes such as CK3)")
    return selection


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


GATES = ("static", "sim", "cost", "ptxas", "emulate", "gpu")
"""The evaluation gates of `cake evolve` and `cake experiment`, in the order they run."""


def parse_gates(text: str) -> list[str]:
    """The gates a comma-separated `--gates` names, as written; unknown ones refused."""
    chosen = [g.strip() for g in text.split(",") if g.strip()]
    bad = [g for g in chosen if g not in GATES]
    if bad:
        raise click.UsageError(f"unknown gate(s) {', '.join(bad)}; choose from "
                               f"{', '.join(GATES)}")
    return chosen


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
