"""The planner: decides what the next generation tries, or that the run is over.

It reads the cost model's bottleneck of the parents, the run's failure memory (move
classes that keep failing are not proposed again) and the budget.  Offline, the policy
(`policy.py`) turns that into concrete tactic moves; with a model, the plan is a parent
plus the best-predicted tactic moves as a hint for the coder's prompt.
"""

from __future__ import annotations

from typing import Any

from cake_agents.budget import evals_left
from cake_agents.context import AgentContext
from cake_agents.nodes.common import Node, spent
from cake_agents.policy import EvolvePolicy
from cake_agents.records import Plan
from cake_agents.state import EvolveState, StateUpdate


def focus_bucket(ctx: AgentContext, step: int) -> str | None:
    """Portfolio runs rotate over the shape buckets, one per generation."""
    if ctx.mode != "portfolio" or not ctx.info.buckets:
        return None
    return ctx.info.buckets[(step - 2) % len(ctx.info.buckets)].key


def stop_reason(ctx: AgentContext, state: EvolveState) -> str:
    budget = ctx.caller.budget if ctx.caller is not None else None
    left = evals_left(_eval_budget(ctx), spent(ctx, state.usage, state.evals))
    if left is not None and left <= 0:
        return f"evaluation budget spent ({state.evals} evaluations)"
    if state.stall >= ctx.config.patience:
        return f"no improvement in {state.stall} generations"
    seed = state.population.get(ctx.info.seed_hash)
    if ctx.caller is None and (seed is None or seed.get("status") != "pass"):
        gate = seed.get("failed_gate", "?") if seed else "?"
        return (f"the seed kernel fails the {gate} gate; the offline search starts only from "
                "a passing kernel (give --model to let a model repair it)")
    if ctx.caller is not None and budget is not None:
        probe = [{"role": "user", "content": ctx.info.seed_text}]
        _, allow = ctx.caller.allowance(probe, spent(ctx, state.usage, state.evals))
        if not allow.ok:
            return allow.reason
    return ""


def _eval_budget(ctx: AgentContext) -> Any:
    from cake_agents.budget import Budget

    return Budget(evals=ctx.config.effective_evals)


def best_parent(state: EvolveState, bucket: str | None, fallback: str) -> str:
    def key(h: str) -> tuple[float, int]:
        e = state.population[h]
        s = e.get("bucket_scores", {}).get(bucket) if bucket else e.get("score")
        return (-(s if s is not None else -1e300), e.get("seq", 0))

    elite = sorted((h for h in state.elite if h in state.population), key=key)
    return elite[0] if elite else fallback


def make_planner(ctx: AgentContext) -> Node:
    def planner(state: EvolveState) -> StateUpdate:
        step = state.step + 1
        ctx.emit("node", name="planner", step=step)
        if not state.population:
            return {"step": step, "repair_round": 0, "batch": [],
                    "plan": {"kind": "seed", "reason": "evaluate the seed kernel"}}
        reason = state.stop_reason if state.done else stop_reason(ctx, state)
        if reason:
            return {"step": step, "plan": {"kind": "stop", "reason": reason}, "done": True,
                    "stop_reason": reason, "batch": []}
        bucket = focus_bucket(ctx, step)
        left = evals_left(_eval_budget(ctx), spent(ctx, state.usage, state.evals))
        n = ctx.config.effective_batch if left is None else min(ctx.config.effective_batch,
                                                                 left)
        if ctx.caller is not None:
            parent = best_parent(state, bucket, ctx.info.seed_hash)
            hints: list[dict[str, Any]] = []
            if isinstance(ctx.policy, EvolvePolicy) and ctx.config.arm == "cake":
                hints = ctx.policy.suggestions(ctx, state, parent, bucket)
            entry = state.population.get(parent, {})
            plan: Plan = {"kind": "model", "parent": parent, "bucket": bucket, "hints": hints,
                    "bottleneck": entry.get("bottleneck", ""), "n": n,
                    "reason": "ask the model for an improved kernel"
                              + (f" ({hints[0]['rationale']})" if hints else "")}
            return {"step": step, "plan": plan, "repair_round": 0, "batch": []}
        moves = ctx.policy.propose(ctx, state, bucket, n, step)
        skipped = dict(ctx.policy.last_skipped)
        if not moves:
            reason = "search converged: no untried tactic move is left"
            return {"step": step, "plan": {"kind": "stop", "reason": reason}, "done": True,
                    "stop_reason": reason, "batch": [], "tried": skipped}
        tried = {**skipped, **{f"{m['parent']}:{m['move']}": step for m in moves}}
        plan = {"kind": "tactics", "moves": moves, "bucket": bucket,
                "reason": "; ".join(m["rationale"] or m["move"] for m in moves)}
        return {"step": step, "plan": plan, "tried": tried, "repair_round": 0, "batch": []}

    return planner
