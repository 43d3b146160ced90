"""A run whose process is killed outright reads `interrupted`, not `running` for ever."""

from __future__ import annotations

import os
import select
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from agent_support import ROOT
from click.testing import CliRunner

from cake_agents.owner import Owner, current_owner
from cake_agents.store import STORE_NAME, RunsStore
from cake_cli.main import main

# A stand-in for `cake evolve`: it opens a run, says so, and waits on stdin until killed.
_OWNER = """
import sys
from pathlib import Path
from cake_agents.store import RunsStore
store = RunsStore(Path(sys.argv[1]))
store.create_run("r-killed", task="t", mode="clean", model=None, seed_rng=0, config={})
print("ready", flush=True)
sys.stdin.read()
"""
TIMEOUT_S = 30.0


def _status(run_dir: Path) -> str:
    r = CliRunner().invoke(main, ["runs", "list", "--run-dir", str(run_dir)])
    assert r.exit_code == 0, r.output
    return r.output.splitlines()[1].split()[3]


def test_a_run_killed_with_sigkill_reads_interrupted(tmp_path: Path) -> None:
    proc = subprocess.Popen([sys.executable, "-c", _OWNER, str(tmp_path / STORE_NAME)],
                            cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        ready, _, _ = select.select([proc.stdout], [], [], TIMEOUT_S)
        assert ready and proc.stdout.readline().strip() == "ready"
        assert _status(tmp_path) == "running"  # its owner is alive

        os.kill(proc.pid, signal.SIGKILL)
        # not reaped yet: the process lingers as a zombie, which must count as gone
        deadline = time.monotonic() + TIMEOUT_S
        while _status(tmp_path) != "interrupted":
            assert time.monotonic() < deadline, "the killed run still reads running"
            time.sleep(0.01)
    finally:
        proc.kill()
        proc.wait(TIMEOUT_S)
    assert proc.returncode == -signal.SIGKILL
    assert _status(tmp_path) == "interrupted"

    r = CliRunner().invoke(main, ["runs", "show", "r-killed", "--run-dir", str(tmp_path)])
    assert r.exit_code == 0
    assert (f"status   interrupted: its process ({proc.pid} on {current_owner().host}) "
            "ended without finishing; resume with --resume") in r.output
    page = tmp_path / "r.html"
    r = CliRunner().invoke(main, ["runs", "report", "r-killed", "--run-dir", str(tmp_path),
                                  "-o", str(page)])
    assert r.exit_code == 0 and "status <b>interrupted</b>" in page.read_text()
    # the stored status is untouched: a resume makes the run `running` again, owned anew
    store = RunsStore(tmp_path / STORE_NAME)
    store.set_status("r-killed", "running")
    row = store.run("r-killed")
    store.close()
    assert row is not None
    assert row["status"] == "running" and row["owner"].endswith(f":{os.getpid()}")


def test_owner_liveness() -> None:
    me = current_owner()
    assert me.alive() is True
    assert Owner(me.host, me.pid, me.token + "0").alive() is False  # pid reused by another
    assert Owner("elsewhere." + me.host, me.pid, me.token).alive() is None


def test_a_store_without_owners_is_migrated(tmp_path: Path) -> None:
    db = sqlite3.connect(tmp_path / STORE_NAME)
    db.execute("CREATE TABLE runs (run_id TEXT PRIMARY KEY, task TEXT, mode TEXT, model TEXT, "
               "seed_rng INTEGER, created REAL, updated REAL, status TEXT, stop_reason TEXT, "
               "config TEXT, summary TEXT)")
    db.execute("INSERT INTO runs VALUES ('old', 't', 'clean', '', 0, 1.0, 1.0, 'running', '', "
               "'{}', '{}')")
    db.commit()
    db.close()
    store = RunsStore(tmp_path / STORE_NAME)
    row = store.run("old")
    store.close()
    # who ran it is unknown, so it cannot be declared dead
    assert row is not None and row["status"] == "running" and row["owner"] == ""
