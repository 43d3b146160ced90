"""The offline policy's lookahead: chains of tactic moves planned in preview space.

The landscape is the benchmark's de-tuned sm_80 GEMM (32x32 tiles, a 2-stage ring) with
the two retuning tactics that matter there, tile sizes and stages: several moves each
improve the prediction on their own, so the best kernel is more than one move away.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from cake_agents.config import EvolveConfig
from cake_agents.context import TaskInfo, content_hash, load_task_info
from cake_agents.policy import (
    CHAIN_GAIN,
    EvolvePolicy,
    blocked_classes,
    make_policy,
    target_score,
)
from cake_agents.scoring import ShapeSpec
from cake_agents.state import EvolveState
from cake_agents.tactic_lab import CHAIN, Move, TacticLab

ROOT = Path(__file__).resolve().parents[2]
SEED = ROOT / "bench" / "data" / "agent_search" / "gemm_sm80_detuned.cake"

cake_tactics = pytest.importorskip("cake_tactics")


@dataclass
class Ctx:
    """What the policy reads of an AgentContext: the task, the texts, the RNG seed."""

    info: TaskInfo
    config: EvolveConfig
    texts: dict[str, str] = field(default_factory=dict)
    mode: str = "reference"

    def text_of(self, h: str) -> str | None:
        return self.info.seed_text if h == self.info.seed_hash else self.texts.get(h)

    def target_shapes(self, bucket: str | None) -> list[ShapeSpec]:
        return self.info.shapes


@pytest.fixture(scope="module")
def lab_and_info() -> tuple[TacticLab, TaskInfo]:
    info = load_task_info(EvolveConfig(task="gemm_f16_sm80", seed_kernel=str(SEED)))
    from cake_tactics.tactics import STAGES, TILE_SIZE

    return TacticLab([TILE_SIZE, STAGES], info.kernel, info.arch), info


def _state(ctx: Ctx, parent: str, score: float) -> EvolveState:
    entry = {"hash": parent, "status": "pass", "score": score, "seq": 1,
             "bottleneck": "latency"}
    return EvolveState(run_id="r", step=2, population={parent: entry}, elite=[parent])


@pytest.mark.parametrize(("task", "name"), [("gemm_f16_sm80", "gemm_sm80_detuned.cake"),
                                            ("gemm_bf16", "gemm_sm90_detuned.cake")])
def test_the_benchmark_seed_kernels_check_clean_and_simulate(task: str, name: str) -> None:
    from cake_agents.gates import evaluate_job

    info = load_task_info(EvolveConfig(task=task, seed_kernel=str(SEED.parent / name)))
    job = {"hash": info.seed_hash, "text": info.seed_text, "kernel": info.kernel,
           "arch": info.arch, "task_path": info.task_path, "entry": info.entry,
           "shapes": [{"key": s.key, "dims": s.dims} for s in info.shapes],
           "require_shapes": [s.key for s in info.shapes], "gates": ["static", "sim", "cost"],
           "sim": {"schedules": 1}}
    result = evaluate_job(job)
    assert result["status"] == "pass", result["failed_gate"]
    assert result["gates"]["static"]["detail"]["warnings"] == 0


def test_a_chain_of_moves_is_proposed_first_with_its_hedge(lab_and_info: Any) -> None:
    lab, info = lab_and_info
    ctx = Ctx(info, EvolveConfig(task="gemm_f16_sm80"))
    seed = info.seed_hash
    moves = EvolvePolicy(lab).propose(ctx, _state(ctx, seed, 1.0), None, 2, 2)  # type: ignore[arg-type]
    chain, hedge = moves
    assert chain["tactic"] == CHAIN and chain["parent"] == seed
    steps = Move(chain["tactic"], chain["params"]).steps
    assert len(steps) >= 2 and {s.tactic for s in steps} == {"tile-size", "stages"}
    assert chain["move_class"] == "+".join(s.move_class for s in steps)
    assert chain["rationale"].startswith(f"{len(steps)} moves: ")
    # the hedge is the best single move, and the chain beats it by more than CHAIN_GAIN
    assert hedge["tactic"] != CHAIN and hedge["parent"] == seed
    assert chain["predicted"] > hedge["predicted"] * (1 + CHAIN_GAIN)
    # the coder rebuilds exactly the kernel the policy priced
    text, why = lab.apply(info.seed_text, Move(chain["tactic"], chain["params"]))
    assert content_hash(text) == chain["hash"] and why.count(";") == len(steps) - 1
    times, _, _ = lab.price(text, info.shapes)
    assert target_score(ctx, times, info.shapes) == pytest.approx(chain["predicted"])  # type: ignore[arg-type]


def test_without_lookahead_every_candidate_is_one_move(lab_and_info: Any) -> None:
    lab, info = lab_and_info
    ctx = Ctx(info, EvolveConfig(task="gemm_f16_sm80"))
    policy = make_policy("greedy", lab)
    assert isinstance(policy, EvolvePolicy) and policy.lookahead == 1
    moves = policy.propose(ctx, _state(ctx, info.seed_hash, 1.0), None, 2, 2)  # type: ignore[arg-type]
    assert len(moves) == 2 and all(m["tactic"] != CHAIN for m in moves)


def test_no_chain_at_a_local_optimum_of_the_cost_model(lab_and_info: Any) -> None:
    lab, info = lab_and_info
    ctx = Ctx(info, EvolveConfig(task="gemm_f16_sm80"))
    policy = EvolvePolicy(lab)
    (first,) = policy.propose(ctx, _state(ctx, info.seed_hash, 1.0), None, 1, 2)  # type: ignore[arg-type]
    text, _ = lab.apply(info.seed_text, Move(first["tactic"], first["params"]))
    top = content_hash(text)
    ctx.texts[top] = text
    calls = lab.preview_calls
    moves = policy.propose(ctx, _state(ctx, top, first["predicted"]), None, 2, 3)  # type: ignore[arg-type]
    assert moves and all(m["tactic"] != CHAIN and m["parent"] == top for m in moves)
    assert all(m["predicted"] <= first["predicted"] for m in moves)
    # only the single moves were previewed: the lookahead did not run
    assert lab.preview_calls - calls == len(lab.moves(text))


def test_a_chain_declines_when_any_step_does(lab_and_info: Any) -> None:
    lab, info = lab_and_info
    good = {"tactic": "stages", "params": {"stages": 3}}
    bad = {"tactic": "tile-size", "params": {"name": "NOPE", "value": 64}}
    assert lab.apply(info.seed_text, Move(CHAIN, {"steps": [good]})) is not None
    assert lab.apply(info.seed_text, Move(CHAIN, {"steps": [good, bad]})) is None
    assert lab.apply(info.seed_text, Move(CHAIN, {"steps": []})) is None


def test_chain_failures_do_not_block_their_steps() -> None:
    chain = Move(CHAIN, {"steps": [{"tactic": "stages", "params": {"stages": 3}},
                                   {"tactic": "tile-size", "params": {"name": "BN",
                                                                      "value": 64}}]})
    assert chain.move_class == "stages+tile-size(name=BN)"
    assert [m.move_class for m in chain.steps] == ["stages", "tile-size(name=BN)"]
    memory = [{"move_class": chain.move_class, "hashes": ["a", "b"]}]
    assert blocked_classes(memory) == {"stages+tile-size(name=BN)"}


def test_an_offline_run_evaluates_the_chain_right_after_the_seed(lab_and_info: Any, lsp: Any,
                                                                 tmp_path: Path) -> None:
    from cake_agents.executor import InlineExecutor
    from cake_agents.run import evolve
    from cake_agents.store import RunsStore

    lab, info = lab_and_info
    cfg = EvolveConfig(task="gemm_f16_sm80", seed_kernel=str(SEED), mode="reference",
                       run_dir=str(tmp_path), budget_evals=2, executor="inline",
                       gates=("static", "sim", "cost"), sim_schedules=1)
    summary = evolve(cfg, executor=InlineExecutor(), lsp=lsp, lab=lab, write_report=False)
    store = RunsStore(tmp_path / "runs.sqlite")
    try:
        rows = store.progress(summary.run_id)
        cand = store.candidate(summary.run_id, summary.best_hash)
    finally:
        store.close()
    # the seed, then the chain: simulated, passing, and as fast as the policy predicted
    assert [r["status"] for r in rows] == ["pass", "pass"] and summary.evals == 2
    assert cand is not None and cand["tactic"] == CHAIN
    assert cand["parent"] == info.seed_hash and len(cand["params"]["steps"]) >= 2
    # (the best single move from the seed is predicted 2.75x)
    assert summary.best_score is not None and summary.best_score > 4.0


def test_structural_moves_are_not_starved_by_many_variants() -> None:
    """From the k-means seed the retuning tactics offer ~30 variants (stage counts,
    swizzles per buffer) before the structural rewrites in plugin order; the lab lists
    them round-robin, so the first generation's 32 previews reach the ping-pong and the
    chain the policy proposes combines it with two 64-row slabs per warpgroup and fmas."""
    from cake_core.plugins import load_config, load_plugins

    info = load_task_info(EvolveConfig(task="kmeans_assign"))
    tactics = [t for _, t in load_plugins(load_config()).tactics()]
    lab = TacticLab(tactics, info.kernel, info.arch)
    first = [m.tactic for m in lab.moves(info.seed_text)[:len({t.name for t in tactics})]]
    assert "consumer-pingpong" in first and "fuse-multiply-add" in first
    ctx = Ctx(info, EvolveConfig(task="kmeans_assign"))
    moves = EvolvePolicy(lab).propose(ctx, _state(ctx, info.seed_hash, 1.0), None, 2, 2)  # type: ignore[arg-type]
    steps = {(s.tactic, s.params.get("value")) for s in
             Move(moves[0]["tactic"], moves[0]["params"]).steps}
    assert {("consumer-pingpong", None), ("tile-size", 256), ("fuse-multiply-add", None)} <= steps
