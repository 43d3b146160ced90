"""Running a kernel on the GPU through the runner and printing its report.

`cake bench` times the kernel against the task's baseline; `cake run` without `--sim` only
checks it; `cake run --emulate` checks the same lowered CUDA on the CPU.  All go through
`execute`, so they load tasks, report setup problems and render results the same way.  The
runner is imported inside the functions: `cake --help` loads the command modules that
import this one.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from cake_cli.args import parse_dims

if TYPE_CHECKING:
    from cake_core.run.results import BenchReport, ShapeResult
    from cake_core.run.runner import BenchOptions, BenchOutcome

NO_GPU_HINT = "use `cake run --sim` to check correctness on the CPU"


def execute(kernel: str, task_name: str, opts: BenchOptions, fmt: str) -> BenchOutcome:
    """Load the task, run the candidate, print the report; exit 2 on setup problems."""
    from cake_core.run.runner import BenchSetupError, NoGpuError, bench
    from cake_core.tasks import TaskError, load_task

    path_text, _, kname = kernel.partition("::")
    try:
        task = load_task(task_name)
    except TaskError as exc:
        raise click.UsageError(str(exc)) from exc
    if not Path(path_text).is_file():
        raise click.UsageError(f"no such file: {path_text}")
    progress = _progress_printer() if fmt == "text" and sys.stderr.isatty() else None
    try:
        outcome = bench(Path(path_text), kname or None, task, opts, on_event=progress)
    except NoGpuError as exc:
        click.echo(f"cake {_verb(opts)}: {exc}; {NO_GPU_HINT}", err=True)
        sys.exit(2)
    except BenchSetupError as exc:
        if exc.diagnostics:
            _print_diags(exc.diagnostics)
        click.echo(f"cake {_verb(opts)}: {exc}", err=True)
        sys.exit(exc.exit)
    if fmt == "json":
        from cake_core.diagnostics.json_format import to_json_obj

        doc = outcome.report.to_json(to_json_obj(outcome.diagnostics,
                                                 {outcome.source.path: outcome.source}))
        doc["elapsed_s"] = round(outcome.elapsed_s, 2)
        click.echo(json.dumps(doc, indent=2))
    else:
        click.echo(render_text(outcome, color=sys.stdout.isatty()), nl=False)
    return outcome


def _verb(opts: BenchOptions) -> str:
    return "bench" if opts.timing.enabled else "run"


def _progress_printer() -> Any:
    def show(ev: dict[str, Any]) -> None:
        if ev.get("event") == "progress":
            click.echo(f"\r  shape {ev['index'] + 1}: {ev.get('phase', '')}\033[K", err=True,
                       nl=False)
        elif ev.get("event") in ("shape", "done", "error"):
            click.echo("\r\033[K", err=True, nl=False)
    return show


def _print_diags(diags: list[Any]) -> None:
    from cake_core.diagnostics.text import render_text as render_diags
    from cake_core.source import SourceFile

    sources = {}
    for d in diags:
        if d.path and d.path not in sources and Path(d.path).is_file():
            sources[d.path] = SourceFile.read(Path(d.path), d.path)
    click.echo(render_diags(diags, sources), err=True)


def write_runs(report: BenchReport, output: str) -> None:
    """The calibration records, kernel paths relative to the output file's folder."""
    out = Path(output)
    kernel = os.path.relpath(Path(report.path).resolve(), out.resolve().parent)
    runs = report.calibration_runs(Path(kernel).as_posix())
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(runs, indent=2) + "\n", encoding="utf-8")


def _fmt(x: float | None, spec: str, none: str = "-") -> str:
    return none if x is None else format(x, spec)


def shape_row(s: ShapeResult, timing: bool) -> list[str]:
    verdict = {True: "yes", False: "NO", None: "?"}[s.correct] if s.status in ("ok", "wrong") \
        else s.status.upper()
    row = [s.dims_text, s.label, verdict, _fmt(s.max_abs if s.correct is not None else None,
                                               ".3g"),
           _fmt(s.max_rel if s.correct is not None else None, ".3g")]
    if timing:
        row += [_fmt(s.candidate_ms, ".4g"), _fmt(s.baseline_ms, ".4g"),
                _fmt(s.pct_of_baseline, ".1f", "-") + ("%" if s.pct_of_baseline else ""),
                _fmt(s.tflops, ".1f"), _fmt(s.cv, ".3f")]
    row.append(",".join(f for f in s.flags if f not in ("fake_device", "emulated")) or "")
    return row


