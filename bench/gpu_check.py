"""Every example kernel on its task on this machine's GPU, under the runner's full contract.

For each task in examples/tasks and each kernel entry of it: build, check on the task's
GPU shapes (poisoned outputs, inputs unchanged, candidate -> reference -> candidate,
re-check after timing), time against the baseline (cuBLAS through torch for the GEMMs, a
torch distance-GEMM + argmin for k-means), and print one table: example, shape, correct?,
time, % of the baseline's speed, TFLOP/s.  Then the headline table (`gpu_headline.py`):
the sm_90a GEMMs (gemm_sm90 and its variants) against cuBLAS bf16 at 4096^3 and 8192^3,
and the k-means assignment kernels against the torch reference and the flash-kmeans Triton
kernel (`flash_kmeans_time.py`, in its own process, skipped with the reason where the
package does not import) at B=32, N=65536, K=1024, D=128: kernel, shape, median us,
TFLOP/s, speed relative to the baseline, status.  sm_80 examples are compiled for the GPU
at hand, so they run on Hopper too; a kernel whose architecture this GPU cannot run
(sm_90a anywhere but compute capability 9.0) is reported `skipped (needs sm_90a, GPU is
sm_XY)`, never failed.

Bounded: a time budget (default 480 s) stops starting new kernels when it runs out (every
headline kernel on its headline shapes runs first, then flash-kmeans, then the rest), timing
rounds are few, each shape's inputs and numpy reference are computed once and shared by the
kernels that run on it, every candidate runs in a subprocess killed after --timeout seconds
without progress, flash-kmeans gets --flash-timeout seconds, and shapes moving more than
256 MB run one seed (their numpy references dominate the wall time).  Writes
bench/results/gpu_check.json (the tables, the toolkit used and every report) and
bench/results/gpu_check_runs.json (trusted runs, for `cake calibrate`).

    python bench/gpu_check.py [--budget 480] [--rounds 3] [--timeout 60] [--backend auto]
                              [--headline-only] [--deadline S] [--only TEXT]
    python bench/gpu_check.py --choose-toolkit   # two lines: the bin/ to put first on PATH
                                                 # (empty: keep PATH) and why

Exit status: 0 every shape correct or skipped for its architecture, 1 a shape wrong or
failed, 2 no GPU.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from gpu_headline import (  # noqa: E402
    HEADERS,
    KMEANS_TASK,
    Highlight,
    arch_skip,
    headline_examples,
    headline_rows,
    highlights,
    row_passes,
)

from cake_cli.gpu_run import shape_row, table  # noqa: E402
from cake_core.lower.toolchain import find_toolchain  # noqa: E402
from cake_core.lower.toolkits import (  # noqa: E402
    choose_toolkit,
    driver_cuda_version,
    installed_toolkits,
)
from cake_core.run.device import probe_gpu  # noqa: E402
from cake_core.run.protocol import TimingConfig  # noqa: E402
from cake_core.run.results import ShapeResult  # noqa: E402
from cake_core.run.runner import BenchOptions, BenchSetupError, bench, load_kernel  # noqa: E402
from cake_core.tasks import KernelEntry, Shape, Task, load_task, task_names  # noqa: E402

RESULTS = ROOT / "bench" / "results"
FLASH_SCRIPT = Path(__file__).resolve().parent / "flash_kmeans_time.py"
BIG_SHAPE_BYTES = 256e6


def example_of(entry: KernelEntry) -> str:
    """The entry's kernel file relative to the repository (a task names it relative to
    itself)."""
    return Path(os.path.relpath(entry.path, ROOT)).as_posix()


def entries() -> list[tuple[Task, KernelEntry]]:
    """Every (task, kernel entry), plus the headline variants that are examples but not
    entries of their task (run on the headline shapes only); the headline ones first."""
    tasks = {name: load_task(name) for name in task_names()}
    out = [(t, e) for t in tasks.values() for e in t.kernels]
    listed = {(t.name, example_of(e)) for t, e in out}
    for task_name, example in headline_examples():
        task = tasks.get(task_name)
        if task is None or (task_name, example) in listed or not (ROOT / example).is_file():
            continue
        dims = [h.dims for h in highlights({(task_name, example)})]
        out.append((task, KernelEntry(example, Path(example).stem, base=ROOT, shapes=tuple(
            Shape(dict(d), label="headline comparison") for d in dims))))
    first = {(h.task, h.example) for h in highlights((t.name, example_of(e)) for t, e in out)}
    return sorted(out, key=lambda te: (te[0].name, example_of(te[1])) not in first)


def split_shapes(task: Task, entry: KernelEntry, wanted: Sequence[Highlight]
                 ) -> tuple[list[Shape], list[Shape]]:
    """(the entry's headline shapes, its other shapes).  A headline shape that is one of the
    task's keeps the task's label; one that is not is added as `headline comparison`."""
    own = list(task.shapes_for(entry, sim=False))
    dims = [dict(h.dims) for h in wanted
            if h.task == task.name and h.example == example_of(entry)]
    head = [s for s in own if dict(s.dims) in dims]
    head += [Shape(d, label="headline comparison") for d in dims
             if d not in [dict(s.dims) for s in head]]
    return head, [s for s in own if dict(s.dims) not in dims]


FLASH_STEP = "flash-kmeans"
Step = tuple[Task, KernelEntry, list[Shape]] | str


def plan(todo: Sequence[tuple[Task, KernelEntry]], wanted: Sequence[Highlight],
         rest: bool = True) -> list[Step]:
    """What runs, in order: every kernel on its headline shapes, then flash-kmeans (when a
    k-means headline is wanted), then (`rest`) every kernel on its other shapes.  The
    budget cuts from the end, so the headline table is the last thing it takes away."""
    split = [(t, e, *split_shapes(t, e, wanted)) for t, e in todo]
    steps: list[Step] = [(t, e, head) for t, e, head, _ in split if head]
    if any(h.task == KMEANS_TASK for h in wanted):
        steps.append(FLASH_STEP)
    return steps + [(t, e, other) for t, e, _, other in split if other and rest]


def kernel_arch(task: Task, entry: KernelEntry) -> str | None:
    """The `arch=` of the entry's kernel; None when the file does not check (bench then
    reports why)."""
    try:
        _, kernel, _ = load_kernel(ROOT / example_of(entry), entry.kernel, task)
    except BenchSetupError:
        return None
    return str(kernel.arch)


def _row(example: str, task: str, s: ShapeResult, arch_skipped: bool = False
         ) -> dict[str, Any]:
    return {"example": example, "task": task, "dims": s.dims, "label": s.label,
            "status": s.status, "correct": s.correct, "ms": s.candidate_ms,
            "baseline_ms": s.baseline_ms, "pct_of_baseline": s.pct_of_baseline,
            "tflops": s.tflops, "cv": s.cv, "floor_ms": s.floor_ms, "flags": s.flags,
            "error": s.error, "arch_skip": arch_skipped}


def toolkit_report() -> dict[str, Any]:
    """Which toolkit the runner will build with (the first nvcc `find_toolchain` finds, which
    gpu_check.sh puts first on PATH) and why it was chosen."""
    kits = installed_toolkits()
    driver = driver_cuda_version()
    choice = choose_toolkit(kits, driver)
    tc = find_toolchain()
    return {"driver_cuda": None if driver is None else f"{driver[0]}.{driver[1]}",
            "installed": [{"nvcc": str(k.nvcc), "version": f"{k.version[0]}.{k.version[1]}",
                           "found_in": k.where} for k in kits],
            "chosen": None if choice.toolkit is None else str(choice.toolkit.nvcc),
            "reason": choice.reason,
            "used": None if tc is None else f"{tc.nvcc} ({tc.version})"}


def choose_toolkit_lines() -> str:
    """--choose-toolkit: the bin/ directory to put first on PATH (empty: none) and why."""
    choice = choose_toolkit(installed_toolkits(), driver_cuda_version())
    where = "" if choice.toolkit is None else str(choice.toolkit.bin_dir)
    return f"{where}\n{choice.reason}\n"


#: Seconds past the budget the flash-kmeans step may end: gpu_check.sh stops the whole run
#: 90 s after the budget, and the tables still have to be written.
FLASH_GRACE = 60.0


def flash_seconds(args: argparse.Namespace, elapsed: float) -> float:
    """The flash-kmeans step's timeout: --flash-timeout, cut so it ends by budget + grace."""
    return max(0.0, min(args.flash_timeout, args.budget + FLASH_GRACE - elapsed))


