"""Emulation cost and reach: what `cake run --emulate` spends per example and shape, and
which planted lowering bugs it catches that the simulator cannot.

Per example: the host-compiler build of the lowered .cu, cold (an empty cache) and
cached (the same source again: hashing and a lookup).  Per example x shape (the task's
simulator shapes, plus the 128x256x64-tile sm_90a GEMM at M=N=256, K=512, whose target
is under a minute): one shape under the verification protocol (two input seeds, each
launched twice), in the runtime's default lazy order (asynchronous operations complete as
late as allowed) and in eager order (`EmulatedKernel(order="eager")`): the wall time of the
shape, the mean time of one emulated launch, fiber switches per launch, and the verdict.

Then the mutation table (tests/emulate/mutations.py): for each planted bug, how the
emulator catches it in either order (the default lazy order must; eager order completes
asynchronous copies at issue, so a missing wait passes there) and whether the simulator
does (it runs the .cake, which the mutation leaves unchanged, so it should not).  Writes
bench/results/emulate_bench.json.

With `--gpu` (a machine with an NVIDIA GPU and nvcc), each mutant is also built with nvcc
and run on the GPU under the runner's protocol, in a worker process with a timeout (a
mutant that deadlocks hangs the GPU kernel until the worker is killed): the column says
whether the planted bug is a real bug on the hardware, and how it shows there.

    python bench/emulate_bench.py [--only gemm_sm90] [--no-mutations] [--gpu] [--out PATH]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from cake_core.emulate.build import build_emulated  # noqa: E402
from cake_core.run.device import Device  # noqa: E402
from cake_core.run.emulated import EmulatedKernel  # noqa: E402
from cake_core.run.host_device import HostDevice  # noqa: E402
from cake_core.run.protocol import TimingConfig, run_shape  # noqa: E402
from cake_core.sim.program import SimKernel  # noqa: E402
from cake_core.sim.tasks_run import run_task  # noqa: E402
from cake_core.tasks import load_task  # noqa: E402

ORDERS = ("lazy", "eager")
EXAMPLES = [("gemm_sm90", "gemm_bf16"), ("tinygemm_sm90", "gemm_bf16"),
            ("gemm_sm80", "gemm_f16_sm80"), ("kmeans_assign_sm90", "kmeans_assign")]
#: Beyond the simulator shapes: the size docs/emulation.md sets a target for.
EXTRA = {"gemm_sm90": [({"M": 256, "N": 256, "K": 512}, "target: < 60 s")]}


def load_mutations() -> ModuleType:
    """tests/emulate/mutations.py, the catalogue the mutation test uses, by path."""
    path = ROOT / "tests" / "emulate" / "mutations.py"
    spec = importlib.util.spec_from_file_location("cake_emulate_mutations", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while decorating
    spec.loader.exec_module(module)
    return module


class TimedKernel(EmulatedKernel):
    """Accumulates the wall time spent inside launches (the emulated grid runs in them)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.seconds = 0.0
        self.switches = 0

    def launch(self, device: Device, buffers: Mapping[str, Any], dims: Mapping[str, int],
               scalars: Mapping[str, Any], stream: Any) -> None:
        t0 = time.perf_counter()
        try:
            super().launch(device, buffers, dims, scalars, stream)
        finally:
            self.seconds += time.perf_counter() - t0
            if self.last_report is not None:
                self.switches += int(self.last_report.stats.get("switches", 0) or 0)


def run_one(lib: Path, meta: dict[str, Any], task_name: str, dims: dict[str, int],
            order: str, mu: ModuleType) -> dict[str, Any]:
    task = load_task(task_name)
    kernel = TimedKernel(lib, meta, seed=0, order=order)
    kernel.prepare()
    entry = task.entry(str(meta["kernel"]), ROOT / str(meta["source"]))
    rename = dict(entry.params) if entry is not None else {}
    t0 = time.perf_counter()
    res = run_shape(HostDevice(), kernel, task, dims, rename=rename, seeds=(0, 1),
                    timing=TimingConfig(enabled=False))
    wall = time.perf_counter() - t0
    kernel.locate(res)
    launches = max(kernel.launches, 1)
    return {"outcome": mu.outcome(res), "seconds": wall, "launches": kernel.launches,
            "launch_s": kernel.seconds / launches, "switches": kernel.switches // launches,
            "error": res.error}


