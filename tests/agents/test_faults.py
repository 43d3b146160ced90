"""Runs survive faults: real `cake evolve` processes killed with SIGKILL at exact points.

Each test stops a run at a named point (`CAKE_TEST_PAUSE_AT`, `cake_agents/testhook.py`:
the process says where it is on stderr and sleeps), kills it with `kill -9`, resumes it
with `--resume`, and compares what the run found (its best kernel, its evaluation count,
the list of evaluated candidates in order, every stored evaluation and failure) with an
uninterrupted run of the same seed: nothing lost, nothing evaluated twice.  The model
call is killed against a local OpenAI-compatible server that stalls.
"""

from __future__ import annotations

import hashlib
import json
import os
import queue
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from agent_support import GEMM, ROOT

from cake_agents.testhook import ENV, MARKER

ARGS = ["gemm_bf16", "--budget-evals", "4", "--seed-rng", "3", "--executor", "inline",
        "--gates", "static,sim,cost"]
TIMEOUT_S = 300.0


def _cake(*args: str) -> list[str]:
    return [sys.executable, "-m", "cake", *args]


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != ENV}
    return {**env, "PYTHONPATH": str(ROOT), **extra}


def _children(pid: int) -> list[int]:
    try:
        tasks = Path(f"/proc/{pid}/task").iterdir()
        return [int(c) for t in tasks for c in (t / "children").read_text().split()]
    except OSError:
        return []


