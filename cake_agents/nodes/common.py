"""Helpers the agents share: failure records, usage deltas, candidate records."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from cake_agents.records import Candidate
from cake_agents.signature import signature

if TYPE_CHECKING:
    from cake_agents.context import AgentContext
    from cake_agents.models import CallOutcome
    from cake_agents.state import EvolveState, StateUpdate


class Node(Protocol):
    """A node of the graph: reads the state, returns the fields it changes.

    A Protocol rather than a `Callable` because LangGraph's `add_node` asks for a callable
    whose parameter is named `state`."""

    def __call__(self, state: EvolveState) -> StateUpdate: ...


def failure(ctx: AgentContext, *, step: int, hash_: str, gate: str, code: str,
            message: str, line_text: str = "", move_class: str = "", ordinal: int = 0
            ) -> dict[str, Any]:
    """Record one failure in the store and return it for the reflector.

    `ordinal` must tell apart failures a node records in one step with the same
    signature (the n-th retry, the n-th finding): with it, a node that runs again after a
    crash rewrites the same rows instead of adding or losing some."""
    sig = signature(gate, code, message, line_text)
    ctx.store.add_failure(ctx.run_id, hash_=hash_, step=step, sig=sig, message=message,
                          move=move_class, ordinal=ordinal)
    return {"signature": sig.key, "digest": sig.digest, "gate": gate, "code": sig.code,
            "message": sig.message, "move_class": move_class, "step": step, "hash": hash_}


def usage_delta(node: str, outcome: CallOutcome) -> dict[str, dict[str, float]]:
    counters = {"calls": len(outcome.records),
                "tokens_in": sum(r.tokens_in for r in outcome.records),
                "tokens_out": sum(r.tokens_out for r in outcome.records),
                "usd": outcome.usd,
                "failed": sum(not r.ok for r in outcome.records)}
    return {node: dict(counters), "total": dict(counters)}


def merge_usage(a: dict[str, dict[str, float]], b: dict[str, dict[str, float]]
                ) -> dict[str, dict[str, float]]:
    out = {k: dict(v) for k, v in a.items()}
    for node, counters in b.items():
        slot = out.setdefault(node, {})
        for k, v in counters.items():
            slot[k] = slot.get(k, 0) + v
    return out


def new_candidate(ctx: AgentContext, *, step: int, idx: int, text: str, parent: str | None,
                  tactic: str, params: dict[str, Any], origin: str, rationale: str = "",
                  move: str = "", move_class: str = "", repairs: int = 0,
                  uri: str | None = None, intent: str = "",
                  steps: list[dict[str, Any]] | None = None) -> Candidate:
    """`steps` (a chain's, with the kernel after each) go to the store only; the state
    keeps their rationales, which the progress lines show one per line."""
    from cake_agents.context import content_hash

    h = content_hash(text)
    ctx.store.add_candidate(ctx.run_id, h, parent=parent, tactic=tactic, params=params,
                            origin=origin, step=step, text=text, idx=idx + 100 * repairs,
                            rationale=rationale, intent=intent, steps=steps)
    cand: Candidate = {
        "hash": h, "parent": parent, "text": text, "tactic": tactic, "params": params,
        "origin": origin, "rationale": rationale, "move": move, "move_class": move_class,
        "repairs": repairs, "uri": uri or _uri(ctx, step, idx), "diagnostics": [],
        "errors": 0, "quick_fixes": [], "repairable": False, "fixes": []}
    if intent:
        cand["intent"] = intent
    if steps:
        cand["steps"] = [str(s.get("rationale", "")) for s in steps]
    return cand


def _uri(ctx: AgentContext, step: int, idx: int) -> str:
    name = f"{ctx.run_id}-{step}-{idx}"
    if ctx.lsp is not None:
        return ctx.lsp.uri_for(name)
    return f"file:///cake-evolve/{name}.cake"


def spent(ctx: AgentContext, usage: dict[str, dict[str, float]], evals: int) -> Any:
    from cake_agents.budget import Spent

    return Spent.from_usage(usage, evals)