def measure_example(example: str, task_name: str, cache: Path, mu: ModuleType
                    ) -> dict[str, Any]:
    t0 = time.perf_counter()
    cu, meta = mu.lowered(example)
    lower_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    cold = build_emulated(cu, name=example, cache=cache)
    cold_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    warm = build_emulated(cu, name=example, cache=cache)
    cached_s = time.perf_counter() - t0
    assert not cold.cached and warm.cached and warm.path == cold.path
    task = load_task(task_name)
    entry = task.entry(str(meta["kernel"]), ROOT / str(meta["source"]))
    shapes = [(dict(s.dims), s.label) for s in task.shapes_for(entry, sim=True)]
    shapes += EXTRA.get(example, [])
    rows = []
    for dims, label in shapes:
        row: dict[str, Any] = {"dims": dims, "label": label}
        for order in ORDERS:
            row[order] = run_one(cold.path, meta, task_name, dims, order, mu)
        rows.append(row)
    return {"example": example, "task": task_name, "compiler": cold.compiler.label,
            "lower_s": lower_s, "build_cold_s": cold_s, "build_cached_s": cached_s,
            "shapes": rows}


def sim_passes(example: str, task_name: str, dims: Mapping[str, int], mu: ModuleType
               ) -> bool:
    sk = SimKernel.from_file(mu.EXAMPLES / f"{example}.cake")
    report = run_task(load_task(task_name), sk, shapes=[dict(dims)], n_schedules=1, seed=0)
    return bool(report.passed)


def measure_mutations(cache: Path, mu: ModuleType) -> list[dict[str, Any]]:
    rows = []
    sim: dict[tuple[str, str, tuple[tuple[str, int], ...]], bool] = {}
    for m in mu.MUTATIONS:
        key = (m.example, m.task, tuple(sorted(m.dims.items())))
        if key not in sim:
            sim[key] = sim_passes(m.example, m.task, m.dims, mu)
        cu, meta = mu.lowered(m.example)
        base = build_emulated(cu, name=m.example, cache=cache)
        t0 = time.perf_counter()
        lib = build_emulated(mu.apply(m), name=f"{m.example}_{m.name}", cache=cache)
        build_s = time.perf_counter() - t0
        row: dict[str, Any] = {"name": m.name, "example": m.example, "dims": dict(m.dims),
                               "expected": list(m.caught_by), "build_s": build_s,
                               "sim_catches": not sim[key]}
        for order in ORDERS:
            row[f"unmutated_{order}"] = run_one(base.path, meta, m.task, dict(m.dims),
                                                order, mu)["outcome"]
            got = run_one(lib.path, meta, m.task, dict(m.dims), order, mu)
            row[order] = got["outcome"]
            row[f"{order}_s"] = got["seconds"]
        unmutated_ok = all(row[f"unmutated_{o}"] == "ok" for o in ORDERS)
        # the default order (`cake run --emulate`) must catch it; eager order completes
        # asynchronous copies at issue, so a missing wait may pass there by design
        row["caught"] = unmutated_ok and row["lazy"] in m.caught_by
        row["eager_caught"] = unmutated_ok and row["eager"] != "ok"
        rows.append(row)
    return rows


def on_gpu(cu: str, meta: dict[str, Any], task_name: str, dims: Mapping[str, int],
           name: str) -> str:
    """How one (possibly mutated) lowered kernel fares on this machine's GPU: "ok", "wrong",
    or the failed shape's status (error, crash, timeout), under the runner's protocol in
    a worker subprocess.  The nvcc build goes to the user's cache (`CAKE_CACHE_DIR`), as
    `cake run`'s do."""
    from cake_core.run.build import build_library, nvcc_target
    from cake_core.run.device import probe_gpu
    from cake_core.run.runner import _Limits, run_in_workers

    task = load_task(task_name)
    probe = probe_gpu()
    lib = build_library(cu, nvcc_target(str(meta["arch"]), probe.compute_capability),
                        name=name)
    entry = task.entry(str(meta["kernel"]), ROOT / str(meta["source"]))
    spec = {"task": task.path, "backend": "auto",
            "kernel": {"kind": "cuda", "library": str(lib.path), "meta": meta,
                       "target": lib.target},
            "rename": dict(entry.params) if entry is not None else {}, "seeds": [0, 1],
            "flush_bytes": 2 * probe.l2_bytes,
            "timing": {"warmup": 0, "rounds": 0, "calls": 0, "enabled": False},
            "baseline": {"kind": "none"}, "fake": {}}
    (res,), _ = run_in_workers(spec, [{"index": 0, "dims": dict(dims), "label": ""}],
                               _Limits(20.0, 120.0))
    if res.status == "ok" and res.correct:
        return "ok"
    return "wrong" if res.status == "wrong" else res.status


