"""The archivist: keeps the population, the per-bucket winners and the best so far.

The elite (the parents the planner draws from) is bounded and diverse: every bucket's
winner, then the best candidates by score, keeping at most `PER_NICHE` per niche (the
same predicted times, rounded to 3 significant digits, reached by the same tactic).
Neutral variants, which score the same as their parent, stay in the elite only that far:
enough to cross a plateau, not enough to crowd out everything else.

In portfolio mode the best is the portfolio itself: the winner per bucket, scored as the
weighted geometric mean over all shapes of the speedup of the kernel chosen for each
shape's bucket.
"""

from __future__ import annotations

from cake_agents.context import AgentContext
from cake_agents.nodes.common import Node
from cake_agents.records import Best, PopulationEntry
from cake_agents.scoring import shape_speedup, weighted_geomean
from cake_agents.state import EvolveState, StateUpdate

ELITE_SIZE = 16
PER_NICHE = 2


def niche(entry: PopulationEntry) -> str:
    """Predicted behaviour plus the kind of the last move: neutral variants made by
    different tactics (a freed stage, a register split) are different niches."""
    times = entry.get("times", {})
    return entry.get("tactic", "") + "|" + ",".join(f"{k}:{v:.3g}"
                                                    for k, v in sorted(times.items()))


def _rank(entry: PopulationEntry, bucket: str | None) -> tuple[float, int]:
    s = entry.get("bucket_scores", {}).get(bucket) if bucket else entry.get("score")
    return (-(s if s is not None else -1e300), entry.get("seq", 0))


def select_elite(population: dict[str, PopulationEntry], winners: dict[str, str],
                 size: int = ELITE_SIZE) -> list[str]:
    passing = [e for e in population.values() if e.get("status") == "pass"]
    out: list[str] = [h for h in dict.fromkeys(winners.values()) if h in population]
    per: dict[str, int] = {}
    for h in out:
        per[niche(population[h])] = per.get(niche(population[h]), 0) + 1
    for e in sorted(passing, key=lambda e: _rank(e, None)):
        if len(out) >= size:
            break
        if e["hash"] in out:
            continue
        n = niche(e)
        if per.get(n, 0) >= PER_NICHE:
            continue
        per[n] = per.get(n, 0) + 1
        out.append(e["hash"])
    if not out and passing:
        out.append(sorted(passing, key=lambda e: _rank(e, None))[0]["hash"])
    return out


def bucket_winners(ctx: AgentContext, population: dict[str, PopulationEntry]) -> dict[str, str]:
    out = {}
    for b in ctx.info.buckets:
        cands = [e for e in population.values()
                 if e.get("status") == "pass" and b.key in e.get("bucket_scores", {})]
        if cands:
            out[b.key] = sorted(cands, key=lambda e: _rank(e, b.key))[0]["hash"]
    return out


def portfolio_score(ctx: AgentContext, population: dict[str, PopulationEntry],
                    winners: dict[str, str]) -> float | None:
    pairs = []
    for s in ctx.info.shapes:
        h = winners.get(s.bucket)
        if h is None or s.key not in population[h].get("times", {}):
            return None
        sp, _ = shape_speedup(ctx.info.baseline.get(s.key, 0.0), population[h]["times"][s.key],
                              ctx.info.floors.get(s.key, 0.0))
        pairs.append((sp, s.weight))
    return weighted_geomean(pairs)


def make_archivist(ctx: AgentContext) -> Node:
    def archivist(state: EvolveState) -> StateUpdate:
        ctx.emit("node", name="archivist", step=state.step)
        pop = state.population
        winners = bucket_winners(ctx, pop)
        elite = select_elite(pop, winners)
        if ctx.mode == "portfolio":
            s = portfolio_score(ctx, pop, winners)
            best: Best = {"hash": winners.get(ctx.info.buckets[0].key, "")
                          if ctx.info.buckets else "", "score": s, "winners": dict(winners)}
        else:
            passing = [e for e in pop.values() if e.get("status") == "pass"
                       and e.get("score") is not None]
            top = sorted(passing, key=lambda e: _rank(e, None))[:1]
            best = {"hash": top[0]["hash"], "score": top[0]["score"]} if top else {}
        old = state.best.get("score")
        new = best.get("score")
        improved = new is not None and (old is None or new > old * (1 + 1e-9))
        if improved:
            best["seq"] = max((e.get("seq", 0) for e in pop.values()
                               if e["hash"] in (best.get("hash"), *winners.values())),
                              default=0)
        else:
            best = {**best, "seq": state.best.get("seq", 0)} if best else {**state.best}
        # one progress row per evaluation of this generation, with the best so far
        for e in sorted((e for e in pop.values() if e.get("step") == state.step
                         and e.get("seq")), key=lambda e: e["seq"]):
            ctx.store.add_progress(ctx.run_id, seq=e["seq"], step=state.step,
                                   hash_=e["hash"], status=e["status"],
                                   gate=e.get("failed_gate") or "",
                                   score=e.get("score"), best=best.get("score"),
                                   tactic=e.get("rationale") or e.get("tactic", ""))
        if improved:
            ctx.emit("best", best=best)
        return {"elite": elite, "winners": winners, "best": best,
                "stall": 0 if improved or state.plan.get("kind") == "seed"
                else state.stall + 1}

    return archivist
