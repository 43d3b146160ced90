"""The evaluation gates one by one, on plain jobs (what the executor workers receive)."""

from __future__ import annotations

import shutil
from typing import Any

import pytest
from agent_support import GEMM, ROOT

from cake_agents.context import content_hash
from cake_agents.gates import NOT_AVAILABLE, evaluate_job

SMALL = {"M": 256, "N": 256, "K": 128}
HEADLINE = {"key": "M=4096,N=4096,K=4096", "dims": {"M": 4096, "N": 4096, "K": 4096}}


def _job(text: str = GEMM, gates: tuple[str, ...] = ("static", "sim", "cost"),
         **kw: Any) -> dict[str, Any]:
    job = {"hash": content_hash(text), "text": text, "path": "k.cake",
           "task_path": str(ROOT / "examples" / "tasks" / "gemm_bf16.py"),
           "kernel": "gemm_sm90", "entry": 0, "arch": "sm_90a", "shapes": [HEADLINE],
           "require_shapes": [HEADLINE["key"]], "sim": {"schedules": 1, "seed": 0},
           "gates": list(gates)}
    job.update(kw)
    return job


def test_static_gate_refuses_another_arch_and_uncovered_shapes() -> None:
    other = evaluate_job(_job(gates=("static",), arch="sm_100a"))
    assert other["failed_gate"] == "static"
    assert other["gates"]["static"]["findings"][0]["code"] == "E-ARCH"
    narrow = GEMM.replace('K = dim("K", multiple_of=8)', 'K = dim("K", multiple_of=8, max=1024)')
    assert narrow != GEMM
    res = evaluate_job(_job(narrow, gates=("static",)))
    assert res["failed_gate"] == "static"
    assert res["gates"]["static"]["findings"][0]["code"] == "E-SHAPES"


def test_missing_components_are_skipped_not_failed(monkeypatch: pytest.MonkeyPatch) -> None:
    import cake_core.run.device as device

    monkeypatch.setattr(device, "probe_gpu", lambda: device.GpuProbe(False, "no GPU here"))
    res = evaluate_job(_job(gates=("static", "cost", "gpu")))
    assert res["status"] == "pass"
    assert res["gates"]["gpu"]["status"] == NOT_AVAILABLE


def test_gpu_gate_runs_the_runner_for_a_better_kernel_only() -> None:
    gpu = {"backend": "fake", "shapes": [SMALL], "timing": {"warmup": 0, "rounds": 1,
                                                             "calls": 1}}
    score = {"baseline": {HEADLINE["key"]: 1.0}, "floors": {},
             "shapes": [[HEADLINE["key"], 1.0]]}
    ran = evaluate_job(_job(gates=("static", "cost", "gpu"), gpu=gpu, score=score))
    assert ran["gates"]["gpu"]["status"] == "pass"
    assert ran["measured"] == {"M=256,N=256,K=128": pytest.approx(1e-3)}
    skipped = evaluate_job(_job(gates=("static", "cost", "gpu"), score=score,
                                gpu={**gpu, "better_than": 1e9}))
    assert skipped["gates"]["gpu"]["status"].startswith("skipped: not better")


@pytest.mark.nvcc
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc/ptxas")
def test_ptxas_gate_reports_resources() -> None:
    res = evaluate_job(_job(gates=("static", "ptxas")))
    gate = res["gates"]["ptxas"]
    assert gate["status"] == "pass", gate
    assert res["ptxas"]["registers"] > 0 and res["ptxas"]["spill_stores"] == 0


@pytest.mark.nvcc
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc/ptxas")
def test_a_kernel_that_spills_fails_the_ptxas_gate() -> None:
    """Two (256, 128) f32 accumulators per two warpgroups do not fit in regs=232."""
    dbuf = (ROOT / "examples" / "kmeans_assign_sm90_dbuf.cake").read_text(encoding="utf-8")
    wide = dbuf.replace("BM, BN = 128, 128", "BM, BN = 256, 128")
    assert wide != dbuf
    job = _job(wide, gates=("static", "ptxas"), kernel="kmeans_assign_sm90_dbuf",
               task_path=str(ROOT / "examples" / "tasks" / "kmeans_assign.py"),
               shapes=[{"key": "B=32,N=65536,K=1024",
                        "dims": {"B": 32, "N": 65536, "K": 1024}}],
               require_shapes=["B=32,N=65536,K=1024"])
    res = evaluate_job(job)
    assert res["failed_gate"] == "ptxas", res["gates"]
    assert res["ptxas"]["spill_stores"] > 0
    assert any(f["code"] == "CK603" for f in res["gates"]["ptxas"]["findings"])
