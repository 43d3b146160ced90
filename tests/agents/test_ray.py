"""The Ray executor against a real Ray instance: a head on loopback with two workers.

One private instance (started by `RayExecutor` itself, as `cake evolve --executor ray`
starts it) serves the module.  The tests check what a user relies on: it listens on
127.0.0.1 only, it runs two evaluations at once in two worker processes, its results are
the local pool's for the same jobs, and a worker killed mid-evaluation costs one retry,
then a reported failure, never a hang or a crash.
"""

from __future__ import annotations

import ipaddress
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from agent_support import FAST_GATES, GEMM, ROOT, TYPO

from cake_agents.context import content_hash
from cake_agents.executor import RAY_ATTEMPTS, LocalPoolExecutor, RayExecutor, RayUnavailable
from cake_agents.gates import evaluate_job

pytestmark = pytest.mark.slow
ray = pytest.importorskip("ray")

SHAPE = {"key": "M=4096,N=4096,K=4096", "dims": {"M": 4096, "N": 4096, "K": 4096}}
WORKERS = 2


def _job(text: str = GEMM, **kw: Any) -> dict[str, Any]:
    job = {"hash": content_hash(text), "text": text, "path": "k.cake",
           "task_path": str(ROOT / "examples" / "tasks" / "gemm_bf16.py"),
           "kernel": "gemm_sm90", "entry": 0, "shapes": [SHAPE],
           "require_shapes": [SHAPE["key"]], "sim": {"schedules": 2, "seed": 7},
           "gates": list(FAST_GATES)}
    job.update(kw)
    return job


def _held(job: dict[str, Any]) -> dict[str, Any]:
    """An evaluation that first says which process runs it, then holds for a while, so a
    test can kill that process mid-evaluation."""
    with Path(job["trace"]).open("a", encoding="utf-8") as f:
        f.write(f"{os.getpid()}\n")
    time.sleep(float(job["hold"]))
    return evaluate_job(job)


def _pinned(seconds: float) -> int:
    time.sleep(seconds)
    return os.getpid()


@pytest.fixture(scope="module")
def ray_executor() -> Iterator[RayExecutor]:
    if ray.is_initialized():  # pragma: no cover - another module left one running
        ray.shutdown()
    # the test module's functions travel to the workers by value (they cannot import it)
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    ex = RayExecutor(num_cpus=WORKERS, timeout_s=300.0)
    try:
        yield ex
    finally:
        ex.close()
        ray.cloudpickle.unregister_pickle_by_value(sys.modules[__name__])


def _comparable(result: dict[str, Any]) -> dict[str, Any]:
    """A result without its wall-clock times, the only part two runs may differ in."""
    out = json.loads(json.dumps(result))
    for gate in out["gates"].values():
        gate.pop("seconds", None)
    return out


# --- what runs and where it listens ---------------------------------------------------------
def _descendants(root: int) -> set[int]:
    parents: dict[int, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parents[int(stat.parent.name)] = int(fields[1])
    found, frontier = {root}, [root]
    while frontier:
        pid = frontier.pop()
        kids = [p for p, pp in parents.items() if pp == pid and p not in found]
        found.update(kids)
        frontier.extend(kids)
    return found


def _listening(pids: set[int]) -> list[tuple[int, str]]:
    """(pid, local address) of every listening TCP socket the processes hold."""
    inodes: dict[str, int] = {}
    for pid in pids:
        try:
            fds = list(Path(f"/proc/{pid}/fd").iterdir())
        except OSError:
            continue
        for fd in fds:
            try:
                target = str(fd.readlink())
            except OSError:  # closed meanwhile
                continue
            if target.startswith("socket:["):
                inodes[target[8:-1]] = pid
    out = []
    for table, family in (("/proc/net/tcp", socket.AF_INET), ("/proc/net/tcp6", socket.AF_INET6)):
        with Path(table).open() as f:
            next(f)
            for line in f:
                cols = line.split()
                if cols[3] != "0A" or cols[9] not in inodes:  # 0A: LISTEN
                    continue
                hexip = cols[1].split(":")[0]
                raw = bytes.fromhex(hexip)
                # /proc prints each 32-bit word in host (little-endian) order
                raw = b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4))
                out.append((inodes[cols[9]], socket.inet_ntop(family, raw)))
    return out


def _loopback(addr: str) -> bool:
    ip = ipaddress.ip_address(addr)
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return ip.ipv4_mapped.is_loopback
    return ip.is_loopback


@pytest.mark.skipif(not Path("/proc/net/tcp").is_file(), reason="needs Linux's /proc")
def test_head_listens_on_loopback_only_with_two_workers(ray_executor: RayExecutor) -> None:
    ours = _descendants(os.getpid())
    cmdlines = {p: Path(f"/proc/{p}/cmdline").read_bytes() for p in ours
                if Path(f"/proc/{p}/cmdline").exists()}
    assert any(b"gcs_server" in c for c in cmdlines.values()), "no Ray head under this test"
    sockets = _listening(ours)
    assert sockets, "Ray listens on nothing?"
    assert all(_loopback(addr) for _, addr in sockets), sockets
    assert ray.cluster_resources().get("CPU") == WORKERS

    # two evaluations at once, in two worker processes of this head
    remote = ray.remote(_pinned)
    pids = ray.get([remote.remote(1.0) for _ in range(WORKERS)], timeout=120)
    assert len(set(pids)) == WORKERS
    assert set(pids) <= _descendants(os.getpid())