def measure_on_gpu(rows: list[dict[str, Any]], mu: ModuleType) -> None:
    """Add `gpu` and `unmutated_gpu` to each mutation row."""
    for m, row in zip(mu.MUTATIONS, rows, strict=True):
        cu, meta = mu.lowered(m.example)
        row["unmutated_gpu"] = on_gpu(cu, meta, m.task, m.dims, m.example)
        row["gpu"] = on_gpu(mu.apply(m), meta, m.task, m.dims, f"{m.example}_{m.name}")
        print(f"  on the GPU: {m.name}: {row['gpu']} (unmutated: {row['unmutated_gpu']})",
              flush=True)


def _dims(d: Mapping[str, int]) -> str:
    return ",".join(f"{k}={v}" for k, v in d.items())


def print_examples(results: list[dict[str, Any]]) -> None:
    head = (f"{'example':<20}{'shape':<22}{'lazy':>9}{'/launch':>10}{'eager':>9}"
            f"{'/launch':>10}{'switches':>11}  verdict")
    print(head)
    print("-" * (len(head) + 12))
    for r in results:
        print(f"{r['example']:<20}build with {r['compiler']}: cold {r['build_cold_s']:.2f} s, "
              f"cached {r['build_cached_s'] * 1e3:.1f} ms (lowering {r['lower_s']:.2f} s)")
        for s in r["shapes"]:
            lazy, eager = s["lazy"], s["eager"]
            verdict = lazy["outcome"] if lazy["outcome"] == eager["outcome"] else \
                f"lazy {lazy['outcome']}, eager {eager['outcome']}"
            label = f"  ({s['label']})" if s["label"] else ""
            print(f"{'':<20}{_dims(s['dims']):<22}{lazy['seconds']:>8.2f}s"
                  f"{lazy['launch_s'] * 1e3:>8.1f}ms{eager['seconds']:>8.2f}s"
                  f"{eager['launch_s'] * 1e3:>8.1f}ms{lazy['switches']:>11,}  {verdict}{label}")


def print_mutations(rows: list[dict[str, Any]]) -> None:
    head = (f"{'mutation':<28}{'example':<15}{'emulate (lazy / eager)':<48}{'sim':<10}"
            f"{'build':>7}{'run':>7}")
    print(head)
    print("-" * len(head))
    for r in rows:
        how = r["lazy"] if r["lazy"] == r["eager"] else f"{r['lazy']} / {r['eager']}"
        emu = ("caught: " if r["caught"] else "MISSED: ") + how
        if r["caught"] and not r["eager_caught"]:
            emu += " (eager passes)"
        sim = "caught" if r["sim_catches"] else "passes"
        gpu = f"  gpu: {r['gpu']}" if "gpu" in r else ""
        print(f"{r['name']:<28}{r['example']:<15}{emu:<48}{sim:<10}{r['build_s']:>6.1f}s"
              f"{r['lazy_s']:>6.2f}s{gpu}")
    caught = sum(r["caught"] for r in rows)
    by_sim = sum(r["sim_catches"] for r in rows)
    eager = sum(r["eager_caught"] for r in rows)
    print(f"\nemulation catches {caught} of {len(rows)} in the default (lazy) order, {eager} in "
          f"eager order, the unmutated kernel passing in both; the simulator {by_sim}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", action="append", default=[],
                    help="an example to measure (repeatable); all by default")
    ap.add_argument("--no-mutations", action="store_true", help="skip the mutation table")
    ap.add_argument("--gpu", action="store_true", help="also run every mutant on the GPU")
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results" /
                    "emulate_bench.json")
    args = ap.parse_args()
    mu = load_mutations()
    chosen = [e for e in EXAMPLES if not args.only or e[0] in args.only]
    with tempfile.TemporaryDirectory(prefix="cake-emu-bench-") as tmp:
        cache = Path(tmp)  # cold builds need an empty cache
        results = [measure_example(ex, task, cache, mu) for ex, task in chosen]
        print_examples(results)
        rows = [] if args.no_mutations else measure_mutations(cache, mu)
        if rows and args.gpu:
            measure_on_gpu(rows, mu)
    if rows:
        print()
        print_mutations(rows)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"examples": results, "mutations": rows}, indent=2)
                        + "\n")
    print(f"\nwrote {args.out}; wall times on this machine, one shape = 2 input seeds x 2 "
          "launches")


if __name__ == "__main__":
    main()
