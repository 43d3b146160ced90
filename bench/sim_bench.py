"""Simulator speed: the sm_90 GEMM example at 256x256x256 and the k-means kernel at a small
shape, one schedule each.  Target: under 10 s per case on a laptop-class CPU.

Prints the wall time (best of --repeat), the simulated IR ops, scheduling steps and
asynchronous operations per second, the simulated FLOP rate, and where the time goes
(from one timed run): issuing ops by primitive family, completing asynchronous work by
kind (a wgmma's completion is its numpy matmul plus the checked smem reads), and the
rest -- interpreter, scheduler, global-memory setup.  The largest share is what bounds
the speed.  Writes bench/results/sim_bench.json.

    python bench/sim_bench.py [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from cake_core.ir.kernel import Op  # noqa: E402
from cake_core.primitives.facets import Unsupported  # noqa: E402
from cake_core.sim import RoundRobin, SimContext, SimKernel, simulate  # noqa: E402
from cake_core.sim.interp import Facet  # noqa: E402
from cake_core.sim.runstate import BlockState  # noqa: E402
from cake_core.sim.state import AsyncOp  # noqa: E402
from cake_core.tasks import load_task  # noqa: E402

CASES = [
    ("gemm_sm90 256x256x256", "examples/gemm_sm90.cake", "gemm_bf16",
     {"M": 256, "N": 256, "K": 256}, 2 * 256 * 256 * 256),
    ("kmeans_assign_sm90 B=2 N=512 K=512", "examples/kmeans_assign_sm90.cake",
     "kmeans_assign", {"B": 2, "N": 512, "K": 512}, 2 * 2 * 512 * 512 * 128),
]

def profile(sk: SimKernel, dims: dict[str, int], inputs: dict) -> dict[str, float]:
    """Share of one run's wall time by where it went: issuing ops (by primitive family),
    completing asynchronous work (by kind), and the rest -- the interpreter's generators,
    the scheduler, argument evaluation, setting up and decoding global memory."""
    from cake_core.primitives.registry import builtin_registry
    from cake_core.sim import engine, interp

    spent: dict[str, float] = {}

    def timed(fn: Facet, label: str) -> Facet:
        def run(op: Op, ctx: SimContext) -> object:
            t0 = time.perf_counter()
            try:
                return fn(op, ctx)
            finally:
                spent[label] = spent.get(label, 0.0) + time.perf_counter() - t0
        return run

    saved_facets = dict(interp._FACETS)
    saved_complete = engine._complete

    def complete(ctx: SimContext, block: BlockState, a: AsyncOp) -> None:
        t0 = time.perf_counter()
        try:
            saved_complete(ctx, block, a)
        finally:
            label = f"complete {a.kind}"
            spent[label] = spent.get(label, 0.0) + time.perf_counter() - t0

    for prim in builtin_registry().all():
        fn = prim.facet("simulate")
        if not isinstance(fn, Unsupported):
            interp._FACETS[id(prim)] = timed(fn, f"issue {prim.family} ops")
    engine._complete = complete
    try:
        t0 = time.perf_counter()
        simulate(sk, dims, inputs, schedule=RoundRobin())
        total = time.perf_counter() - t0
    finally:
        interp._FACETS.clear()
        interp._FACETS.update(saved_facets)
        engine._complete = saved_complete
    shares = {k: v / total for k, v in spent.items()}
    shares["interpreter, scheduler, setup"] = max(0.0, 1.0 - sum(shares.values()))
    return shares


def measure(name: str, source: str, task_name: str, dims: dict[str, int], flops: int,
            repeat: int) -> dict[str, object]:
    sk = SimKernel.from_file(ROOT / source)
    task = load_task(task_name)
    entry = task.entry(sk.name, ROOT / source)
    rename = dict(entry.params) if entry is not None else {}
    import numpy as np

    data = task.inputs(dims, np.random.default_rng(0))
    inputs = {rename.get(k, k): v for k, v in data.items()}
    best = float("inf")
    result = None
    for _ in range(repeat):
        t0 = time.perf_counter()
        result = simulate(sk, dims, inputs, schedule=RoundRobin())
        best = min(best, time.perf_counter() - t0)
    assert result is not None
    want = task.reference(data, dims)
    ok = all(task.judge(n, result.outputs[rename.get(n, n)], want[n], data, dims,
                        sk.tensor_params()[rename.get(n, n)].dtype.value).passed
             for n in task.outputs)
    shares = profile(sk, dims, inputs)
    bound = max(shares, key=lambda k: shares[k])
    return {
        "name": name, "dims": dims, "seconds": best, "correct": ok,
        "blocks": result.blocks, "ir_ops": result.ops, "steps": result.steps,
        "async_ops": result.async_ops, "ops_per_s": result.ops / best,
        "steps_per_s": result.steps / best, "sim_gflops": flops / best / 1e9,
        "findings": len(result.diagnostics), "time_shares": shares, "bound_by": bound,
        "under_10s": best < 10.0,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    rows = [measure(*c, args.repeat) for c in CASES]
    head = (f"{'case':<36}{'time':>9}{'blocks':>8}{'IR ops/s':>11}{'steps/s':>10}"
            f"{'sim GFLOP/s':>13}  bound by")
    print(head)
    print("-" * (len(head) + 12))
    for r in rows:
        print(f"{r['name']:<36}{r['seconds']:>8.3f}s{r['blocks']:>8}{r['ops_per_s']:>11,.0f}"
              f"{r['steps_per_s']:>10,.0f}{r['sim_gflops']:>13.2f}  {r['bound_by']}"
              + ("" if r["correct"] else "  (WRONG RESULT)"))
        shares = r["time_shares"]
        assert isinstance(shares, dict)
        print("    " + ", ".join(f"{k} {v:.0%}" for k, v in
                                 sorted(shares.items(), key=lambda kv: -kv[1])))
    out = ROOT / "bench" / "results" / "sim_bench.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"repeat": args.repeat, "rows": rows}, indent=2) + "\n")
    print(f"\nwrote {out.relative_to(ROOT)}; one round-robin schedule per case, "
          "all blocks, target < 10 s each")


if __name__ == "__main__":
    main()
