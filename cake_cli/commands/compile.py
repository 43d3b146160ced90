"""`cake compile FILE`: lower, run nvcc/ptxas, and report resources and ptxas findings.

Exit status: 0 compiled with no findings, 1 errors or findings (spills, serialized wgmma,
a resource count the model did not predict, a kernel that does not verify), 2 usage
problems or no nvcc.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from cake_cli.args import check_arch

# The libraries are imported inside the functions: `cake --help` loads this module for its
# help line, and each command loads only what it runs.

if TYPE_CHECKING:
    from cake_core.lower.build import BuildReport, KernelBuild

SCHEMA = "cake.compile/1"


@click.command(name="compile")
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--output", "-o", type=click.Path(dir_okay=False),
              help="Write the cubin here (one kernel; with several, FILE.<kernel>.cubin).")
@click.option("--kernel", "kernel_name", help="Only this kernel of the file.")
@click.option("--arch", help="Target arch (overrides @kernel(arch=...)).")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text",
              show_default=True, help="Output format.")
@click.option("--no-cache", is_flag=True, help="Always run nvcc (and do not store the result).")
@click.option("--color/--no-color", default=None, help="Colour (default: when on a terminal).")
def compile_cmd(file: str, output: str | None, kernel_name: str | None, arch: str | None,
                fmt: str, no_cache: bool, color: bool | None) -> None:
    """Compile the kernels of FILE to cubins and report registers, spills and smem."""
    from cake_core.lower.build import build_source
    from cake_core.lower.toolchain import NOT_FOUND, find_toolchain
    from cake_core.source import SourceFile, display_path

    check_arch(arch)
    path = Path(file)
    try:
        src = SourceFile.read(path, display_path(path))
    except OSError as exc:
        raise click.UsageError(f"cannot read {file}: {exc.strerror}") from exc
    tc = find_toolchain()
    if tc is None:
        click.echo(f"cake: {NOT_FOUND}", err=True)
        sys.exit(2)
    try:
        report = build_source(src, kernel=kernel_name, arch=arch, toolchain=tc,
                              use_cache=not no_cache)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from exc
    if output:
        _write_cubins(report, Path(output))
    if fmt == "json":
        click.echo(_json(report, tc.version))
    else:
        use_color = sys.stdout.isatty() if color is None else color
        click.echo(_text(report, use_color), nl=False)
    findings = any(d.severity.value in ("error", "warning") for d in report.diagnostics)
    sys.exit(1 if findings or not report.ok else 0)


def _write_cubins(report: BuildReport, out: Path) -> None:
    built = [k for k in report.kernels if k.result is not None and k.result.cubin]
    for k in built:
        target = out if len(built) == 1 else out.with_name(f"{out.stem}.{k.name}{out.suffix}")
        assert k.result is not None and k.result.cubin is not None
        target.write_bytes(k.result.cubin)


def _line(k: KernelBuild) -> str:
    r = k.resources
    if k.result is None:
        return f"{k.name} ({k.arch}): not lowered"
    if r is None:
        return f"{k.name} ({k.arch}): nvcc failed"
    exp = k.registers_expected
    model = "" if not exp else (f" (model: {exp['low']})" if exp["low"] == exp["high"]
                                else f" (model: {exp['low']}..{exp['high']})")
    when = "cached" if k.result.cached else f"nvcc {k.result.seconds:.2f} s"
    return (f"{k.name} ({k.arch}): {r.registers} registers{model}, spills {r.spill_stores} B "
            f"stores / {r.spill_loads} B loads, stack {r.stack} B, smem {k.smem_plan} B "
            f"dynamic + {r.smem_static} B static (plan {k.smem_plan} B), "
            f"{r.barriers} barrier{'s' if r.barriers != 1 else ''}; {when}")


def _text(report: BuildReport, color: bool) -> str:
    from cake_core.diagnostics.text import render_summary, render_text

    lines = [_line(k) for k in report.kernels]
    body = render_text(report.diagnostics, {report.source.path: report.source}, color=color)
    out = "\n".join(lines) + "\n"
    if body:
        out += "\n" + body + "\n"
    if report.diagnostics:
        out += render_summary(report.diagnostics, color=color) + "\n"
    return out


def _json(report: BuildReport, version: str) -> str:
    from cake_core.diagnostics.json_format import to_json_obj

    data = {"schema": SCHEMA, "source": report.source.path, "toolchain": version,
            "ok": report.ok, "kernels": [k.as_data() for k in report.kernels],
            "report": to_json_obj(report.diagnostics, {report.source.path: report.source})}
    return json.dumps(data, indent=2)
