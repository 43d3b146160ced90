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


@pytest.mark.slow
def test_portfolio_runs_of_two_head_dims_merge_into_one_dispatcher(tmp_path: Path,
                                                                   lsp: Any) -> None:
    import json

    from click.testing import CliRunner

    from cake_agents.config import EvolveConfig
    from cake_agents.executor import InlineExecutor
    from cake_agents.portfolio import select
    from cake_agents.run import evolve
    from cake_cli.main import main

    ids = []
    for task in ("attention_fwd_d64", "attention_fwd"):
        cfg = EvolveConfig(task=task, mode="portfolio", run_dir=str(tmp_path), budget_evals=1,
                           executor="inline", gates=("static", "sim", "cost"),
                           sim_schedules=1)
        ids.append(evolve(cfg, executor=InlineExecutor(), lsp=lsp, write_report=False).run_id)
    out = tmp_path / "attention"
    r = CliRunner().invoke(main, ["runs", "dispatch", *ids, "--run-dir", str(tmp_path),
                                  "-o", str(out), "--name", "attention"])
    assert r.exit_code == 0, r.output
    table = json.loads((out / "dispatch.json").read_text())
    assert sorted(table["dims"]) == ["BH", "D", "S"]
    tasks = {row["task"] for row in table["buckets"]}
    assert tasks == {"attention_fwd_d64", "attention_fwd"}
    for row in table["buckets"]:
        assert (out / f"{row['symbol']}.cake").read_text().startswith('"""')
    by_d = {64: "attention_fwd_d64", 128: "attention_fwd"}
    for d, task in by_d.items():
        i = select(table, {"BH": 256, "S": 4096, "D": d})
        assert i >= 0 and table["buckets"][i]["task"] == task
    assert select(table, {"BH": 256, "S": 4096, "D": 256}) == -1  # no run for head dim 256
    header = (out / "dispatch.hpp").read_text()
    assert "namespace cake_dispatch_attention" in header and "D == 64" in header
