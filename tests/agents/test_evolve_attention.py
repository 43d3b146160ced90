"""The search on attention: it repairs a de-tuned seed, and portfolio runs of the head-dim
tasks merge into one dispatcher that chooses by head dim and sequence length."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from agent_support import ROOT

from cake_core.check import check_text

DETUNED = ROOT / "tests" / "data" / "attention_fwd_detuned.cake"


@pytest.mark.slow
def test_evolve_repairs_a_de_tuned_attention_seed(tmp_path: Path, lsp: Any) -> None:
    """One K/V stage: loads and math take turns.  Three evaluations find a deeper ring."""
    pytest.importorskip("cake_tactics")
    from agent_support import store

    from cake_agents.config import EvolveConfig
    from cake_agents.executor import InlineExecutor
    from cake_agents.run import evolve

    cfg = EvolveConfig(task="attention_fwd", seed_kernel=str(DETUNED), mode="reference",
                       run_dir=str(tmp_path), budget_evals=3, executor="inline",
                       gates=("static", "sim", "cost"), sim_schedules=1)
    summary = evolve(cfg, executor=InlineExecutor(), lsp=lsp, write_report=False)
    assert summary.best_score is not None and summary.best_score >= 1.5, summary.best_score
    best = store(tmp_path).candidate_text(summary.run_id, summary.best_hash) or ""
    assert "STAGES = 1 " not in best
    assert check_text(best, "best.cake").diagnostics == []
