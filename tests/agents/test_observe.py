"""Observable runs: diffs, chain steps and intents in `cake runs show`, `runs diff`, the
report and the progress lines; the store migration that keeps them; Ctrl-C's advice."""

from __future__ import annotations

import io
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from agent_support import GEMM, fenced, run, store
from click.testing import CliRunner

from cake_agents.context import content_hash
from cake_agents.models import ScriptedModel
from cake_agents.observe import diff_stat, headline, unified
from cake_agents.progress import LineProgress
from cake_cli.main import main

ROOT = Path(__file__).resolve().parents[2]
SEED = ROOT / "bench" / "data" / "agent_search" / "gemm_sm80_detuned.cake"


@pytest.fixture(scope="module")
def chain_run(tmp_path_factory: pytest.TempPathFactory, lsp: Any) -> tuple[Path, Any]:
    """An offline run whose second candidate is a chain (the de-tuned sm_80 GEMM)."""
    pytest.importorskip("cake_tactics")
    from cake_agents.config import EvolveConfig
    from cake_agents.executor import InlineExecutor
    from cake_agents.run import evolve

    run_dir = tmp_path_factory.mktemp("runs")
    cfg = EvolveConfig(task="gemm_f16_sm80", seed_kernel=str(SEED), mode="reference",
                       run_dir=str(run_dir), budget_evals=2, executor="inline",
                       gates=("static", "sim", "cost"), sim_schedules=1)
    return run_dir, evolve(cfg, executor=InlineExecutor(), lsp=lsp, write_report=False)


def test_show_lists_kept_candidates_with_chain_steps_and_diffs(chain_run: Any) -> None:
    run_dir, summary = chain_run
    s = store(run_dir)
    best = s.candidate(summary.run_id, summary.best_hash)
    assert best is not None and best["tactic"] == "chain"
    # every step is stored with the kernel it leaves; the last one is the candidate
    assert len(best["steps"]) >= 2 and best["steps"][-1]["text"] == best["text"]
    cli = CliRunner()
    r = cli.invoke(main, ["runs", "show", summary.run_id, "--run-dir", str(run_dir)])
    assert r.exit_code == 0, r.output
    assert "kept candidates" in r.output
    for i, st in enumerate(best["steps"]):
        # whole, one per line: not the joined text cut after its first step
        assert f"step {i + 1}: {st['tactic']} " in r.output and st["rationale"] in r.output
    assert "diff against" not in r.output
    r = cli.invoke(main, ["runs", "show", summary.run_id, "--diffs", "--run-dir",
                          str(run_dir)])
    assert "diff against its parent" in r.output and "+++ candidate" in r.output
    r = cli.invoke(main, ["runs", "show", summary.run_id, "--candidate", "best",
                          "--run-dir", str(run_dir)])
    assert r.exit_code == 0 and f"candidate {summary.best_hash}" in r.output
    assert "diff against the seed" in r.output


def test_runs_diff_takes_runs_and_candidates(chain_run: Any) -> None:
    run_dir, summary = chain_run
    s = store(run_dir)
    best_text = s.candidate_text(summary.run_id, summary.best_hash)
    cli = CliRunner()
    r = cli.invoke(main, ["runs", "diff", f"{summary.run_id}:seed", summary.run_id[:16],
                          "--run-dir", str(run_dir)])
    assert r.exit_code == 0, r.output
    assert r.output.startswith(f"--- {summary.run_id}:")
    assert r.output == unified(SEED.read_text(), best_text or "",
                               f"{summary.run_id}:{content_hash(SEED.read_text())[:10]}",
                               f"{summary.run_id}:{summary.best_hash[:10]}")
    added, removed = diff_stat(r.output)
    assert added and removed
    r = cli.invoke(main, ["runs", "diff", "latest", f"latest:{summary.best_hash[:8]}",
                          "--run-dir", str(run_dir)])
    assert r.exit_code == 0 and r.output == ""
    r = cli.invoke(main, ["runs", "diff", "latest:ffffff", "latest", "--run-dir",
                          str(run_dir)])
    assert r.exit_code == 2 and "no candidate 'ffffff'" in r.output


