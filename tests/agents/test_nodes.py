"""Agents one at a time: each test builds the graph with a fresh checkpointer and stops it
after the node under test, or calls a node's pure core directly."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from agent_support import GEMM, TYPO, config, fenced

from cake_agents.context import AgentContext, content_hash, load_task_info
from cake_agents.executor import InlineExecutor
from cake_agents.graph import build_graph
from cake_agents.models import ModelCaller, ScriptedModel
from cake_agents.nodes.archivist import PER_NICHE, select_elite
from cake_agents.nodes.evaluator import make_evaluator
from cake_agents.nodes.reflector import condense
from cake_agents.policy import EvolvePolicy, blocked_classes
from cake_agents.state import EvolveState
from cake_agents.store import RunsStore
from cake_agents.tactic_lab import Move, TacticLab


class CountingExecutor(InlineExecutor):
    def __init__(self) -> None:
        self.jobs: list[str] = []

    def run(self, jobs: Sequence[dict[str, Any]], on_gate: Any = None) -> list[dict[str, Any]]:
        self.jobs.extend(j["hash"] for j in jobs)
        return super().run(jobs, on_gate)


def _ctx(tmp_path: Path, lsp: Any, *, model: Any = None, **kw: Any) -> AgentContext:
    cfg = config(tmp_path, **kw)
    info = load_task_info(cfg)
    store = RunsStore(tmp_path / "runs.sqlite")
    store.create_run("r1", task=info.name, mode=cfg.mode, model=None, seed_rng=0,
                     config=cfg.to_json())
    caller = ModelCaller(model, _budget(), store, "r1", backoff_s=0.0) if model else None
    return AgentContext(cfg, info, store, "r1", CountingExecutor(),
                        EvolvePolicy(TacticLab([], info.kernel)), lsp, caller)


def _budget() -> Any:
    from cake_agents.budget import Budget

    return Budget(tokens=100_000)


@pytest.fixture
def checkpointer() -> Any:
    from langgraph.checkpoint.memory import InMemorySaver

    return InMemorySaver()


def test_planner_starts_with_the_seed(tmp_path: Path, lsp: Any, checkpointer: Any) -> None:
    ctx = _ctx(tmp_path, lsp)
    graph = build_graph(ctx, checkpointer=checkpointer)
    cfg = {"configurable": {"thread_id": "t"}}
    graph.invoke(EvolveState(run_id="r1"), cfg, interrupt_after=["planner"])
    snap = graph.get_state(cfg)
    assert snap.values["plan"]["kind"] == "seed" and snap.values["step"] == 1
    assert snap.next == ("coder",)


def test_checker_pulls_diagnostics_and_quick_fixes(tmp_path: Path, lsp: Any,
                                                    checkpointer: Any) -> None:
    ctx = _ctx(tmp_path, lsp, model=ScriptedModel([fenced(TYPO)]))
    graph = build_graph(ctx, checkpointer=checkpointer)
    cfg = {"configurable": {"thread_id": "t"}}
    seed = ctx.info.seed_hash
    graph.update_state(cfg, {"run_id": "r1", "step": 2, "population": {
        seed: {"hash": seed, "status": "pass", "score": 1.0, "times": {}}},
        "elite": [seed], "plan": {"kind": "model", "parent": seed, "n": 1}},
        as_node="planner")
    graph.invoke(None, cfg, interrupt_after=["checker"])
    (cand,) = graph.get_state(cfg).values["batch"]
    assert cand["hash"] == content_hash(TYPO) and cand["origin"] == "coder"
    assert [d["code"] for d in cand["diagnostics"]] == ["CK102"]
    assert cand["repairable"] and cand["quick_fixes"][0]["title"].startswith("call")
    assert graph.get_state(cfg).next == ("repairer",)
    graph.invoke(None, cfg, interrupt_after=["repairer"])
    (fixed,) = graph.get_state(cfg).values["batch"]
    assert fixed["text"] == GEMM and fixed["fixes"] == ["quick fix: call `wgmma_wait`"]


def test_evaluator_never_reevaluates_a_known_kernel(tmp_path: Path, lsp: Any) -> None:
    ctx = _ctx(tmp_path, lsp)
    seed = ctx.info.seed_hash
    known = EvolveState(step=3, population={seed: {"hash": seed, "status": "pass"}},
                        batch=[{"hash": seed, "text": GEMM, "tactic": "x", "uri": "u"}])
    update = make_evaluator(ctx)(known)
    assert update["population"] == {} and update["evals"] == 0
    assert ctx.executor.jobs == []  # type: ignore[attr-defined]


def test_reflector_memory_is_bounded_and_counts_candidates() -> None:
    fails = [{"signature": f"sim:E:{i % 3}", "gate": "sim", "code": "E", "message": "m",
              "move_class": "tile-size(name=D)" if i % 3 == 0 else "", "step": i,
              "hash": f"h{i}"} for i in range(30)]
    mem = condense([], fails, size=2)
    assert len(mem) == 2 and all(m["count"] == 10 for m in mem)
    assert blocked_classes(condense([], fails)) == {"tile-size(name=D)"}
    assert blocked_classes(condense([], fails[:1])) == set()


def test_elite_keeps_winners_and_limits_each_niche() -> None:
    pop = {f"n{i}": {"hash": f"n{i}", "status": "pass", "score": 1.0, "seq": i,
                     "tactic": "stages", "times": {"a": 1.0}} for i in range(6)}
    pop["w"] = {"hash": "w", "status": "pass", "score": 0.5, "seq": 9, "tactic": "x",
                "times": {"a": 2.0}}
    pop["f"] = {"hash": "f", "status": "fail", "seq": 10}
    elite = select_elite(pop, {"bucket": "w"})
    assert elite[0] == "w" and "f" not in elite
    assert sum(h.startswith("n") for h in elite) == PER_NICHE


def test_move_classes_abstract_numbers() -> None:
    assert Move("tile-size", {"name": "BN", "value": 64}).move_class == "tile-size(name=BN)"
    assert Move("stages", {"stages": 3}).move_class == "stages"
    assert Move("rebalance-registers", {"regs": {"a": 24}}).move_class == \
        "rebalance-registers"
