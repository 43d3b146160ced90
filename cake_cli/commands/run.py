"""`cake run KERNEL --task T --sim`: run a kernel against a task and judge its output.

KERNEL is a .cake file, optionally `file.cake::kernel_name`.  With `--sim` the kernel runs
in the CPU simulator on the task's small shapes (or `--dims`), under `--schedules`
interleavings; each shape passes or fails, with its worst errors, and the simulator's
findings are printed as `cake check` prints diagnostics.  Without `--sim` the kernel runs
on the GPU through the runner (cake_core/run/, docs/running.md) on the task's GPU shapes:
the same checks as `cake bench`, without timing; with no GPU it says so and exits 2.
With `--emulate` the lowered CUDA itself runs on the CPU, compiled with the host C++
compiler (docs/emulation.md), on the task's small shapes: the runner's checks, no timing;
`--order` picks when its asynchronous operations complete (both orders by default).

Exit status: 0 every shape passes with no error finding, 1 a shape fails or a finding is
an error, 2 usage problems (unknown task, bad dims, a kernel that does not type-check).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from cake_cli.args import parse_dims
from cake_cli.gpu_run import run_emulated, run_gpu

# The libraries are imported inside the functions: `cake --help` loads this module for its
# help line, and each command loads only what it runs.

if TYPE_CHECKING:
    from cake_core.sim.tasks_run import TaskRunReport
    from cake_core.source import SourceFile

SCHEMA = "cake.run/1"


@click.command(name="run")
@click.argument("kernel", metavar="KERNEL")
@click.option("--task", "task_name", required=True,
              help="Task name (shipped, or ./examples/tasks/NAME.py) or a task file path.")
@click.option("--sim", is_flag=True,
              help="Run in the CPU simulator (without it: on the GPU, through the runner).")
@click.option("--emulate", is_flag=True,
              help="Compile the lowered CUDA with the host C++ compiler and run it on the CPU "
                   "(correctness only, no timing).")
@click.option("--dims", "dims", metavar="NAME=INT,...",
              help="One shape to run instead of the task's shapes, e.g. M=256,N=256,K=128.")
@click.option("--schedules", type=click.IntRange(1, 64), default=2, show_default=True,
              help="Interleavings to explore: round-robin, adversarial, then seeded random.")
@click.option("--seed", type=int, default=0, show_default=True,
              help="Seed of the inputs and of the random schedules (with --emulate: of the "
                   "emulator's scheduler too).")
@click.option("--order", type=click.Choice(["lazy", "eager", "both"]), default=None,
              help="With --emulate: when asynchronous operations (TMA, cp.async, wgmma) "
                   "complete: deferred until the scheduler or a wait needs them (lazy), at "
                   "issue (eager), or both: "
                   "the first launch on each input set lazy, the second eager.  "
                   "[default: both]")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text",
              show_default=True, help="Output format.")
def run(kernel: str, task_name: str, sim: bool, emulate: bool, dims: str | None,
        schedules: int, seed: int, order: str | None, fmt: str) -> None:
    """Run KERNEL (a .cake file, or file.cake::name) against a task.

    Reports pass/fail per shape with the max abs/rel error, and the findings of the run.
    """
    if sim and emulate:
        raise click.UsageError("--sim and --emulate are mutually exclusive: --sim runs the "
                               "IR in the simulator, --emulate the lowered CUDA")
    if order is not None and not emulate:
        raise click.UsageError("--order applies only with --emulate: it orders the emulated "
                               "CUDA's asynchronous operations")
    if emulate:
        run_emulated(kernel, task_name, dims, seed, fmt, order or "both")  # exits
        return
    if not sim:
        run_gpu(kernel, task_name, dims, seed, fmt)  # exits
        return
    from cake_core.check import check_source
    from cake_core.sim.engine import launch_dims
    from cake_core.sim.program import SimKernel, SimSetupError
    from cake_core.sim.tasks_run import run_task
    from cake_core.source import SourceFile, display_path
    from cake_core.tasks import TaskError, load_task

    path_text, _, kname = kernel.partition("::")
    try:
        task = load_task(task_name)
    except TaskError as exc:
        raise click.UsageError(str(exc)) from exc
    path = Path(path_text)
    shown = display_path(path)
    try:
        src = SourceFile.read(path, shown)
    except OSError as exc:
        raise click.UsageError(f"cannot read {path_text}: {exc.strerror}") from exc
    static = check_source(src)
    if static.program is None or any(d.severity.value == "error" and not _verifier(d.code)
                                     for d in static.diagnostics):
        _print_static(static.diagnostics, src)
        click.echo(f"cake run: {shown} has errors; fix them before running it", err=True)
        sys.exit(2)
    kernels = static.program.kernels
    if not kname:
        entry_names = {e.kernel for e in task.kernels}
        matching = [k.name for k in kernels if k.name in entry_names]
        if len(kernels) == 1:
            kname = kernels[0].name
        elif len(matching) == 1:
            kname = matching[0]
        else:
            names = ", ".join(k.name for k in kernels)
            raise click.UsageError(f"{shown} defines {len(kernels)} kernels ({names}); "
                                   f"pick one: {path_text}::NAME")
    try:
        sk = SimKernel.from_text(src.text, shown, kname)
        shapes = [parse_dims(dims)] if dims else None
        for shape in shapes or ():
            launch_dims(sk, shape)  # a bad --dims is a usage error, not a failed shape
        report = run_task(task, sk, shapes=shapes, n_schedules=schedules, seed=seed)
    except SimSetupError as exc:
        raise click.UsageError(str(exc)) from exc
    static_findings = [d for d in static.diagnostics]
    if fmt == "json":
        click.echo(json.dumps(run_json(report, static_findings, src), indent=2))
    else:
        color = sys.stdout.isatty()
        click.echo(render_report(report, static_findings, src, schedules, color=color), nl=False)
    failed = not report.passed or any(d.severity.value == "error" for d in static_findings)
    sys.exit(1 if failed else 0)


def _verifier(code: str) -> bool:
    """Codes of the static verifier (CK2xx-CK4xx): reported, but the kernel still runs."""
    return code[:3] in ("CK2", "CK3", "CK4")


def _print_static(diags: list, src: SourceFile) -> None:
    from cake_core.diagnostics.text import render_text

    click.echo(render_text(diags, {src.path: src}), err=True)


def render_report(report: TaskRunReport, static: list, src: SourceFile, schedules: int, *,
                  color: bool = False) -> str:
    from cake_core.diagnostics.text import render_summary, render_text

    lines = [f"task {report.task}: kernel {report.kernel} ({report.path}), simulator, "
             f"{schedules} schedule{'s' if schedules != 1 else ''} per shape"]
    width = max((len(s.dims_text) for s in report.shapes), default=0)
    for s in report.shapes:
        label = f"  ({s.label})" if s.label else ""
        if s.error is not None:
            lines.append(f"  {s.dims_text:<{width}}  ERROR  {s.error}")
            continue
        verdict = "PASS" if s.passed else "FAIL"
        blocks = f"{s.blocks} block{'s' if s.blocks != 1 else ''}"
        lines.append(f"  {s.dims_text:<{width}}  {verdict}  max abs {s.max_abs:.3g}  "
                     f"max rel {s.max_rel:.3g}  {blocks}  {s.seconds:.2f}s{label}")
        for o in s.outcomes:
            if not o.passed or o.findings:
                bad = ", ".join(f"{n}: {c.bad} wrong" for n, c in o.comparisons.items()
                                if not c.passed) or "output correct"
                lines.append(f"      {o.schedule}: {bad}; {o.findings} error finding(s)")
    diags = [*static, *report.diagnostics]
    out = "\n".join(lines) + "\n"
    if diags:
        out += "\n" + render_text(diags, {src.path: src}, color=color) + "\n"
        out += render_summary(diags, color=color) + "\n"
    ok = sum(s.passed for s in report.shapes)
    n = len(report.shapes)
    errors = sum(d.severity.value == "error" for d in diags)
    out += f"{ok}/{n} shapes match the reference"
    out += f"; {errors} error finding{'s' if errors != 1 else ''}\n" if errors else "\n"
    return out


def run_json(report: TaskRunReport, static: list, src: SourceFile) -> dict[str, Any]:
    """The JSON document of `cake run --format json` (schema `cake.run/1`)."""
    from cake_core.diagnostics.json_format import to_json_obj

    def finite(x: float) -> float | None:
        return x if x == x and abs(x) != float("inf") else None

    return {
        "schema": SCHEMA,
        "task": report.task,
        "kernel": report.kernel,
        "file": report.path,
        "mode": "sim",
        "passed": report.passed,
        "shapes": [{
            "dims": s.dims, "label": s.label, "passed": s.passed, "error": s.error,
            "max_abs": finite(s.max_abs), "max_rel": finite(s.max_rel), "blocks": s.blocks,
            "seconds": round(s.seconds, 4),
            "schedules": [{
                "schedule": o.schedule, "passed": o.passed, "error_findings": o.findings,
                "outputs": {n: {"passed": c.passed, "bad": c.bad, "max_abs": finite(c.max_abs),
                                "max_rel": finite(c.max_rel),
                                "first_bad": list(c.first_bad) if c.first_bad else None}
                            for n, c in o.comparisons.items()},
            } for o in s.outcomes],
        } for s in report.shapes],
        "report": to_json_obj([*static, *report.diagnostics], {src.path: src}),
    }
