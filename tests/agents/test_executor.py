"""Executors: the local process pool (deadlines, dead workers); Ray is in test_ray.py."""

from __future__ import annotations

from typing import Any

from agent_support import FAST_GATES, GEMM, ROOT

from cake_agents.context import content_hash
from cake_agents.executor import (
    CachingExecutor,
    InlineExecutor,
    LocalPoolExecutor,
    PrefetchingExecutor,
)

SHAPE = {"key": "M=4096,N=4096,K=4096", "dims": {"M": 4096, "N": 4096, "K": 4096}}


def _job(text: str = GEMM, **kw: Any) -> dict[str, Any]:
    job = {"hash": content_hash(text), "text": text, "path": "k.cake",
           "task_path": str(ROOT / "examples" / "tasks" / "gemm_bf16.py"),
           "kernel": "gemm_sm90", "entry": 0, "shapes": [SHAPE],
           "require_shapes": [SHAPE["key"]], "sim": {"schedules": 1, "seed": 0},
           "gates": list(FAST_GATES)}
    job.update(kw)
    return job


def test_pool_evaluates_and_reports_gates_then_recovers_from_a_deadline() -> None:
    pool = LocalPoolExecutor(workers=1, timeout_s=60.0)
    seen: list[tuple[str, str]] = []
    try:
        (ok,) = pool.run([_job()], lambda h, g: seen.append((h, g)))
        assert ok["status"] == "pass" and ok["times"][SHAPE["key"]] > 0
        assert [g for _, g in seen] == list(FAST_GATES)
        pool.timeout_s = 0.001
        (late,) = pool.run([_job(GEMM + "\n# another kernel\n")])
        assert late["status"] == "fail"
        (finding,) = late["gates"][late["failed_gate"]]["findings"]
        assert finding["code"] == "E-TIMEOUT"
        pool.timeout_s = 60.0
        (again,) = pool.run([_job()])
        assert again["status"] == "pass"
    finally:
        pool.close()


def test_caching_executor_runs_each_kernel_once() -> None:
    calls: list[str] = []

    class Recording(InlineExecutor):
        def run(self, jobs: Any, on_gate: Any = None) -> list[dict[str, Any]]:
            calls.extend(j["hash"] for j in jobs)
            return super().run(jobs, on_gate)

    ex = CachingExecutor(Recording())
    bad = GEMM.replace("STAGES = 4", "STAGES = 99", 1)
    a = ex.run([_job(), _job(bad)])
    b = ex.run([_job(bad), _job()])
    assert [r["status"] for r in a] == ["pass", "fail"] and a[1]["failed_gate"] == "static"
    assert [r["hash"] for r in b] == [content_hash(bad), content_hash(GEMM)]
    assert len(calls) == 2


def test_a_prefetched_job_is_handed_over_once_and_only_as_sent() -> None:
    calls: list[list[str]] = []

    class Recording(InlineExecutor):
        def run(self, jobs: Any, on_gate: Any = None) -> list[dict[str, Any]]:
            calls.append([j["hash"] for j in jobs])
            return super().run(jobs, on_gate)

    ex = PrefetchingExecutor(Recording())
    seed, other = _job(), _job(GEMM.replace("STAGES = 4", "STAGES = 3", 1))
    ex.prefetch(seed)
    seen: list[tuple[str, str]] = []
    got = ex.run([other, seed], lambda h, g: seen.append((h, g)))
    assert [r["hash"] for r in got] == [other["hash"], seed["hash"]]
    assert all(r["status"] == "pass" for r in got)
    # the seed ran once, ahead; the other job alone went to the inner executor after it
    assert calls == [[seed["hash"]], [other["hash"]]]
    assert [g for h, g in seen if h == seed["hash"]] == list(FAST_GATES)
    # a job that differs in anything but the hash (here its gates) is not the one sent
    ex.prefetch(seed)
    (again,) = ex.run([{**seed, "gates": ["static"]}])
    assert calls[-1] == [seed["hash"]] and len(calls) == 4 and list(again["gates"]) == ["static"]
    ex.close()


def test_closing_the_pool_under_a_prefetch_leaves_no_worker() -> None:
    pool = LocalPoolExecutor(workers=1, timeout_s=60.0)
    ex = PrefetchingExecutor(pool)
    ex.prefetch(_job())
    ex.close()
    assert pool._pool == [] and not (ex._thread and ex._thread.is_alive())
