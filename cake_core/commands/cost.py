"""`cake cost FILE --dims M=4096,N=4096,K=4096`: predicted time, bottleneck, per-line share.

Exit status: 0 priced, 1 the file has errors or a kernel cannot run as asked (a block that
does not fit), 2 usage problems (missing dims, unknown GPU, unreadable calibration).
"""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from cake_core.cost.model import Prediction
    from cake_core.syntax.source import SourceFile

SCHEMA = "cake.cost/1"


def _dims(values: tuple[str, ...]) -> dict[str, int]:
    from cake_core.cost.fit import parse_dims

    out: dict[str, int] = {}
    for v in values:
        try:
            out.update(parse_dims(v))
        except ValueError as exc:
            raise click.UsageError(str(exc)) from exc
    return out


@click.command(name="cost")
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--dims", "-d", "dims", multiple=True, metavar="NAME=INT,...",
              help="Launch sizes, e.g. M=4096,N=4096,K=4096 (repeatable).")
@click.option("--arch", help="Target arch (overrides @kernel(arch=...)).")
@click.option("--gpu", help="GPU to price on (default: the arch's reference GPU), e.g. H200.")
@click.option("--kernel", "kernel_name", help="Only this kernel of the file.")
@click.option("--calibration", type=click.Path(dir_okay=False),
              help="Calibration JSON written by `cake calibrate`.")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text",
              show_default=True, help="Output format.")
def cost(file: str, dims: tuple[str, ...], arch: str | None, gpu: str | None,
         kernel_name: str | None, calibration: str | None, fmt: str) -> None:
    """Predict a kernel's run time on a GPU and say where the time goes.

    The model is analytical (no GPU needed): tensor-core, CUDA-core, shared-memory, L2 and
    DRAM work against the GPU's achievable rates, pipeline latency, waves and launch
    overhead.  Every prediction names the calibration it used.
    """
    from cake_core.check import check_source
    from cake_core.cost.calibration import load_calibrations, pick_calibration
    from cake_core.cost.model import CostError, predict, resolve_gpu
    from cake_core.hardware import get_arch, get_gpu, suggest_arch
    from cake_core.syntax.source import SourceFile

    if arch is not None and get_arch(arch) is None:
        hint = suggest_arch(arch)
        raise click.UsageError(f"unknown arch {arch!r}" + (f"; did you mean {hint!r}?"
                                                           if hint else ""))
    gpu_spec = None
    if gpu is not None:
        gpu_spec = get_gpu(gpu)
        if gpu_spec is None:
            from cake_core.hardware import GPUS

            raise click.UsageError(f"unknown GPU {gpu!r}; known: {', '.join(GPUS)}")
    env = _dims(dims)
    cals = []
    if calibration is not None:
        try:
            cals = load_calibrations(calibration)
        except (OSError, ValueError) as exc:
            raise click.UsageError(f"cannot use calibration {calibration}: {exc}") from exc
    try:
        src = SourceFile.read(Path(file), file)
    except OSError as exc:
        raise click.UsageError(f"cannot read {file}: {exc.strerror}") from exc
    res = check_source(src, arch=arch)
    if res.errors or res.program is None:
        from cake_core.diagnostics.text import render_text

        click.echo(render_text(res.errors, {src.path: src}), err=True)
        click.echo(f"cake cost: {file} has errors; fix them before costing it", err=True)
        sys.exit(1)
    kernels = res.program.kernels
    if kernel_name is not None:
        kernels = [k for k in kernels if k.name == kernel_name]
        if not kernels:
            names = ", ".join(k.name for k in res.program.kernels)
            raise click.UsageError(f"no kernel {kernel_name!r} in {file} (it has {names})")
    preds = []
    for k in kernels:
        try:
            g, garch = resolve_gpu(k.arch, gpu_spec)
        except CostError as exc:
            raise click.UsageError(str(exc)) from exc
        cal = None
        if cals:
            cal = pick_calibration(cals, garch.name)
            if cal is None:
                have = ", ".join(sorted({c.arch for c in cals}))
                raise click.UsageError(f"{calibration} has no calibration for {garch.name} "
                                       f"(it has {have})")
        try:
            preds.append(predict(k, env, g, calibration=cal))
        except CostError as exc:
            if "--dims" in str(exc):
                raise click.UsageError(str(exc)) from exc
            click.echo(f"cake cost: {k.name}: {exc}", err=True)
            sys.exit(1)
    if fmt == "json":
        click.echo(json.dumps(cost_json(file, preds, calibration), indent=2))
    else:
        click.echo(render_predictions(preds, src, color=sys.stdout.isatty()), nl=False)


