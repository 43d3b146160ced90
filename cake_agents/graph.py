"""The agent graph: a LangGraph `StateGraph` over `EvolveState`.

    START -> planner -(code)-> coder -> checker -(evaluate)-> evaluator -> archivist
                                          ^   |                              |
                                          |  (repair)                    reflector
                                          +-- repairer                       |
             planner <-------------------------------------------------------+
             planner -(finish)-> finalizer -> END

One pass around the loop is one generation.  The routers are pure functions of the
state.  `build_graph` takes every dependency through the context, so tests build the
same graph with a scripted model, an in-process executor and a fresh checkpointer.
"""

from __future__ import annotations

from typing import Any, Literal

from cake_agents.context import AgentContext
from cake_agents.nodes.archivist import make_archivist
from cake_agents.nodes.checker import make_checker
from cake_agents.nodes.coder import make_coder
from cake_agents.nodes.evaluator import make_evaluator
from cake_agents.nodes.finalizer import make_finalizer
from cake_agents.nodes.planner import make_planner
from cake_agents.nodes.reflector import make_reflector
from cake_agents.nodes.repairer import make_repairer
from cake_agents.state import EvolveState

NODES = ("planner", "coder", "checker", "repairer", "evaluator", "archivist", "reflector",
         "finalizer")


def route_after_plan(state: EvolveState) -> Literal["code", "finish"]:
    """Finish when the planner says so (budget, convergence, patience)."""
    if state.done or state.plan.get("kind") == "stop":
        return "finish"
    return "code"


def route_after_check(state: EvolveState) -> Literal["repair", "evaluate"]:
    """Repair while some candidate has errors the server or a model can still fix."""
    if any(c.get("repairable") for c in state.batch):
        return "repair"
    return "evaluate"


def build_graph(ctx: AgentContext, *, checkpointer: Any = None) -> Any:
    from langgraph.graph import END, START, StateGraph

    g = StateGraph(EvolveState)
    g.add_node("planner", make_planner(ctx))
    g.add_node("coder", make_coder(ctx))
    g.add_node("checker", make_checker(ctx))
    g.add_node("repairer", make_repairer(ctx))
    g.add_node("evaluator", make_evaluator(ctx))
    g.add_node("archivist", make_archivist(ctx))
    g.add_node("reflector", make_reflector(ctx))
    g.add_node("finalizer", make_finalizer(ctx))
    g.add_edge(START, "planner")
    g.add_conditional_edges("planner", route_after_plan,
                            {"code": "coder", "finish": "finalizer"})
    g.add_edge("coder", "checker")
    g.add_conditional_edges("checker", route_after_check,
                            {"repair": "repairer", "evaluate": "evaluator"})
    g.add_edge("repairer", "checker")
    g.add_edge("evaluator", "archivist")
    g.add_edge("archivist", "reflector")
    g.add_edge("reflector", "planner")
    g.add_edge("finalizer", END)
    return g.compile(checkpointer=checkpointer)


def topology(graph: Any) -> list[tuple[str, str, bool]]:
    """(source, target, conditional) edges of the compiled graph, sorted: the snapshot."""
    drawable = graph.get_graph()
    return sorted((e.source, e.target, bool(e.conditional)) for e in drawable.edges)
