"""The evaluator: runs the gates of DESIGN §4 on the candidates that check clean.

Static, simulation (>= 2 of the task's small shapes, against its numpy reference), cost
model, ptxas, CPU emulation and the GPU runner, in that order, through the executor; a gate whose
component is absent is recorded as "skipped: not available".  Kernels already evaluated
in this run (same content hash) are not evaluated again, and the evaluation budget is
never overrun: candidates past it are dropped unevaluated.  A result already in the runs
store (a resumed run re-entering this node) is reused rather than recomputed.
"""

from __future__ import annotations

import contextlib
from typing import Any, Literal

from cake_agents.budget import Budget, Spent, evals_left
from cake_agents.context import AgentContext
from cake_agents.mining.gaps import record_gate_gaps
from cake_agents.nodes.common import Node, failure
from cake_agents.records import Candidate, Json, PopulationEntry
from cake_agents.scoring import score
from cake_agents.state import EvolveState, StateUpdate

RESULT_GATE = "_result"


def make_evaluator(ctx: AgentContext) -> Node:
    def evaluator(state: EvolveState) -> StateUpdate:
        ctx.emit("node", name="evaluator", step=state.step)
        bucket = state.plan.get("bucket")
        population: dict[str, PopulationEntry] = {}
        failures: list[Json] = []
        todo: list[Candidate] = []
        seen = set(state.population)
        left = evals_left(Budget(evals=ctx.config.effective_evals), Spent(evals=state.evals))
        for cand in state.batch:
            h = cand["hash"]
            if h in seen:
                continue
            seen.add(h)
            if cand.get("errors"):
                population[h] = _entry(ctx, state, cand, None, status="fail",
                                       failed_gate="check")
                continue
            if left is not None and len(todo) >= left:
                break
            todo.append(cand)
        best = state.best.get("score")
        if ctx.mode == "portfolio":  # the focus bucket's winner is the one to beat
            w = state.winners.get(bucket or "")
            best = state.population[w].get("bucket_scores", {}).get(bucket) \
                if w and bucket is not None else None
        results = _run(ctx, todo, bucket, best)
        seq = state.evals
        for cand, res in zip(todo, results, strict=True):
            seq += 1
            _store_result(ctx, cand["hash"], res)
            entry = _entry(ctx, state, cand, res, seq=seq, status=res["status"],
                           failed_gate=res.get("failed_gate"))
            population[cand["hash"]] = entry
            ctx.emit("evaluated", seq=seq, entry=entry, budget=ctx.config.effective_evals)
            if res["status"] != "pass":
                gate = res["failed_gate"]
                lines = cand["text"].splitlines()
                for i, f in enumerate(res["gates"][gate]["findings"][:4]):
                    ln = int(f.get("line", 0))
                    failures.append(failure(
                        ctx, step=state.step, hash_=cand["hash"], gate=gate, code=f["code"],
                        message=f["message"],
                        line_text=f.get("line_text") or (lines[ln] if f.get("line") and
                                                         0 <= ln < len(lines) else ""),
                        move_class=cand.get("move_class", ""), ordinal=i))
            # what the loop above leaves out (warnings of late gates that passed, findings
            # past the first few, a gate failing without findings) is a failure too
            record_gate_gaps(ctx.store, ctx.run_id, cand["hash"], state.step, res,
                             text=cand["text"], move=cand.get("move_class", ""))
        if ctx.lsp is not None:
            for cand in state.batch:
                # closing is housekeeping; a dead server is the checker's business
                with contextlib.suppress(Exception):
                    ctx.lsp.close(cand["uri"])
        return {"population": population, "evals": seq, "pending_failures": failures}

    return evaluator


def _run(ctx: AgentContext, todo: list[Candidate], bucket: str | None,
         best: float | None) -> list[dict[str, Any]]:
    """Results in `todo` order: stored ones reused, the rest from the executor."""
    stored: dict[str, dict[str, Any]] = {}
    for cand in todo:
        rows = [r for r in ctx.store.evaluations(ctx.run_id, cand["hash"])
                if r["gate"] == RESULT_GATE]
        if rows:
            stored[cand["hash"]] = rows[0]["detail"]
    jobs = [ctx.eval_job(c, bucket, best) for c in todo if c["hash"] not in stored]
    fresh = {r["hash"]: r for r in ctx.executor.run(
        jobs, lambda h, g: ctx.emit("gate", hash=h, gate=g))} if jobs else {}
    return [stored.get(c["hash"]) or fresh[c["hash"]] for c in todo]


def _store_result(ctx: AgentContext, hash_: str, res: dict[str, Any]) -> None:
    for gate, g in res["gates"].items():
        ctx.store.add_evaluation(ctx.run_id, hash_, gate, g["status"],
                                 {"detail": g["detail"], "findings": g["findings"]},
                                 g["seconds"])
    ctx.store.add_evaluation(ctx.run_id, hash_, RESULT_GATE, res["status"], res,
                             sum(g["seconds"] for g in res["gates"].values()))


def _entry(ctx: AgentContext, state: EvolveState, cand: Candidate,
           res: dict[str, Any] | None, *, status: Literal["pass", "fail"],
           failed_gate: str | None, seq: int = 0) -> PopulationEntry:
    times = dict(res.get("times", {})) if res else {}
    floors = ctx.info.floors
    base = ctx.info.baseline
    if ctx.config.arm == "cuda":  # measured times, over the task's library baseline
        base = dict((res or {}).get("measured_baseline", {}))
    passed = status == "pass"
    bucket_scores = {}
    if passed:
        for b in ctx.info.buckets:
            s = score(times, base, floors, ctx.info.shapes_of(b.key))
            if s is not None:
                bucket_scores[b.key] = s
    headline = ctx.info.shapes[0].key if ctx.info.shapes else ""
    cost = (res or {}).get("gates", {}).get("cost", {}).get("detail", {}).get("shapes", {})
    hot = cost.get(headline, {}).get("lines", []) if isinstance(cost, dict) else []
    return {"hash": cand["hash"], "parent": cand.get("parent"), "tactic": cand["tactic"],
            "move": cand.get("move", ""), "move_class": cand.get("move_class", ""),
            "origin": cand.get("origin", ""), "rationale": cand.get("rationale", ""),
            "intent": cand.get("intent", ""), "steps": cand.get("steps", []),
            "fixes": cand.get("fixes", []), "step": state.step, "seq": seq,
            "status": status, "failed_gate": failed_gate,
            "score": score(times, base, floors, ctx.info.shapes) if passed else None,
            "bucket_scores": bucket_scores, "times": times,
            "measured": dict((res or {}).get("measured", {})),
            "bottleneck": (res or {}).get("bottlenecks", {}).get(headline, ""),
            "hot_lines": hot,
            "gates": {g: v["status"] for g, v in (res or {}).get("gates", {}).items()}}
