"""The graph's shape (a snapshot) and its routers (pure functions of the state)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from cake_agents.graph import NODES, route_after_check, route_after_plan, route_on, topology
from cake_agents.state import EvolveState, add_usage, extend_or_clear, merge

SNAPSHOT = Path(__file__).parent / "snapshots" / "topology.json"


def _graph(tmp_path: Path) -> Any:
    from agent_support import config

    from cake_agents.context import AgentContext, load_task_info
    from cake_agents.executor import InlineExecutor
    from cake_agents.graph import build_graph
    from cake_agents.policy import EvolvePolicy
    from cake_agents.store import RunsStore
    from cake_agents.tactic_lab import TacticLab

    cfg = config(tmp_path)
    info = load_task_info(cfg)
    ctx = AgentContext(cfg, info, RunsStore(tmp_path / "runs.sqlite"), "r",
                       InlineExecutor(), EvolvePolicy(TacticLab([], info.kernel)))
    return build_graph(ctx)


def test_topology_matches_snapshot(tmp_path: Path) -> None:
    edges = [list(e) for e in topology(_graph(tmp_path))]
    want = json.loads(SNAPSHOT.read_text())
    assert edges == want, "the graph changed: update tests/agents/snapshots/topology.json"
    names = {e[0] for e in edges} | {e[1] for e in edges}
    assert set(NODES) <= names


def test_route_after_plan() -> None:
    assert route_after_plan(EvolveState(plan={"kind": "tactics"})) == "code"
    assert route_after_plan(EvolveState(plan={"kind": "stop"})) == "finish"
    assert route_after_plan(EvolveState(plan={"kind": "model"}, done=True)) == "finish"


def test_route_after_check() -> None:
    clean = {"hash": "a", "errors": 0, "repairable": False}
    broken = {"hash": "b", "errors": 1, "repairable": True}
    hopeless = {"hash": "c", "errors": 2, "repairable": False}
    assert route_after_check(EvolveState(batch=[clean])) == "evaluate"
    assert route_after_check(EvolveState(batch=[clean, broken])) == "repair"
    assert route_after_check(EvolveState(batch=[hopeless])) == "evaluate"
    assert route_after_check(EvolveState(batch=[])) == "evaluate"


def test_a_halt_leads_every_router_to_the_finalizer() -> None:
    halt = {"reason": "wall-clock limit", "exit": 3}
    broken = {"hash": "b", "errors": 1, "repairable": True}
    assert route_after_check(EvolveState(batch=[broken], halt=halt)) == "finish"
    assert route_after_plan(EvolveState(plan={"kind": "model"}, halt=halt)) == "finish"
    assert route_on(EvolveState(halt=halt)) == "finish"
    assert route_on(EvolveState()) == "next"


def test_reducers() -> None:
    assert merge({"a": 1, "b": 2}, {"b": 3, "a": None}) == {"b": 3}
    assert extend_or_clear([1], [2, 3]) == [1, 2, 3]
    assert extend_or_clear([1, 2], []) == []
    got = add_usage({"coder": {"calls": 1, "usd": 0.5}},
                    {"coder": {"calls": 2}, "total": {"calls": 2}})
    assert got == {"coder": {"calls": 3, "usd": 0.5}, "total": {"calls": 2}}
