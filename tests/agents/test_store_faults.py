"""The runs store under bad conditions: damaged files, several processes writing at once.

A damaged store or checkpoint file is a message and exit status 2, never a traceback;
one run's damaged checkpoints leave the other runs readable.  Two processes writing one
store at once both get every row in, and the file stays sound (`integrity_check`).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from agent_support import ROOT
from click.testing import CliRunner

from cake_agents.config import EvolveConfig
from cake_agents.run import CHECKPOINTS
from cake_agents.store import STORE_NAME, RunsStore
from cake_cli.main import main

TIMEOUT_S = 120.0


def _store_with_runs(run_dir: Path, *ids: str) -> None:
    store = RunsStore(run_dir / STORE_NAME)
    for run_id in ids:
        cfg = EvolveConfig(task="gemm_bf16", run_dir=str(run_dir), executor="inline")
        store.create_run(run_id, task="gemm_bf16", mode="clean", model=None, seed_rng=0,
                         config=cfg.to_json())
        store.set_status(run_id, "finished", stop_reason="done",
                         summary={"evals": 3, "best_score": 1.5, "best_hash": "ab" * 8})
    store.close()


def _cake(*args: str) -> tuple[int, str]:
    r = CliRunner().invoke(main, list(args))
    assert "Traceback" not in r.output
    return r.exit_code, r.output


def _garble(path: Path, keep: int = 0) -> None:
    """Garbage over the file from byte `keep` on (its size unchanged)."""
    data = path.read_bytes()
    path.write_bytes(data[:keep] + bytes((i * 37 + 11) % 256 for i in range(len(data) - keep)))


def test_a_store_overwritten_with_garbage_is_a_message(tmp_path: Path) -> None:
    _store_with_runs(tmp_path, "run-a", "run-b")
    _garble(tmp_path / STORE_NAME)
    for args in (["runs", "list"], ["runs", "show", "run-a"], ["runs", "best", "run-a"],
                 ["runs", "report", "run-a"], ["failures"], ["evolve", "--resume", "run-a"],
                 ["evolve", "gemm_bf16"]):
        code, out = _cake(*args, "--run-dir", str(tmp_path))
        assert code == 2, (args, out)
        assert f"the runs store {tmp_path / STORE_NAME} is damaged" in out, (args, out)
        assert ".recover" in out and "internal error" not in out


def test_a_store_damaged_past_its_header_is_a_message(tmp_path: Path) -> None:
    """The file still opens (its first page is sound); the queries meet the damage."""
    _store_with_runs(tmp_path, "run-a")
    store = RunsStore(tmp_path / STORE_NAME)
    page = store._rows("PRAGMA page_size")[0]["page_size"]
    store.close()
    _garble(tmp_path / STORE_NAME, keep=page)
    for args in (["runs", "list"], ["runs", "show", "run-a"]):
        code, out = _cake(*args, "--run-dir", str(tmp_path))
        assert code == 2, (args, out)
        assert "is damaged" in out and "internal error" not in out, (args, out)


def test_one_runs_damaged_checkpoints_leave_the_others_readable(tmp_path: Path) -> None:
    _store_with_runs(tmp_path, "run-a", "run-b")
    for run_id in ("run-a", "run-b"):
        (tmp_path / run_id).mkdir()
    (tmp_path / "run-a" / CHECKPOINTS).write_bytes(b"\x00garbage" * 512)

    code, out = _cake("evolve", "--resume", "run-a", "--run-dir", str(tmp_path))
    assert code == 2
    assert f"the checkpoints of run run-a ({tmp_path / 'run-a' / CHECKPOINTS}) are damaged" \
        in out and "cannot be resumed" in out
    code, out = _cake("runs", "list", "--run-dir", str(tmp_path))
    assert code == 0 and [line.split()[0] for line in out.splitlines()[1:]] == ["run-a",
                                                                                "run-b"]
    for run_id in ("run-a", "run-b"):
        code, out = _cake("runs", "show", run_id, "--run-dir", str(tmp_path))
        assert code == 0 and "best     1.500x predicted" in out


# Writes what a run writes, as fast as it can, from its own process.
_WRITER = """
import sys, time
from pathlib import Path
from cake_agents.store import RunsStore
from cake_agents.signature import signature
store = RunsStore(Path(sys.argv[1]))
run_id, n = sys.argv[2], int(sys.argv[3])
store.create_run(run_id, task="t", mode="clean", model=None, seed_rng=0, config={})
for i in range(n):
    h = f"{run_id}-{i:04d}"
    store.add_candidate(run_id, h, parent=None, tactic="x", params={"i": i}, origin="test",
                        step=i, text="k" * 2000)
    store.add_evaluation(run_id, h, "sim", "pass", {"i": i}, 0.0)
    store.add_failure(run_id, hash_=h, step=i, sig=signature("sim", "E1", "m", "x = 1"),
                      message="m")
    store.add_progress(run_id, seq=i + 1, step=i, hash_=h, status="pass", gate="",
                       score=1.0, best=1.0, tactic="x")
    assert store.list_runs()  # readers meet the writers too
store.set_status(run_id, "finished", summary={"evals": n})
store.close()
"""


def test_two_processes_write_one_store_at_once(tmp_path: Path) -> None:
    n = 150
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    procs = [subprocess.Popen([sys.executable, "-c", _WRITER, str(tmp_path / STORE_NAME),
                               run_id, str(n)], cwd=ROOT, env=env, stderr=subprocess.PIPE,
                              text=True)
             for run_id in ("run-a", "run-b")]
    for p in procs:
        _, err = p.communicate(timeout=TIMEOUT_S)
        assert p.returncode == 0, err
    store = RunsStore(tmp_path / STORE_NAME)
    try:
        assert store.integrity() == "ok"
        assert sorted((r["run_id"], r["status"]) for r in store.list_runs()) == \
            [("run-a", "finished"), ("run-b", "finished")]
        for run_id in ("run-a", "run-b"):
            assert len(store.candidates(run_id)) == n
            assert len(store.evaluations(run_id)) == n
            assert len(store.failures(run_id)) == n
            assert [p["seq"] for p in store.progress(run_id)] == list(range(1, n + 1))
    finally:
        store.close()


@pytest.mark.slow
def test_two_runs_on_one_store(tmp_path: Path) -> None:
    """Two real `cake evolve` processes on one run directory at once."""
    args = ["--budget-evals", "3", "--executor", "inline", "--gates", "static,sim,cost",
            "--quiet", "--run-dir", str(tmp_path)]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    procs = [subprocess.Popen([sys.executable, "-m", "cake", "evolve", task, *args], cwd=ROOT,
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True)
             for task in ("gemm_bf16", "kmeans_assign")]
    for p in procs:
        out, err = p.communicate(timeout=TIMEOUT_S * 2)
        assert p.returncode == 0, out + err
    code, out = _cake("runs", "list", "--run-dir", str(tmp_path))
    rows = [line.split() for line in out.splitlines()[1:]]
    assert code == 0 and sorted((r[1], r[3], r[4]) for r in rows) == [
        ("gemm_bf16", "finished", "3"), ("kmeans_assign", "finished", "3")]
    store = RunsStore(tmp_path / STORE_NAME)
    try:
        assert store.integrity() == "ok"
    finally:
        store.close()