def test_results_equal_the_local_pool_for_the_same_seed(ray_executor: RayExecutor) -> None:
    jobs = [_job(), _job(GEMM.replace("STAGES = 4", "STAGES = 99", 1)), _job(TYPO),
            _job(GEMM + "\n# the same kernel, another hash\n", sim={"schedules": 3, "seed": 11})]
    pool = LocalPoolExecutor(workers=WORKERS, timeout_s=300.0)
    try:
        local = pool.run(jobs)
    finally:
        pool.close()
    remote = ray_executor.run(jobs)
    assert [r["status"] for r in local] == ["pass", "fail", "fail", "pass"]
    assert [_comparable(r) for r in remote] == [_comparable(r) for r in local]


# --- a worker killed mid-evaluation ----------------------------------------------------------
def _pids_in(trace: Path) -> list[int]:
    return [int(x) for x in trace.read_text().split()] if trace.exists() else []


def _wait_for_attempt(trace: Path, n: int, result: list[Any], timeout: float = 120.0) -> int:
    """The pid of the n-th attempt once it has started."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        pids = _pids_in(trace)
        if len(pids) >= n:
            return pids[n - 1]
        assert not result, f"the run ended before attempt {n}: {result}"
        time.sleep(0.05)
    raise AssertionError(f"attempt {n} never started")


def _run_in_background(ex: RayExecutor, jobs: list[dict[str, Any]]
                       ) -> tuple[threading.Thread, list[Any]]:
    result: list[Any] = []
    thread = threading.Thread(target=lambda: result.append(ex.run(jobs)), daemon=True)
    thread.start()
    return thread, result


@pytest.fixture
def held(ray_executor: RayExecutor) -> RayExecutor:
    """The module's Ray instance with the holding job function."""
    return RayExecutor(timeout_s=300.0, evaluate=_held)


def test_a_worker_killed_once_is_retried(held: RayExecutor, tmp_path: Path) -> None:
    trace = tmp_path / "attempts"
    job = _job(trace=str(trace), hold=2.0)
    thread, result = _run_in_background(held, [job])
    first = _wait_for_attempt(trace, 1, result)
    os.kill(first, signal.SIGKILL)
    second = _wait_for_attempt(trace, 2, result)
    thread.join(timeout=180)
    assert not thread.is_alive(), "the run hangs after a worker died"
    assert second != first
    (res,) = result[0]
    assert _comparable(res) == _comparable(evaluate_job(_job()))
    assert _pids_in(trace) == [first, second]


def test_a_worker_killed_twice_is_reported(held: RayExecutor, tmp_path: Path) -> None:
    trace, other_trace = tmp_path / "attempts", tmp_path / "other"
    doomed = _job(trace=str(trace), hold=3.0)
    fine = _job(GEMM + "\n# a bystander\n", trace=str(other_trace), hold=0.0)
    thread, result = _run_in_background(held, [doomed, fine])
    for n in range(1, RAY_ATTEMPTS + 1):
        os.kill(_wait_for_attempt(trace, n, result), signal.SIGKILL)
    thread.join(timeout=180)
    assert not thread.is_alive(), "the run hangs after its worker died twice"
    dead, alive = result[0]
    assert dead["hash"] == doomed["hash"] and dead["status"] == "fail"
    (finding,) = dead["gates"][dead["failed_gate"]]["findings"]
    assert finding["code"] == "E-WORKER"
    assert "died 2 times" in finding["message"]
    assert len(_pids_in(trace)) == RAY_ATTEMPTS  # retried once, not more
    assert alive["status"] == "pass"  # the other evaluation is not affected
    # and the instance still evaluates afterwards
    (again,) = held.run([_job(GEMM + "\n# after\n", trace=str(tmp_path / "after"), hold=0)])
    assert again["status"] == "pass"


# --- the command line -----------------------------------------------------------------------
def _evolve(run_dir: Path, executor: str) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    proc = subprocess.run(
        [sys.executable, "-m", "cake_cli", "evolve", "gemm_bf16", "--executor", executor,
         "--workers", str(WORKERS), "--budget-evals", "4", "--gates", "static,sim,cost",
         "--no-emulate", "--seed-rng", "5", "--run-dir", str(run_dir), "--quiet"],
        capture_output=True, text=True, timeout=600, env=env, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    from cake_agents.store import RunsStore

    store = RunsStore(run_dir / "runs.sqlite")
    try:
        (run,) = store.list_runs()
        run_id = run["run_id"]
        row = store.run(run_id)
        assert row is not None
        summary = dict(row["summary"])
        summary.pop("run_id"), summary.pop("seconds")
        evaluations = sorted((e["hash"], e["gate"], e["status"])
                             for e in store.evaluations(run_id))
        progress = [(p["hash"], p["status"]) for p in store.progress(run_id)]
    finally:
        store.close()
    return {"summary": summary, "evaluations": evaluations, "progress": progress}


def test_cake_evolve_on_ray_equals_local(tmp_path: Path) -> None:
    """The command starts a Ray instance of its own, as a user's would."""
    on_ray = _evolve(tmp_path / "ray", "ray")
    local = _evolve(tmp_path / "local", "local")
    assert on_ray["summary"]["evals"] >= 2 and on_ray["summary"]["best_hash"]
    assert on_ray == local


def test_ray_unavailable_is_a_usage_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # as if it were not installed
    with pytest.raises(RayUnavailable, match="pip install"):
        RayExecutor()
