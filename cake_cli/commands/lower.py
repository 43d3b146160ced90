"""`cake lower FILE`: the CUDA C++ of every kernel that verifies.

Exit status: 0 lowered, 1 the file has errors (or a construct the lowering does not
handle), 2 usage problems.  With `-o out.cu` the metadata goes next to it as `out.json`.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from cake_cli.args import check_arch

# The libraries are imported inside the functions: `cake --help` loads this module for its
# help line, and each command loads only what it runs.


@click.command(name="lower")
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--output", "-o", type=click.Path(dir_okay=False),
              help="Write the .cu here (and its metadata to the same name with .json).")
@click.option("--kernel", "kernel_name", help="Only this kernel of the file.")
@click.option("--arch", help="Target arch (overrides @kernel(arch=...)).")
@click.option("--color/--no-color", default=None, help="Colour (default: when on a terminal).")
def lower(file: str, output: str | None, kernel_name: str | None, arch: str | None,
          color: bool | None) -> None:
    """Lower the kernels of FILE to CUDA C++ (inline PTX, #line mapped to FILE)."""
    from cake_core.diagnostics.text import render_summary, render_text
    from cake_core.lower import lower_source
    from cake_core.source import SourceFile, display_path

    check_arch(arch)
    path = Path(file)
    try:
        src = SourceFile.read(path, display_path(path))
    except OSError as exc:
        raise click.UsageError(f"cannot read {file}: {exc.strerror}") from exc
    cu_name = Path(output).name if output else None
    try:
        res = lower_source(src, kernel=kernel_name, arch=arch, cu_name=cu_name)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from exc
    use_color = sys.stderr.isatty() if color is None else color
    shown = res.diagnostics if res.cu is None else [*res.check_diagnostics, *res.diagnostics]
    if shown:
        click.echo(render_text(shown, {src.path: src}, color=use_color), err=True)
        click.echo(render_summary(shown, color=use_color), err=True)
    if res.cu is not None:
        if output:
            out = Path(output)
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(res.cu, encoding="utf-8")
            out.with_suffix(".json").write_text(json.dumps(res.meta, indent=2) + "\n",
                                                encoding="utf-8")
            click.echo(f"wrote {out} and {out.with_suffix('.json')} "
                       f"({len(res.kernels)} kernel{'s' if len(res.kernels) != 1 else ''})",
                       err=True)
        else:
            click.echo(res.cu, nl=False)
    failed = res.cu is None or any(d.severity.value == "error" for d in res.diagnostics)
    sys.exit(1 if failed else 0)