def test_report_shows_kept_candidates_with_diffs(chain_run: Any, tmp_path: Path) -> None:
    from cake_agents.report import render_report

    run_dir, summary = chain_run
    page = render_report(store(run_dir), summary.run_id)
    assert "<h2>Kept candidates</h2>" in page and page.count("<div class=kept>") == 2
    assert "diff against the seed" in page and "diff of this step" in page
    assert '<span class="add">+' in page


def test_progress_prints_every_step_of_a_chain() -> None:
    out = io.StringIO()
    steps = ["stages: 2 -> 4 " + "x" * 80, "tile-size: BN 32 -> 64", "tile-size: BM 32 -> 64"]
    LineProgress(out).event("evaluated", seq=2, budget=4, entry={
        "hash": "ab" * 8, "status": "pass", "score": 5.0, "steps": steps,
        "rationale": "; ".join(steps)})
    lines = out.getvalue().splitlines()
    assert "chain of 3 moves" in lines[0]
    assert [x.strip() for x in lines[1:]] == [f"{i + 1}. {s}" for i, s in enumerate(steps)]
    assert headline({"intent": "deepen the ring", "rationale": "r"}) == ("deepen the ring", [])


def test_model_intent_is_kept_and_shown(run_dir: Path, lsp: Any) -> None:
    variant = GEMM.replace("STAGES = 4", "STAGES = 3", 1)
    assert variant != GEMM
    model = ScriptedModel([fenced(variant, "Intent: a 3-stage ring frees shared memory.")])
    summary = run(run_dir, lsp, client=model, budget_evals=2, batch=1, patience=1)
    s = store(run_dir)
    cand = s.candidate(summary.run_id, content_hash(variant))
    assert cand is not None and cand["intent"] == "Intent: a 3-stage ring frees shared memory."
    r = CliRunner().invoke(main, ["runs", "show", summary.run_id, "--run-dir", str(run_dir)])
    assert "intent: Intent: a 3-stage ring frees shared memory." in r.output
    assert "-STAGES = 4" in unified(GEMM, variant, "a", "b")


def test_an_old_store_gains_the_new_columns(tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE candidates (run_id TEXT, hash TEXT, parent TEXT, tactic TEXT, "
                 "params TEXT, origin TEXT, step INTEGER, text TEXT, created REAL, "
                 "PRIMARY KEY (run_id, hash))")
    conn.execute("INSERT INTO candidates VALUES ('r', 'h1', '', 'seed', '{}', 'seed', 0, "
                 "'text', 0.0)")
    conn.commit()
    conn.close()
    from cake_agents.store import RunsStore

    s = RunsStore(path)
    old = s.candidate("r", "h1")
    assert old is not None and old["intent"] == "" and old["steps"] == []
    s.add_candidate("r", "h2", parent="h1", tactic="model", params={}, origin="coder", step=1,
                    text="t2", intent="why")
    new = s.candidate("r", "h2")
    assert new is not None and new["intent"] == "why" and s.find_candidate("r", "seed") == "h1"


def test_ctrl_c_prints_the_resume_command(monkeypatch: pytest.MonkeyPatch,
                                          tmp_path: Path) -> None:
    import cake_agents.run

    def interrupted(config: Any, *, on_start: Any, **kw: Any) -> Any:
        on_start("gemm_bf16-20260101-000000-abcd")
        raise KeyboardInterrupt

    monkeypatch.setattr(cake_agents.run, "evolve", interrupted)
    r = CliRunner().invoke(main, ["evolve", "gemm_bf16", "--quiet", "--no-emulate",
                                  "--run-dir", str(tmp_path)])
    assert r.exit_code == 130
    assert (f"resume with: cake evolve --resume gemm_bf16-20260101-000000-abcd --run-dir "
            f"{tmp_path}") in r.output