def cost_json(file: str, preds: list[Prediction], calibration: str | None) -> dict[str, Any]:
    """The JSON document of `cake cost --format json` (schema `cake.cost/1`)."""
    return {"schema": SCHEMA, "file": file, "calibration_file": calibration,
            "predictions": [p.to_json() for p in preds]}


def _us(seconds: float) -> str:
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.3f} ms"
    return f"{seconds * 1e6:.1f} us"


def render_predictions(preds: list[Prediction], src: SourceFile, *, color: bool = False,
                       min_share: float = 0.001) -> str:
    """The text report: a summary per kernel and its per-line table (rich, no colour in
    pipes)."""
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    buf = io.StringIO()
    console = Console(file=buf, width=110, force_terminal=color, color_system="auto"
                      if color else None, highlight=False, markup=False)
    for p in preds:
        dims = " ".join(f"{k}={v}" for k, v in p.dims.items())
        head = Text(p.kernel, style="bold")
        head.append(f" ({p.target}) on {p.gpu} ({p.arch})  {dims}  [{p.calibration}]")
        console.print(head)
        occ = p.resources.occupancy
        regs = ", ".join(
            f"{name} {r.allocated}" + (" (setmaxnreg)" if r.ceiling is not None else "")
            + f" [est. {r.low}-{r.high}]" for name, r in p.resources.registers.items())
        cats = ", ".join(f"{k} {v / p.seconds:.0%}" for k, v in sorted(
            p.categories.items(), key=lambda kv: -kv[1]) if v / p.seconds >= 0.005)
        summary = Table.grid(padding=(0, 2))
        summary.add_column(style="dim")
        summary.add_column()
        summary.add_row("time", _us(p.seconds))
        summary.add_row("throughput", f"{p.tflops:.1f} TFLOP/s (tensor, executed); "
                        f"{p.roofline_fraction:.0%} of the roofline ({_us(p.roofline_seconds)})")
        summary.add_row("bottleneck", f"{p.bottleneck}: {p.bottleneck_detail}")
        summary.add_row("time by kind", cats)
        grid = " x ".join(str(g) for g in p.grid)
        summary.add_row("grid", f"{grid} = {p.blocks} blocks, {p.blocks_per_sm} per SM "
                        f"(limited by {occ.limited_by}), {p.waves:.2f} waves")
        summary.add_row("smem", f"{p.resources.smem.total:,} B per block")
        summary.add_row("registers", regs)
        for w in p.warnings:
            summary.add_row("warning", w)
        console.print(summary)
        table = Table(show_edge=False, pad_edge=False, box=None, header_style="bold")
        table.add_column("line", justify="right")
        table.add_column("share", justify="right")
        table.add_column("time", justify="right")
        table.add_column("kind")
        table.add_column("source", overflow="ellipsis", no_wrap=True, max_width=64)
        hidden = 0
        for ln in p.lines:
            if ln.share < min_share:
                hidden += 1
                continue
            text = src.line_text(ln.line - 1).strip() if ln.line - 1 < src.line_count else ""
            table.add_row(str(ln.line), f"{ln.share:.1%}", _us(ln.seconds), ln.category,
                          Text(text))
        console.print(table)
        if hidden:
            console.print(f"({hidden} more lines below {min_share:.1%})", style="dim")
        console.print()
    return "".join(line.rstrip() + "\n" for line in buf.getvalue().splitlines())
