"""Every example kernel on its task on this machine's GPU, under the runner's full contract.

For each task in examples/tasks and each kernel entry of it: build, check on the task's
GPU shapes (poisoned outputs, inputs unchanged, candidate -> reference -> candidate,
re-check after timing), time against the baseline (cuBLAS through torch for the GEMMs, a
torch distance-GEMM + argmin for k-means), and print one table: example, shape, correct?,
time, % of the baseline's speed, TFLOP/s.  Then the headline comparisons: the sm_90 GEMM
against cuBLAS bf16 at 4096^3 and 8192^3, and k-means assignment at B=32, N=65536, K=1024
(D=128) against the torch reference.  sm_80 examples are compiled for the GPU at hand, so
they run on Hopper too.

Bounded: a time budget (default 480 s) stops starting new kernels when it runs out, timing
rounds are few, every candidate runs in a subprocess killed after --timeout seconds
without progress, and shapes moving more than 256 MB run one seed (their numpy
references dominate the wall time).  Writes bench/results/gpu_check.json (the table and
every report) and bench/results/gpu_check_runs.json (trusted runs, for `cake calibrate`).

    python bench/gpu_check.py [--budget 480] [--rounds 3] [--timeout 60] [--backend auto]

Exit status: 0 every shape correct, 1 a shape wrong or failed, 2 no GPU.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from cake_cli.gpu_run import shape_row, table  # noqa: E402
from cake_core.run.device import probe_gpu  # noqa: E402
from cake_core.run.protocol import TimingConfig  # noqa: E402
from cake_core.run.results import ShapeResult  # noqa: E402
from cake_core.run.runner import BenchOptions, BenchSetupError, bench  # noqa: E402
from cake_core.tasks import KernelEntry, Shape, Task, load_task, task_names  # noqa: E402

RESULTS = ROOT / "bench" / "results"

#: (what, task, example, dims): the comparisons printed after the table.
HIGHLIGHTS = (
    ("sm_90 GEMM vs cuBLAS bf16", "gemm_bf16", "examples/gemm_sm90.cake",
     {"M": 4096, "N": 4096, "K": 4096}),
    ("sm_90 GEMM vs cuBLAS bf16", "gemm_bf16", "examples/gemm_sm90.cake",
     {"M": 8192, "N": 8192, "K": 8192}),
    ("k-means assign vs torch (D=128)", "kmeans_assign", "examples/kmeans_assign_sm90.cake",
     {"B": 32, "N": 65536, "K": 1024}),
)
BIG_SHAPE_BYTES = 256e6


def example_of(entry: KernelEntry) -> str:
    """The entry's kernel file relative to the repository (a task names it relative to
    itself)."""
    return Path(os.path.relpath(entry.path, ROOT)).as_posix()


def entries() -> list[tuple[Task, KernelEntry]]:
    """Every (task, kernel entry); the ones with headline comparisons first."""
    out = [(t, e) for name in task_names() for t in [load_task(name)] for e in t.kernels]
    first = {(h[1], h[2]) for h in HIGHLIGHTS}
    return sorted(out, key=lambda te: (te[0].name, example_of(te[1])) not in first)


def shapes_for(task: Task, entry: KernelEntry) -> list[Shape]:
    shapes = list(task.shapes_for(entry, sim=False))
    have = [dict(s.dims) for s in shapes]
    for _, tname, src, dims in HIGHLIGHTS:
        if tname == task.name and src == example_of(entry) and dims not in have:
            shapes.append(Shape(dims, label="headline comparison"))
    return shapes


def _row(example: str, task: str, s: ShapeResult) -> dict[str, Any]:
    return {"example": example, "task": task, "dims": s.dims, "label": s.label,
            "status": s.status, "correct": s.correct, "ms": s.candidate_ms,
            "baseline_ms": s.baseline_ms, "pct_of_baseline": s.pct_of_baseline,
            "tflops": s.tflops, "cv": s.cv, "floor_ms": s.floor_ms, "flags": s.flags,
            "error": s.error}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--budget", type=float, default=480.0,
                    help="seconds after which no new kernel is started")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--calls", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--seeds", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=60.0,
                    help="seconds a candidate may run on the GPU without progress")
    ap.add_argument("--backend", default="auto", choices=["auto", "pycuda", "torch"])
    args = ap.parse_args()

    probe = probe_gpu()
    if not probe.present:
        print(f"gpu_check: no CUDA device: {probe.reason}", file=sys.stderr)
        return 2
    t0 = time.monotonic()
    opts = BenchOptions(seeds=tuple(range(args.seeds)),
                        timing=TimingConfig(args.warmup, args.rounds, args.calls, True),
                        timeout=args.timeout, backend=args.backend,
                        big_shape_bytes=BIG_SHAPE_BYTES)
    print(f"gpu_check: {probe.name} (compute capability {probe.compute_capability[0]}."
          f"{probe.compute_capability[1]}, L2 {probe.l2_bytes / 2**20:.0f} MiB); budget "
          f"{args.budget:.0f} s", flush=True)
    rows: list[dict[str, Any]] = []
    table_rows: list[list[str]] = []
    reports: list[dict[str, Any]] = []
    runs: list[dict[str, Any]] = []
    notes: list[str] = []
    backend = args.backend
    for task, entry in entries():
        example = example_of(entry)
        shapes = shapes_for(task, entry)
        elapsed = time.monotonic() - t0
        if elapsed > args.budget:
            notes.append(f"{example}: not run, the time budget ({args.budget:.0f} s) was spent")
            for s in shapes:
                res = ShapeResult(dict(s.dims), s.label, status="skipped",
                                  error="time budget spent")
                rows.append(_row(example, task.name, res))
                table_rows.append([example, *shape_row(res, True)])
            continue
        print(f"  {example} on {task.name}: {len(shapes)} shapes ...", flush=True)
        try:
            out = bench(ROOT / example, entry.kernel, task, replace(opts, shapes=shapes))
        except BenchSetupError as exc:
            msg = str(exc) + "".join(f"\n      {d.code}: {d.message}" for d in exc.diagnostics[:3])
            notes.append(f"{example}: {msg}")
            for s in shapes:
                res = ShapeResult(dict(s.dims), s.label, status="error", correct=False,
                                  error=str(exc))
                rows.append(_row(example, task.name, res))
                table_rows.append([example, *shape_row(res, True)])
            continue
        backend = out.report.backend
        reports.append(out.report.to_json())
        rel = os.path.relpath(ROOT / example, RESULTS)
        runs += out.report.calibration_runs(Path(rel).as_posix())
        for s in out.report.shapes:
            rows.append(_row(example, task.name, s))
            table_rows.append([example, *shape_row(s, True)])
        for d in out.diagnostics:
            if d.severity.value in ("error", "warning"):
                notes.append(f"{example}: {d.code} {d.message}")
        print(f"    done in {out.elapsed_s:.0f} s", flush=True)

    headers = ["example", "shape", "label", "correct", "max abs", "max rel", "ms",
               "baseline ms", "% of baseline", "TFLOP/s", "cv", "flags"]
    print()
    print(table(headers, table_rows), end="")
    print("\nheadline comparisons:")
    highlights = []
    for what, tname, src, dims in HIGHLIGHTS:
        row = next((r for r in rows if r["example"] == src and r["task"] == tname
                    and r["dims"] == dims), None)
        shape = ",".join(f"{k}={v}" for k, v in dims.items())
        if row is None or row["ms"] is None:
            why = row["error"] or row["status"] if row else "not run"
            print(f"  {what} at {shape}: no time ({why})")
        else:
            pct = row["pct_of_baseline"]
            base = f"{row['baseline_ms']:.4g} ms" if row["baseline_ms"] else "not timed"
            print(f"  {what} at {shape}: {row['ms']:.4g} ms vs {base}"
                  + (f" = {pct:.1f}% of the baseline's speed" if pct else "")
                  + (f", {row['tflops']:.1f} TFLOP/s" if row["tflops"] else "")
                  + (f"  [{', '.join(row['flags'])}]" if row["flags"] else ""))
        highlights.append({"what": what, "task": tname, "example": src, "dims": dims,
                           "row": row})
    for n in notes:
        print(f"note: {n}")
    elapsed = time.monotonic() - t0
    doc = {"schema": "cake.gpu_check/1", "device": probe.name,
           "compute_capability": list(probe.compute_capability), "backend": backend,
           "elapsed_s": round(elapsed, 1), "rows": rows, "highlights": highlights,
           "notes": notes, "reports": reports}
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "gpu_check.json").write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    (RESULTS / "gpu_check_runs.json").write_text(json.dumps(runs, indent=2) + "\n",
                                                 encoding="utf-8")
    print(f"\n{sum(bool(r['correct']) for r in rows)}/{len(rows)} shapes correct in "
          f"{elapsed:.0f} s; wrote {(RESULTS / 'gpu_check.json').relative_to(ROOT)}")
    return 0 if rows and all(r["correct"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
