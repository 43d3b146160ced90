"""`kill -9` in the middle of a run, then `--resume`: the same totals as a run that was
never interrupted (nothing lost, nothing counted twice)."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from agent_support import ROOT, run
from click.testing import CliRunner

from cake_cli.main import main

ARGS = ["gemm_bf16", "--budget-evals", "6", "--seed-rng", "5", "--executor", "inline",
        "--gates", "static,sim,cost"]
KILL_AFTER = 2


def _cake(*args: str) -> list[str]:
    return [sys.executable, "-m", "cake", *args]


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT)}


def _totals(run_dir: Path) -> dict[str, Any]:
    db = sqlite3.connect(run_dir / "runs.sqlite")
    (run_id,) = db.execute("SELECT run_id FROM runs").fetchone()

    def q(sql: str) -> list[tuple[Any, ...]]:
        return sorted(db.execute(sql, (run_id,)).fetchall())

    out = {
        "candidates": q("SELECT hash, parent, tactic, step FROM candidates WHERE run_id=?"),
        "evaluations": q("SELECT hash, gate, status FROM evaluations WHERE run_id=?"),
        "progress": q("SELECT seq, step, hash, status, score, best FROM progress "
                      "WHERE run_id=?"),
        "failures": q("SELECT hash, step, gate, code, digest FROM failures WHERE run_id=?"),
        "status": q("SELECT status, stop_reason FROM runs WHERE run_id=?"),
    }
    import json

    (summary,) = db.execute("SELECT summary FROM runs WHERE run_id=?", (run_id,)).fetchone()
    s = json.loads(summary)
    out["summary"] = {k: s[k] for k in ("evals", "proposed", "best_hash", "best_score",
                                        "usage")}
    db.close()
    return out


@pytest.mark.slow
def test_kill_9_then_resume_matches_an_uninterrupted_run(tmp_path: Path, lsp: Any) -> None:
    killed, clean = tmp_path / "killed", tmp_path / "clean"
    proc = subprocess.Popen(_cake("evolve", *ARGS, "--run-dir", str(killed)), cwd=ROOT,
                            env=_env(), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            text=True)
    assert proc.stdout is not None
    seen = 0
    for line in proc.stdout:  # progress lines arrive as evaluations finish
        if line.startswith("[eval "):
            seen += 1
            if seen == KILL_AFTER:
                os.kill(proc.pid, signal.SIGKILL)
                break
    proc.wait()
    assert proc.returncode == -signal.SIGKILL
    db = sqlite3.connect(killed / "runs.sqlite")
    (run_id, status) = db.execute("SELECT run_id, status FROM runs").fetchone()
    db.close()
    assert status == "running"  # it died without a chance to say anything
    listed = CliRunner().invoke(main, ["runs", "list", "--run-dir", str(killed)])
    assert listed.output.splitlines()[1].split()[3] == "interrupted"  # its process is gone

    resumed = subprocess.run(_cake("evolve", "--resume", run_id[:12], "--run-dir",
                                   str(killed), "--quiet"),
                             cwd=ROOT, env=_env(), capture_output=True, text=True)
    assert resumed.returncode == 0, resumed.stderr
    assert run_id in resumed.stdout
    # the same run without interruption (in this process: same code path below the CLI)
    run(clean, lsp, budget_evals=6, seed_rng=5, sim_schedules=2)
    a, b = _totals(killed), _totals(clean)
    assert a == b
    assert a["summary"]["evals"] == 6
