"""Executors: the local process pool (deadlines, dead workers); Ray is in test_ray.py."""

from __future__ import annotations

from typing import Any

from agent_support import FAST_GATES, GEMM, ROOT

from cake_agents.context import content_hash
from cake_agents.executor import CachingExecutor, InlineExecutor, LocalPoolExecutor

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