def _kill_at(run_dir: Path, point: str, args: list[str], *,
             ready: threading.Event | None = None, **env: str) -> list[int]:
    """Start a run, wait until it pauses at `point` (or until `ready` is set), kill it.

    Returns the pids of its child processes at the time of the kill."""
    extra = {ENV: point} if point else {}
    proc = subprocess.Popen(_cake("evolve", *args, "--run-dir", str(run_dir)), cwd=ROOT,
                            env=_env(**extra, **env), stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    lines: queue.Queue[str] = queue.Queue()

    def pump() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            lines.put(line)
        lines.put("")

    threading.Thread(target=pump, daemon=True).start()
    deadline, said = time.monotonic() + TIMEOUT_S, []
    try:
        while True:
            assert time.monotonic() < deadline, f"never reached {point}: {''.join(said)}"
            if ready is not None and ready.wait(0.05):
                break
            try:
                line = lines.get(timeout=0.05)
            except queue.Empty:
                continue
            said.append(line)
            assert line, f"the run ended before reaching {point}: {''.join(said)}"
            if line.startswith(MARKER) and point:
                assert line.split()[1].startswith(point), line
                break
        children = _children(proc.pid)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.kill()
        proc.wait(TIMEOUT_S)
    assert proc.returncode == -signal.SIGKILL
    return children


def _resume(run_dir: Path, **env: str) -> None:
    r = subprocess.run(_cake("evolve", "--resume", "latest", "--run-dir", str(run_dir),
                             "--quiet"), cwd=ROOT, env=_env(**env), capture_output=True,
                       text=True, timeout=TIMEOUT_S)
    assert r.returncode == 0, r.stdout + r.stderr


def _clean(run_dir: Path, args: list[str], **env: str) -> dict[str, Any]:
    r = subprocess.run(_cake("evolve", *args, "--run-dir", str(run_dir), "--quiet"),
                       cwd=ROOT, env=_env(**env), capture_output=True, text=True,
                       timeout=TIMEOUT_S)
    assert r.returncode == 0, r.stdout + r.stderr
    return result(run_dir)


def result(run_dir: Path) -> dict[str, Any]:
    """What a run found, in a form two runs can be compared by."""
    db = sqlite3.connect(run_dir / "runs.sqlite")
    try:
        (run_id, status, summary), = db.execute("SELECT run_id, status, summary FROM runs")

        def q(sql: str) -> list[tuple[Any, ...]]:
            return db.execute(sql, (run_id,)).fetchall()

        progress = q("SELECT seq, step, hash, status, score, best FROM progress "
                     "WHERE run_id=? ORDER BY seq")
        results = q("SELECT hash FROM evaluations WHERE run_id=? AND gate='_result'")
        s = json.loads(summary)
        out = {
            "status": status,
            "summary": {k: s[k] for k in ("evals", "proposed", "best_hash", "best_score",
                                          "usage")},
            "evaluated": [p[2] for p in progress],
            "progress": progress,
            "evaluations": sorted(q("SELECT hash, gate, status FROM evaluations "
                                    "WHERE run_id=?")),
            "failures": sorted(q("SELECT hash, step, ordinal, gate, code, digest "
                                 "FROM failures WHERE run_id=?")),
            "candidates": sorted(q("SELECT hash, parent, tactic, step FROM candidates "
                                   "WHERE run_id=?")),
            "usage": sorted(q("SELECT step, node, attempt, tokens_in, tokens_out, ok "
                              "FROM usage WHERE run_id=?")),
        }
    finally:
        db.close()
    # no evaluation lost or duplicated: one result and one progress row per evaluation
    evaluated = out["evaluated"]
    assert len(evaluated) == len(set(evaluated)) == len(results) == s["evals"]
    assert [p[0] for p in progress] == list(range(1, s["evals"] + 1))
    return out


@pytest.fixture(scope="module")
def clean(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The uninterrupted run every killed run must end up equal to."""
    out = _clean(tmp_path_factory.mktemp("clean"), ARGS)
    assert out["status"] == "finished" and out["summary"]["evals"] == 4
    return out


@pytest.mark.slow
@pytest.mark.parametrize("point", ["gate:sim#3", "evaluated#2", "checkpoint#9",
                                   "node:archivist#2"])
def test_killed_at_a_point_resumes_to_the_same_result(tmp_path: Path, clean: dict[str, Any],
                                                      point: str) -> None:
    _kill_at(tmp_path, point, ARGS)
    _resume(tmp_path)
    assert result(tmp_path) == clean


@pytest.mark.slow
def test_killed_during_an_evaluation_in_a_worker(tmp_path: Path,
                                                  clean: dict[str, Any]) -> None:
    """The default executor: the parent dies while a worker process runs the gates; the
    worker goes away on its own, and the resumed run evaluates each kernel once."""
    args = [a if a != "inline" else "local" for a in ARGS] + ["--workers", "1"]
    workers = _kill_at(tmp_path, "gate:sim#2", args)
    assert workers, "the evaluation ran in no worker process"
    deadline = time.monotonic() + TIMEOUT_S
    while any(Path(f"/proc/{w}").exists() and _state(w) != "Z" for w in workers):
        assert time.monotonic() < deadline, "an orphaned worker outlived its run"
        time.sleep(0.1)
    _resume(tmp_path)
    assert result(tmp_path) == clean


def _state(pid: int) -> str:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return "X"
    return stat[stat.rindex(")") + 2:].split()[0]


# --- a model call, against a local OpenAI-compatible server that can stall ----------------
_VARIANTS = [GEMM.replace("STAGES = 4", "STAGES = 3", 1),
             GEMM.replace("STAGES = 4", "STAGES = 2", 1),
             GEMM.replace("BM, BN, BK = 128, 256, 64", "BM, BN, BK = 128, 128, 64", 1)]


class _FakeOpenAI(ThreadingHTTPServer):
    """Chat completions whose answer is a function of the prompt (so a re-sent request
    gets the same answer); request number `stall_on` gets no answer at all."""

    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.requests = 0
        self.stall_on: int | None = None
        self.stalled = threading.Event()
        self.release = threading.Event()
        self.lock = threading.Lock()


class _Handler(BaseHTTPRequestHandler):
    server: _FakeOpenAI

    def log_message(self, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        with self.server.lock:
            self.server.requests += 1
            n = self.server.requests
        if n == self.server.stall_on:
            self.server.stalled.set()
            self.server.release.wait(TIMEOUT_S)
            return
        prompt = json.dumps(body["messages"], sort_keys=True)
        pick = int(hashlib.sha256(prompt.encode()).hexdigest(), 16) % len(_VARIANTS)
        text = f"Here it is.\n\n```python\n{_VARIANTS[pick]}```\n"
        reply = {"id": f"c{n}", "object": "chat.completion", "created": 0,
                 "model": body["model"],
                 "choices": [{"index": 0, "finish_reason": "stop",
                              "message": {"role": "assistant", "content": text}}],
                 "usage": {"prompt_tokens": len(prompt) // 4,
                           "completion_tokens": len(text) // 4,
                           "total_tokens": len(prompt) // 4 + len(text) // 4}}
        data = json.dumps(reply).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@pytest.fixture
def fake_openai() -> Iterator[_FakeOpenAI]:
    server = _FakeOpenAI()
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield server
    finally:
        server.release.set()
        server.shutdown()
        server.server_close()


@pytest.mark.slow
def test_killed_during_a_model_call(tmp_path: Path, fake_openai: _FakeOpenAI) -> None:
    env = {"OPENAI_API_BASE": f"http://127.0.0.1:{fake_openai.server_address[1]}/v1",
           "OPENAI_API_KEY": "sk-test-not-a-key"}
    # whole (not streamed) answers: this stand-in server answers JSON, chosen by prompt
    args = ["gemm_bf16", "--model", "openai/cake-test", "--budget-evals", "3", "--no-stream",
            "--seed-rng", "3", "--executor", "inline", "--gates", "static,sim,cost"]
    clean = _clean(tmp_path / "clean", args, **env)
    asked = fake_openai.requests
    assert clean["summary"]["usage"]["calls"] == asked >= 2

    fake_openai.requests, fake_openai.stall_on = 0, 2
    _kill_at(tmp_path / "killed", "", args, ready=fake_openai.stalled, **env)
    fake_openai.stall_on = None
    _resume(tmp_path / "killed", **env)
    assert result(tmp_path / "killed") == clean
    # the first answer was replayed from the store; the killed call was asked again
    assert fake_openai.requests == 2 + asked - 1
