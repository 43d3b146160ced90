"""The candidate's subprocess: hangs and crashes end the candidate's shape, not the caller;
results come back as JSON that `cake calibrate` reads."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from run_support import GEMM, ROOT

from cake_cli.gpu_run import write_runs
from cake_core.cost.fit import load_runs
from cake_core.run.protocol import TimingConfig
from cake_core.run.results import BenchReport, ShapeResult, Workload
from cake_core.run.runner import BenchOptions, BenchSetupError, bench
from cake_core.tasks import Shape, Task

TWO = [Shape({"M": 64, "N": 48, "K": 32}, label="first"), Shape({"M": 32, "N": 16, "K": 16})]
FAST = TimingConfig(warmup=1, rounds=2, calls=3)


def fake(behaviour: str, **kw: object) -> BenchOptions:
    opts = {"shapes": TWO, "backend": "fake", "fake_behaviour": behaviour, "timing": FAST,
            "timeout": 2.0, "seeds": (0,)}
    opts.update(kw)
    return BenchOptions(**opts)  # type: ignore[arg-type]


def test_a_correct_candidate_in_a_subprocess(gemm_task: Task) -> None:
    out = bench(GEMM, None, gemm_task, fake("correct"))
    rep = out.report
    assert [s.status for s in rep.shapes] == ["ok", "ok"] and out.passed
    assert rep.shapes[0].label == "first" and rep.backend == "fake"
    assert rep.shapes[0].workload is not None and rep.shapes[0].floor_ms > 0
    assert out.diagnostics == []
    doc = rep.to_json()
    assert doc["schema"] == "cake.bench/1" and doc["runs"] == [], "fake times are not data"


def test_a_hang_is_killed_by_the_timeout_and_reported(gemm_task: Task) -> None:
    shapes = [*TWO, Shape({"M": 16, "N": 8, "K": 8})]
    out = bench(GEMM, None, gemm_task, fake("hang", shapes=shapes, timeout=1.0))
    statuses = [s.status for s in out.report.shapes]
    # each hang costs a fresh worker; after two the shape left is skipped
    assert statuses == ["timeout", "timeout", "skipped"]
    assert "killed" in out.report.shapes[0].error
    assert [d.code for d in out.diagnostics] == ["CK706", "CK706"]
    assert not out.passed


def test_a_crashing_candidate_is_reported_and_the_next_shape_runs(gemm_task: Task) -> None:
    out = bench(GEMM, None, gemm_task, fake("abort"))
    assert [s.status for s in out.report.shapes] == ["crash", "crash"]
    assert "SIGABRT" in out.report.shapes[0].error
    assert {d.code for d in out.diagnostics} == {"CK705"}


def test_a_gpu_fault_restarts_the_worker_for_the_next_shape(gemm_task: Task) -> None:
    out = bench(GEMM, None, gemm_task, fake("fault"))
    shapes = out.report.shapes
    assert [s.status for s in shapes] == ["error", "error"]
    assert all(s.device_lost for s in shapes)
    assert all("illegal memory access" in (s.error or "") for s in shapes)


def test_findings_become_diagnostics_at_the_kernel(gemm_task: Task) -> None:
    out = bench(GEMM, None, gemm_task, fake("mutates_input"))
    codes = {d.code for d in out.diagnostics}
    assert {"CK703"} <= codes
    d = next(d for d in out.diagnostics if d.code == "CK703")
    assert d.path.endswith("gemm_sm90.cake")
    assert out.source.text[d.span.start.offset:d.span.end.offset] == "gemm_sm90"


def test_suspicious_times_are_warnings(gemm_task: Task) -> None:
    out = bench(GEMM, None, gemm_task, fake("too_fast"))
    assert out.passed, "a suspicious time is a warning, the output is still right"
    assert {d.code for d in out.diagnostics} == {"CK707"}
    assert all(d.severity.value == "warning" for d in out.diagnostics)


def test_the_simulator_backend_end_to_end(gemm_task: Task) -> None:
    out = bench(GEMM, None, gemm_task, fake("correct", backend="fake-sim",
                                            shapes=[Shape({"M": 72, "N": 40, "K": 24})]))
    assert out.passed and out.report.shapes[0].max_abs < 0.05


def test_a_kernel_with_errors_is_a_setup_error(tmp_path: Path, gemm_task: Task) -> None:
    bad = tmp_path / "bad.cake"
    bad.write_text("@kernel(arch='sm_90a', grid=(1,), warps=4)\ndef k(A: Tensor[bf16, (M,)]):\n"
                   "    nope(A)\n", encoding="utf-8")
    with pytest.raises(BenchSetupError) as exc:
        bench(bad, None, gemm_task, fake("correct"))
    assert exc.value.exit == 2 and exc.value.diagnostics


# --- results for `cake calibrate` ------------------------------------------------------------
def _measured(dims: dict[str, int], ms: float, flags: list[str] | None = None) -> ShapeResult:
    wl = Workload(2 * dims["M"] * dims["N"] * dims["K"], 1e6, 989.4e12, 4.8e12, "H200-SXM")
    s = ShapeResult(dims, status="ok", correct=True, candidate_ms=ms, baseline_ms=ms * 0.9,
                    cv=0.01, workload=wl, flags=list(flags or []))
    s.assess()
    return s


def test_results_are_readable_by_cake_calibrate(tmp_path: Path) -> None:
    shapes = [_measured({"M": 4096, "N": 4096, "K": 4096}, 0.21),
              _measured({"M": 2048, "N": 2048, "K": 2048}, 0.035),
              _measured({"M": 8192, "N": 8192, "K": 8192}, 1e-4),  # below the floor
              ShapeResult({"M": 4000, "N": 4104, "K": 4096}, status="wrong", correct=False)]
    report = BenchReport("gemm_bf16", "gemm_sm90", str(GEMM), "torch", "NVIDIA H200",
                         "H200-SXM", shapes)
    out = tmp_path / "sub" / "results.json"
    write_runs(report, str(out))
    data = json.loads(out.read_text(encoding="utf-8"))
    assert [r["dims"]["M"] for r in data] == [4096, 2048], "only trusted times"
    rec = data[0]
    for key in ("kernel", "name", "dims", "gpu", "measured_ms", "correct", "max_abs_err",
                "max_rel_err", "candidate_ms", "baseline_ms", "pct_of_baseline", "tflops",
                "flags"):
        assert key in rec, key
    assert rec["pct_of_baseline"] == pytest.approx(90.0)
    assert rec["tflops"] == pytest.approx(2 * 4096**3 / 0.21e-3 / 1e12)
    runs = load_runs(out)  # what `cake calibrate` does with the file
    assert [r.kernel_name for r in runs] == ["gemm_sm90", "gemm_sm90"]
    assert runs[0].measured_s == pytest.approx(0.21e-3)
    assert runs[0].gpu.name == "H200-SXM"
    assert (out.parent / rec["kernel"]).resolve() == GEMM.resolve()


def test_cake_calibrate_reads_the_file(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from cake_cli.main import main

    shapes = [_measured({"M": m, "N": m, "K": m}, ms) for m, ms in
              ((2048, 0.035), (4096, 0.21), (8192, 1.5))]
    report = BenchReport("gemm_bf16", "gemm_sm90", str(ROOT / "examples" / "gemm_sm90.cake"),
                         "torch", "NVIDIA H200", "H200-SXM", shapes)
    out = tmp_path / "results.json"
    write_runs(report, str(out))
    r = CliRunner().invoke(main, ["calibrate", str(out), "--format", "json"])
    assert r.exit_code in (0, 1), r.output  # 2 would mean the file was not understood
    if r.exit_code == 0:
        assert json.loads(r.output)["arch"] == "sm_90a"
