"""`cake cost FILE --dims M=4096,N=4096,K=4096`: predicted time, bottleneck, per-line share.

Exit status: 0 priced, 1 the file has errors or a kernel cannot run as asked (a block that
does not fit), 2 usage problems (missing dims, unknown GPU, unreadable calibration).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from cake_cli.args import check_arch, parse_dims

# The libraries are imported inside the functions: `cake --help` loads this module for its
# help line, and each command loads only what it runs.

if TYPE_CHECKING:
    from cake_core.cost.model import Prediction

SCHEMA = "cake.cost/1"


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
    from cake_core.hardware import get_gpu
    from cake_core.source import SourceFile

    check_arch(arch)
    gpu_spec = None
    if gpu is not None:
        gpu_spec = get_gpu(gpu)
        if gpu_spec is None:
            from cake_core.hardware import GPUS

            raise click.UsageError(f"unknown GPU {gpu!r}; known: {', '.join(GPUS)}")
    env = parse_dims(*dims)
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
        from cake_core.cost.render import render_predictions

        click.echo(render_predictions(preds, src, color=sys.stdout.isatty()), nl=False)


def cost_json(file: str, preds: list[Prediction], calibration: str | None) -> dict[str, Any]:
    """The JSON document of `cake cost --format json` (schema `cake.cost/1`)."""
    return {"schema": SCHEMA, "file": file, "calibration_file": calibration,
            "predictions": [p.to_json() for p in preds]}
