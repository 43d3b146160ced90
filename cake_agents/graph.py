"""The agent graph: a LangGraph `StateGraph` over `EvolveState`.

    START -> planner -(code)-> coder -> checker -(evaluate)-> evaluator -> archivist
                                          ^   |                              |
                                          |  (repair)                    reflector
                                          +-- repairer                       |
             planner <-------------------------------------------------------+
             planner -(finish)-> finalizer -> END

One pass around the loop is one generation.  The routers are pure functions of the
state.  Every node but the finalizer is guarded (`guarded`): before it runs, the run's
bounds (wall clock, store size) are checked, and after it, whether the model caller
stopped the run (a refused key, an unreachable endpoint, a bound on calls); either sets
`halt`, and every router then leads to the finalizer, so no loop outlives a bound.

`build_graph` takes every dependency through the context, so tests build the
same graph with a scripted model, an in-process executor and a fresh checkpointer.
"""

from __future__ import annotations

from typing import Any, Literal

from cake_agents.context import AgentContext
from cake_agents.models import BOUND_EXIT
from cake_agents.nodes.archivist import make_archivist
from cake_agents.nodes.checker import make_checker
from cake_agents.nodes.coder import make_coder
from cake_agents.nodes.common import Node
from cake_agents.nodes.evaluator import make_evaluator
from cake_agents.nodes.finalizer import make_finalizer
from cake_agents.nodes.planner import make_planner
from cake_agents.nodes.reflector import make_reflector
from cake_agents.nodes.repairer import make_repairer
from cake_agents.state import EvolveState, StateUpdate

NODES = ("planner", "coder", "checker", "repairer", "evaluator", "archivist", "reflector",
         "finalizer")


def route_after_plan(state: EvolveState) -> Literal["code", "finish"]:
    """Finish when the planner says so (budget, convergence, patience)."""
    if state.done or state.halt or state.plan.get("kind") == "stop":
        return "finish"
    return "code"


def route_after_check(state: EvolveState) -> Literal["repair", "evaluate", "finish"]:
    """Repair while some candidate has errors the server or a model can still fix."""
    if state.halt:
        return "finish"
    if any(c.get("repairable") for c in state.batch):
        return "repair"
    return "evaluate"


def route_on(state: EvolveState) -> Literal["next", "finish"]:
    """Straight on, unless a bound stopped the run."""
    return "finish" if state.halt else "next"


def guarded(ctx: AgentContext, node: Node) -> Node:
    """`node`, checked against the run's bounds before it runs and the caller's after."""

    def guard(state: EvolveState) -> StateUpdate:
        if state.halt:
            return {}
        why = ctx.bounds.exceeded() if ctx.bounds is not None else ""
        if why:
            return _halt(ctx, why, BOUND_EXIT)
        update = node(state)
        if ctx.caller is not None and ctx.caller.halted:
            return {**update, **_halt(ctx, ctx.caller.halted, ctx.caller.halt_exit)}
        return update

    return guard


def _halt(ctx: AgentContext, reason: str, exit_code: int) -> StateUpdate:
    ctx.emit("warning", message=f"stopping: {reason}")
    return {"halt": {"reason": reason, "exit": exit_code}, "done": True,
            "stop_reason": reason}


def build_graph(ctx: AgentContext, *, checkpointer: Any = None) -> Any:
    from langgraph.graph import END, START, StateGraph

    g = StateGraph(EvolveState)
    g.add_node("planner", guarded(ctx, make_planner(ctx)))
    g.add_node("coder", guarded(ctx, make_coder(ctx)))
    g.add_node("checker", guarded(ctx, make_checker(ctx)))
    g.add_node("repairer", guarded(ctx, make_repairer(ctx)))
    g.add_node("evaluator", guarded(ctx, make_evaluator(ctx)))
    g.add_node("archivist", guarded(ctx, make_archivist(ctx)))
    g.add_node("reflector", guarded(ctx, make_reflector(ctx)))
    g.add_node("finalizer", make_finalizer(ctx))
    g.add_edge(START, "planner")
    g.add_conditional_edges("planner", route_after_plan,
                            {"code": "coder", "finish": "finalizer"})
    g.add_conditional_edges("coder", route_on, {"next": "checker", "finish": "finalizer"})
    g.add_conditional_edges("checker", route_after_check,
                            {"repair": "repairer", "evaluate": "evaluator",
                             "finish": "finalizer"})
    g.add_conditional_edges("repairer", route_on, {"next": "checker", "finish": "finalizer"})
    g.add_edge("evaluator", "archivist")
    g.add_edge("archivist", "reflector")
    g.add_edge("reflector", "planner")
    g.add_edge("finalizer", END)
    return g.compile(checkpointer=checkpointer)


def topology(graph: Any) -> list[tuple[str, str, bool]]:
    """(source, target, conditional) edges of the compiled graph, sorted: the snapshot."""
    drawable = graph.get_graph()
    return sorted((e.source, e.target, bool(e.conditional)) for e in drawable.edges)
