"""`cake experiment`: the same task, model and budgets through several arms, repeated.

The `cake` arm is `cake evolve` as it is: the model writes CAKE IR, checked by the
language server, simulated, priced, compiled.  The `cuda` arm (`cuda_arm.py`) runs the
same graph with the model writing CUDA C++ gated by nvcc and the GPU runner only.  Each
arm runs `repeats` times (RNG seeds `seed_rng`, `seed_rng + 1`, ...) and the table gives
the median of each figure over the repeats:

- `best predicted`: the best kernel's speedup over the seed by the cost model (the cake
  arm only: the cuda arm's CUDA is not priced);
- `best measured`: on a GPU, the best kernel's speedup over the task's library baseline
  (geometric mean over the shapes the runner timed); "no GPU" elsewhere;
- `compiled`: candidates nvcc/ptxas accepted, of those that reached the compiler;
- `passed`: candidates that passed every gate that ran; `evals`, `tokens`, `usd`.

Without a GPU the two arms share no speed figure: the cake arm's is a prediction, the
cuda arm can only compile; the table says so instead of comparing unlike numbers.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from cake_agents.config import EvolveConfig
from cake_agents.store import STORE_NAME, RunsStore

COMPILE_GATES = ("ptxas", "cuda-compile")


@dataclass
class ArmRun:
    arm: str
    repeat: int
    run_id: str
    stop_reason: str
    evals: int
    proposed: int
    passed: int
    compiled: int
    compile_tried: int
    tokens: int
    usd: float | None
    """None when the price is unknown (litellm does not know the model, none was given)."""
    best_predicted: float | None
    best_measured: float | None


def measured_speedup(detail: dict[str, Any]) -> float | None:
    """Geometric mean over the timed shapes of the library baseline's time over the
    kernel's (None without GPU measurements)."""
    m, b = detail.get("measured") or {}, detail.get("measured_baseline") or {}
    ratios = [b[k] / t for k, t in m.items() if k in b and t and t > 0]
    return math.exp(sum(map(math.log, ratios)) / len(ratios)) if ratios else None


def arm_run(store: RunsStore, arm: str, repeat: int, summary: Any) -> ArmRun:
    evals = store.evaluations(summary.run_id)
    results = {r["hash"]: r for r in evals if r["gate"] == "_result"}
    compiles = [r for r in evals if r["gate"] in COMPILE_GATES
                and r["status"] in ("pass", "fail")]
    measured = [s for s in (measured_speedup(r["detail"]) for r in results.values()
                            if r["status"] == "pass") if s is not None]
    usage = summary.usage or {}
    return ArmRun(arm, repeat, summary.run_id, summary.stop_reason, summary.evals,
                  summary.proposed, sum(r["status"] == "pass" for r in results.values()),
                  sum(r["status"] == "pass" for r in compiles), len(compiles),
                  int(usage.get("tokens_in", 0) + usage.get("tokens_out", 0)),
                  float(usage["usd"]) if usage.get("usd") else None,
                  summary.best_score if arm == "cake" else None,
                  max(measured) if measured else None)


def _median(xs: list[float | None]) -> float | None:
    vals = [x for x in xs if x is not None]
    return statistics.median(vals) if vals else None


def run_experiment(config: EvolveConfig, arms: list[str], repeats: int, *,
                   evolve_kw: dict[str, Any] | None = None,
                   on_run: Callable[[ArmRun], None] | None = None) -> dict[str, Any]:
    """Run every arm `repeats` times with `config` (its arm and RNG seed replaced)."""
    from cake_agents.cuda_arm import availability
    from cake_agents.run import evolve

    gpu = availability().gpu
    runs: list[ArmRun] = []
    aborted = ""
    for arm in arms:
        for r in range(repeats):
            if aborted:
                break
            cfg = replace(config, arm=arm, seed_rng=config.seed_rng + r)
            summary = evolve(cfg, **(evolve_kw or {}))
            store = RunsStore(Path(config.run_dir) / STORE_NAME)
            try:
                got = arm_run(store, arm, r, summary)
            finally:
                store.close()
            runs.append(got)
            if on_run is not None:
                on_run(got)
            if summary.exit_code == 2:  # a refused key: every later run would be refused
                aborted = summary.stop_reason
    rows = []
    for arm in arms:
        mine = [x for x in runs if x.arm == arm]
        rows.append({
            "arm": arm, "runs": len(mine),
            "best_predicted": _median([x.best_predicted for x in mine]),
            "best_measured": _median([x.best_measured for x in mine]),
            "compiled": _median([x.compiled for x in mine]),
            "compile_tried": _median([x.compile_tried for x in mine]),
            "passed": _median([x.passed for x in mine]),
            "evals": _median([x.evals for x in mine]),
            "tokens": _median([x.tokens for x in mine]),
            "usd": _median([x.usd for x in mine])})
    return {"schema": "cake.experiment/1", "task": config.task, "model": config.model,
            "budget_tokens": config.budget_tokens, "budget_evals": config.budget_evals,
            "repeats": repeats, "gpu": gpu, "arms": rows, "runs": [asdict(x) for x in runs],
            "aborted": aborted}


def markdown(result: dict[str, Any]) -> str:
    def num(x: Any, fmt: str = "{:.0f}") -> str:
        return "-" if x is None else fmt.format(x)

    lines = [f"Task `{result['task']}`, model `{result['model']}`, token budget "
             f"{result['budget_tokens'] or '-'}, median of {result['repeats']} runs per arm.",
             "",
             "| arm | best predicted | best measured | compiled | passed | evals | tokens | "
             "cost |",
             "|---|---|---|---|---|---|---|---|"]
    for r in result["arms"]:
        measured = num(r["best_measured"], "{:.3f}x") if result["gpu"] else "no GPU"
        lines.append(f"| {r['arm']} | {num(r['best_predicted'], '{:.3f}x')} | {measured} | "
                     f"{num(r['compiled'])}/{num(r['compile_tried'])} | {num(r['passed'])} | "
                     f"{num(r['evals'])} | {num(r['tokens'])} | {num(r['usd'], '${:.4f}')} |")
    lines.append("")
    lines.append("best predicted: cost-model speedup over the seed (the cake arm only); "
                 "best measured: speedup over the task's library baseline on the GPU; "
                 "cost: - where the model's price is unknown.")
    if not result["gpu"]:
        lines.append("No GPU here: the cuda arm could only compile its candidates, so the "
                     "arms share no speed figure.")
    return "\n".join(lines) + "\n"
