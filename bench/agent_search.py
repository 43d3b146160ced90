"""The offline policy against random tactic search, at equal evaluation budgets.

Both policies drive the same graph (`cake evolve`, offline) on the same task with the
same budget of evaluations, over several RNG seeds.  They start from a de-tuned copy of
the task's kernel (bench/data/agent_search/gemm_sm80_detuned.cake, reference mode): the
tuned kernels of examples/ already sit at the cost model's optimum for the installed
tactics, which leaves a search nothing to find.  For each run we record the best
predicted speedup after every evaluation.  "Best found" is the best any run reached on
the task; a run's score is the number of evaluations it needed to get within 5% of it
(budget + 1 when it never did).  Target: the offline policy needs at most a third of the
evaluations random search needs.

Evaluations are cached by kernel hash across runs (the same kernel gets the same result),
and the compile gate is left out: neither changes which kernels a policy visits, only
how long the benchmark takes.

    .venv/bin/python bench/agent_search.py [--task gemm_f16_sm80] [--seeds 10] [--evals 30]

Prints a table and writes bench/results/agent_search.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

WITHINS = (1.05, 1.01)
"""Tolerances: within 5% of the best found (the target's), and within 1%."""


def run_policy(policy: str, seed: int, args: argparse.Namespace, shared: dict[str, Any],
               run_dir: Path) -> dict[str, Any]:
    from cake_agents.config import EvolveConfig
    from cake_agents.run import evolve
    from cake_agents.store import RunsStore

    cfg = EvolveConfig(task=args.task, run_dir=str(run_dir), budget_evals=args.evals,
                       seed_kernel=args.seed_kernel or None,
                       mode="reference" if args.seed_kernel else "clean",
                       seed_rng=seed, policy=policy, patience=10_000, executor="inline",
                       gates=("static", "sim", "cost"), sim_schedules=args.schedules)
    t0 = time.perf_counter()
    summary = evolve(cfg, executor=shared["executor"], lsp=shared["lsp"],
                     lab=shared["labs"].get(policy), write_report=False)
    seconds = time.perf_counter() - t0
    store = RunsStore(run_dir / "runs.sqlite")
    rows = store.progress(summary.run_id)
    store.close()
    curve, best = [], 0.0
    for r in rows:
        if r["status"] == "pass" and r["score"] is not None:
            best = max(best, r["score"])
        curve.append(best)
    return {"policy": policy, "seed": seed, "run_id": summary.run_id, "curve": curve,
            "best": best, "evals": summary.evals, "stop": summary.stop_reason,
            "seconds": round(seconds, 2)}


def evals_to_reach(curve: list[float], target: float, budget: int) -> int:
    for i, v in enumerate(curve, start=1):
        if v >= target:
            return i
    return budget + 1


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--task", default="gemm_f16_sm80")
    ap.add_argument("--seed-kernel", default=str(ROOT / "bench" / "data" / "agent_search" /
                                                 "gemm_sm80_detuned.cake"),
                    help="Start from this kernel (reference mode); '' for the task's own.")
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--evals", type=int, default=30)
    ap.add_argument("--schedules", type=int, default=1)
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "agent_search.json"))
    args = ap.parse_args()

    from cake_agents.config import EvolveConfig
    from cake_agents.context import load_task_info
    from cake_agents.executor import CachingExecutor, InlineExecutor
    from cake_agents.lsp_client import CakeLspClient
    from cake_agents.policy import TacticLab
    from cake_core.plugins import load_config, load_plugins

    info = load_task_info(EvolveConfig(task=args.task, seed_kernel=args.seed_kernel or None))
    tactics = [t for _, t in load_plugins(load_config()).tactics()]
    lab = TacticLab(tactics, info.kernel, info.arch)
    results: list[dict[str, Any]] = []
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="cake-bench-") as tmp, \
            CakeLspClient(root=ROOT) as lsp:
        shared = {"executor": CachingExecutor(InlineExecutor()), "lsp": lsp,
                  "labs": {"evolve": lab, "random": lab}}
        for seed in range(args.seeds):
            for policy in ("evolve", "random"):
                r = run_policy(policy, seed, args, shared, Path(tmp))
                results.append(r)
                print(f"  {policy:<7} seed {seed:>2}: best {r['best']:.3f}x after "
                      f"{r['evals']} evaluations ({r['seconds']:.1f} s)", flush=True)
    best_found = max(r["best"] for r in results)
    table: dict[str, Any] = {}
    for within in WITHINS:
        target = best_found / within
        rows = {}
        for policy in ("evolve", "random"):
            rs = [r for r in results if r["policy"] == policy]
            need = [evals_to_reach(r["curve"], target, args.evals) for r in rs]
            for r, n in zip(rs, need, strict=True):
                r.setdefault("evals_to_within", {})[f"{within - 1:.0%}"] = n
            rows[policy] = {
                "runs": len(rs), "reached": sum(n <= args.evals for n in need),
                "median_evals": statistics.median(need),
                "mean_evals": round(statistics.mean(need), 2),
                # the seed's evaluation is the same for both: what the search itself spent
                "mean_search_evals": round(statistics.mean(n - 1 for n in need), 2),
                "mean_best": round(statistics.mean(r["best"] for r in rs), 4)}
        rows["ratio_mean_evals"] = round(rows["evolve"]["mean_evals"]
                                         / rows["random"]["mean_evals"], 3)
        rows["ratio_search_evals"] = round(rows["evolve"]["mean_search_evals"]
                                           / max(rows["random"]["mean_search_evals"], 1e-9), 3)
        table[f"{within - 1:.0%}"] = rows
    print()
    start = Path(args.seed_kernel).name if args.seed_kernel else "the task's kernel"
    print(f"task {args.task}, from {start}: best found {best_found:.3f}x predicted speedup "
          f"over the seed; {args.seeds} seeds x {args.evals} evaluations per policy")
    print(f"{'within':<7} {'policy':<8} {'reached':>8} {'median':>7} {'mean':>6} "
          f"{'mean w/o seed':>14} {'mean best':>10}")
    for tol, rows in table.items():
        for policy in ("evolve", "random"):
            row = rows[policy]
            print(f"{tol:<7} {policy:<8} {row['reached']:>5}/{row['runs']:<2} "
                  f"{row['median_evals']:>7} {row['mean_evals']:>6} "
                  f"{row['mean_search_evals']:>14} {row['mean_best']:>9.3f}x")
        print(f"{tol:<7} offline/random: {rows['ratio_mean_evals']:.2f} of the evaluations, "
              f"{rows['ratio_search_evals']:.2f} of the search's own (target <= 0.33)")
    print("(evaluations to get within the tolerance of the best found; the first is the "
          "seed's; a run that never got there counts as budget + 1)")
    ratio = table["5%"]["ratio_mean_evals"]
    out = {"schema": "cake.bench.agent_search/1", "task": args.task, "seeds": args.seeds,
           "evals": args.evals, "seed_kernel": args.seed_kernel, "best_found": best_found,
           "table": table, "ratio_mean_evals_within_5pct": ratio,
           "seconds": round(time.perf_counter() - t0, 1), "runs": results}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=2) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