def run_flash(args: argparse.Namespace, out: Path, seconds: float) -> dict[str, Any]:
    """bench/flash_kmeans_time.py in its own process, killed after `seconds`."""
    cmd = [sys.executable, str(FLASH_SCRIPT), "--out", str(out), "--rounds", str(args.rounds),
           "--calls", str(args.calls), "--warmup", str(max(args.warmup, 2))]
    with contextlib.suppress(OSError):
        out.unlink()  # a previous run's answer must not stand in for this one's
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=seconds,
                              check=False)
    except subprocess.TimeoutExpired:
        return {"status": "error", "reason": f"did not finish within {seconds:.0f} s"}
    try:
        return dict(json.loads(out.read_text(encoding="utf-8")))
    except (OSError, ValueError):
        tail = (proc.stdout + proc.stderr).strip().splitlines()[-3:]
        return {"status": "error", "reason": f"exit {proc.returncode}: {' | '.join(tail)}"}


class DeadlineReached(Exception):
    """--deadline passed: stop the step in flight (its worker is killed on the way out) and
    write what there is."""


def _deadline(_signum: int, _frame: Any) -> None:
    raise DeadlineReached


def arm_deadline(seconds: float | None) -> None:
    """Raise DeadlineReached in the main thread after `seconds` (None: disarm).  gpu_check.sh
    sets it a little before its own hard stop, so the tables and the JSON are always
    written, with whatever was not finished marked `skipped`."""
    if seconds is None or seconds <= 0:
        signal.setitimer(signal.ITIMER_REAL, 0)
        return
    signal.signal(signal.SIGALRM, _deadline)
    signal.setitimer(signal.ITIMER_REAL, seconds)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--budget", type=float, default=480.0,
                    help="seconds after which no new kernel is started")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--calls", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--seeds", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=60.0,
                    help="seconds a candidate may run on the GPU without progress")
    ap.add_argument("--backend", default="auto", choices=["auto", "pycuda", "torch"])
    ap.add_argument("--flash-timeout", type=float, default=150.0,
                    help="seconds for the flash-kmeans comparison (0: skip it)")
    ap.add_argument("--only", action="append", default=[],
                    help="run only examples whose path contains this text (repeatable)")
    ap.add_argument("--headline-only", action="store_true",
                    help="run only the headline comparisons")
    ap.add_argument("--deadline", type=float, default=None,
                    help="seconds after which the step in flight is stopped and the tables "
                         "are written with what is done")
    ap.add_argument("--out-dir", type=Path, default=RESULTS)
    ap.add_argument("--choose-toolkit", action="store_true",
                    help="print the toolkit bin/ to put first on PATH and why, then exit")
    return ap.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.choose_toolkit:
        print(choose_toolkit_lines(), end="")
        return 0
    probe = probe_gpu()
    if not probe.present:
        print(f"gpu_check: no CUDA device: {probe.reason}", file=sys.stderr)
        return 2
    t0 = time.monotonic()
    cc = probe.compute_capability
    out_dir: Path = args.out_dir
    refs = out_dir / "references"  # shared by the kernels of a shape, removed at the end
    opts = BenchOptions(seeds=tuple(range(args.seeds)),
                        timing=TimingConfig(args.warmup, args.rounds, args.calls, True),
                        timeout=args.timeout, backend=args.backend,
                        big_shape_bytes=BIG_SHAPE_BYTES, reference_cache=refs)
    toolkit = toolkit_report()
    print(f"gpu_check: {probe.name} (compute capability {cc[0]}.{cc[1]}, L2 "
          f"{probe.l2_bytes / 2**20:.0f} MiB); budget {args.budget:.0f} s", flush=True)
    print(f"gpu_check: toolkit {toolkit['used'] or 'none'}; {toolkit['reason']}", flush=True)
    todo = [(t, e) for t, e in entries()
            if not args.only or any(o in example_of(e) for o in args.only)]
    wanted = highlights((t.name, example_of(e)) for t, e in todo)
    rows: list[dict[str, Any]] = []
    table_rows: list[list[str]] = []
    reports: list[dict[str, Any]] = []
    runs: list[dict[str, Any]] = []
    notes: list[str] = []
    backend = args.backend
    flash: dict[str, Any] | None = None

    def add(example: str, task: Task, res: ShapeResult, arch_skipped: bool = False) -> None:
        rows.append(_row(example, task.name, res, arch_skipped))
        table_rows.append([example, *shape_row(res, True)])

    archs: dict[str, str | None] = {}
    steps = plan(todo, wanted, rest=not args.headline_only)
    current = 0
    arm_deadline(args.deadline)
    try:
        for current, step in enumerate(steps):  # noqa: B007 - the except clause reads it
            if isinstance(step, str):  # flash-kmeans, right after the headline kernels
                elapsed = time.monotonic() - t0
                seconds = flash_seconds(args, elapsed)
                if args.flash_timeout <= 0:
                    flash = {"status": "skipped", "reason": "--flash-timeout 0"}
                elif elapsed > args.budget or seconds < 20:
                    flash = {"status": "skipped", "reason": "time budget spent"}
                else:
                    print("  flash-kmeans (Triton) vs the torch reference ...", flush=True)
                    out_dir.mkdir(parents=True, exist_ok=True)
                    flash = run_flash(args, out_dir / "flash_kmeans.json", seconds)
                continue
            task, entry, shapes = step
            example = example_of(entry)
            if example not in archs:
                archs[example] = kernel_arch(task, entry)
            arch = archs[example]
            skip = arch_skip(arch, cc) if arch is not None else None
            elapsed = time.monotonic() - t0
            if skip is not None:
                if f"{example}: skipped ({skip})" not in notes:
                    notes.append(f"{example}: skipped ({skip})")
                for s in shapes:
                    add(example, task, ShapeResult(dict(s.dims), s.label, status="skipped",
                                                   error=skip), arch_skipped=True)
            elif elapsed > args.budget:
                notes.append(f"{example}: {len(shapes)} shape(s) not run, the time budget "
                             f"({args.budget:.0f} s) was spent")
                for s in shapes:
                    add(example, task, ShapeResult(dict(s.dims), s.label, status="skipped",
                                                   error="time budget spent"))
            else:
                print(f"  {example} on {task.name}: {len(shapes)} shapes ...", flush=True)
                try:
                    out = bench(ROOT / example, entry.kernel, task, replace(opts, shapes=shapes))
                except BenchSetupError as exc:
                    msg = str(exc) + "".join(f"\n      {d.code}: {d.message}"
                                             for d in exc.diagnostics[:3])
                    notes.append(f"{example}: {msg}")
                    for s in shapes:
                        add(example, task, ShapeResult(dict(s.dims), s.label, status="error",
                                                       correct=False, error=str(exc)))
                else:
                    backend = out.report.backend
                    reports.append(out.report.to_json())
                    rel = os.path.relpath(ROOT / example, out_dir)
                    runs += out.report.calibration_runs(Path(rel).as_posix())
                    for res in out.report.shapes:
                        add(example, task, res)
                    for d in out.diagnostics:
                        if d.severity.value in ("error", "warning"):
                            notes.append(f"{example}: {d.code} {d.message}")
                    print(f"    done in {out.elapsed_s:.0f} s", flush=True)
    except (DeadlineReached, KeyboardInterrupt):
        why = "stopped at the time limit"
        cause = f"--deadline {args.deadline:g} s" if args.deadline else "interrupted"
        notes.append(f"{why}: {len(steps) - current} step(s) not finished ({cause})")
        for step in steps[current:]:
            if isinstance(step, str):
                flash = flash or {"status": "skipped", "reason": why}
                continue
            task, entry, shapes = step
            for s in shapes:
                add(example_of(entry), task, ShapeResult(dict(s.dims), s.label,
                                                         status="skipped", error=why))
    finally:
        arm_deadline(None)

    shutil.rmtree(refs, ignore_errors=True)
    headers = ["example", "shape", "label", "correct", "max abs", "max rel", "ms",
               "baseline ms", "% of baseline", "TFLOP/s", "cv", "flags"]
    print()
    print(table(headers, table_rows), end="")
    head = headline_rows(wanted, rows, flash)
    print("\nheadline comparisons (x baseline: the baseline's time over the kernel's; above 1 "
          "is faster):")
    print(table(HEADERS, [r.cells() for r in head]), end="")
    for n in notes:
        print(f"note: {n}")
    print(f"toolkit: {toolkit['reason']}")
    elapsed = time.monotonic() - t0
    doc = {"schema": "cake.gpu_check/2", "device": probe.name,
           "compute_capability": list(cc), "backend": backend, "toolkit": toolkit,
           "elapsed_s": round(elapsed, 1), "headline": [r.to_json() for r in head],
           "flash_kmeans": flash, "rows": rows, "notes": notes, "reports": reports}
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "gpu_check.json").write_text(json.dumps(doc, indent=2) + "\n",
                                            encoding="utf-8")
    (out_dir / "gpu_check_runs.json").write_text(json.dumps(runs, indent=2) + "\n",
                                                 encoding="utf-8")
    skipped = sum(bool(r["arch_skip"]) for r in rows)
    print(f"\n{sum(bool(r['correct']) for r in rows)}/{len(rows)} shapes correct"
          + (f", {skipped} skipped for their architecture" if skipped else "")
          + f" in {elapsed:.0f} s; wrote {out_dir / 'gpu_check.json'}")
    return 0 if rows and all(row_passes(r) for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