def table(headers: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h)
              for i, h in enumerate(headers)]
    lines = ["  " + "  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()]
    for r in rows:
        lines.append("  " + "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())
    return "\n".join(lines) + "\n"


def render_text(outcome: BenchOutcome, *, color: bool = False) -> str:
    from cake_core.diagnostics.text import render_summary
    from cake_core.diagnostics.text import render_text as render_diags

    rep = outcome.report
    timing = rep.timing
    where = f"{rep.device} ({rep.backend} backend)"
    base = rep.shapes[0].baseline if rep.shapes else ""
    head = (f"task {rep.task}: kernel {rep.kernel} ({rep.path}) on {where}"
            + (f"; baseline: {base}" if timing and base else "") + "\n")
    headers = ["shape", "label", "correct", "max abs", "max rel"]
    if timing:
        headers += ["ms", "baseline ms", "% of baseline", "TFLOP/s", "cv"]
    headers.append("flags")
    out = head + table(headers, [shape_row(s, timing) for s in rep.shapes])
    for s in rep.shapes:
        if s.error:  # an emulated launch's findings are not in it: they are diagnostics
            out += f"  {s.dims_text}: " + s.error.replace("\n", "\n    ") + "\n"
    for note in rep.notes:
        out += f"note: {note}\n"
    if outcome.diagnostics:
        out += "\n" + render_diags(outcome.diagnostics, {outcome.source.path: outcome.source},
                                   color=color) + "\n"
        out += render_summary(outcome.diagnostics, color=color) + "\n"
    ok = sum(bool(s.correct) for s in rep.shapes)
    sus = sum(s.suspicious for s in rep.shapes)
    out += f"{ok}/{len(rep.shapes)} shapes correct"
    out += f"; {sus} suspicious time{'s' if sus != 1 else ''}\n" if sus else "\n"
    return out


def run_gpu(kernel: str, task_name: str, dims: str | None, seed: int, fmt: str) -> None:
    """`cake run` without --sim: the runner's checks on the GPU, without timing."""
    from cake_core.run.device import probe_gpu
    from cake_core.run.protocol import TimingConfig
    from cake_core.run.runner import BenchOptions
    from cake_core.tasks import Shape

    probe = probe_gpu()
    if not probe.present:
        click.echo(f"cake run: no CUDA device: {probe.reason}; only --sim is available "
                   "here: add --sim to run in the CPU simulator", err=True)
        sys.exit(2)
    opts = BenchOptions(shapes=[Shape(parse_dims(dims))] if dims else None,
                        seeds=(seed, seed + 1), timing=TimingConfig(enabled=False))
    outcome = execute(kernel, task_name, opts, fmt)
    sys.exit(0 if outcome.passed else 1)


def run_emulated(kernel: str, task_name: str, dims: str | None, seed: int, fmt: str,
                 order: str = "both") -> None:
    """`cake run --emulate`: the runner's checks on the lowered CUDA, run on the CPU.

    The task's simulator shapes by default (emulation is far slower than a GPU); `seed`
    seeds the inputs (seeds `seed` and `seed + 1`) and the emulator's scheduler; `order`
    is when asynchronous operations complete (`cake_core.run.emulated`).
    """
    from cake_core.run.protocol import TimingConfig
    from cake_core.run.runner import EMULATE, BenchOptions
    from cake_core.tasks import Shape

    opts = BenchOptions(shapes=[Shape(parse_dims(dims))] if dims else None,
                        seeds=(seed, seed + 1), timing=TimingConfig(enabled=False),
                        backend=EMULATE, baseline=False, emulate_seed=seed,
                        emulate_order=order)
    outcome = execute(kernel, task_name, opts, fmt)
    sys.exit(0 if outcome.passed else 1)
