"""Calibration: the fit recovers known coefficients, and calibrations round-trip as data."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cost_support import ROOT, example, variant

from cake_core.cost.calibration import (
    Calibration,
    CalibrationProvenance,
    default_coefficients,
    from_plugin_item,
    load_calibrations,
    pick_calibration,
    save_calibrations,
    to_plugin_item,
)
from cake_core.cost.coefficients import Coefficients
from cake_core.cost.fit import Run, RunError, calibrate, fit_runs, load_runs, parse_dims
from cake_core.cost.model import estimate, profile
from cake_core.hardware import get_gpu

H200 = get_gpu("h200")

#: Kernels chosen so that every fitted coefficient is somebody's bottleneck.
CASES = [
    ("gemm_sm90.cake", {"M": 8192, "N": 8192, "K": 8192}),       # tensor cores
    ("gemm_sm90.cake", {"M": 4096, "N": 4096, "K": 4096}),
    ("tinygemm_sm90.cake", {"M": 16, "N": 8192, "K": 8192}),     # DRAM
    ("tinygemm_sm90.cake", {"M": 64, "N": 16384, "K": 4096}),
    ("tinygemm_sm90.cake", {"M": 16, "N": 256, "K": 256}),       # launch
    ("tinygemm_sm90.cake", {"M": 64, "N": 256, "K": 65536}),     # synchronization
    ((128, 128, 64, 2), {"M": 4096, "N": 4096, "K": 4096}),      # memory latency
    ((64, 64, 64, 2), {"M": 1024, "N": 1024, "K": 16384}),
    ((64, 64, 32, 4), {"M": 64, "N": 64, "K": 65536}),
]
TRUTH = {"hbm_efficiency": 0.75, "tensor_efficiency.wgmma": 0.70, "sync_scale": 2.0,
         "launch_us": 5.0, "dram_latency_ns": 800.0}


def _runs(truth: dict[str, float]) -> list[Run]:
    runs = []
    for what, dims in CASES:
        k = example(what) if isinstance(what, str) else variant(*what)
        p = profile(k, dims, H200)
        seconds = estimate(p, default_coefficients(H200).overridden(truth)).seconds
        runs.append(Run(k.name, k.name, dims, H200, seconds, p))
    return runs


def test_fit_recovers_known_coefficients_within_ten_percent() -> None:
    res = fit_runs(_runs(TRUTH), list(TRUTH))
    assert not res.unconstrained
    for name, true in TRUTH.items():
        assert res.fitted[name] == pytest.approx(true, rel=0.10), name
    # the whole set comes back typed: the fitted values in place, the rest at their prior
    assert isinstance(res.coefficients, Coefficients)
    assert res.coefficients.hbm_efficiency == res.fitted["hbm_efficiency"]
    assert res.coefficients.tensor_efficiency.wgmma == res.fitted["tensor_efficiency.wgmma"]
    assert res.coefficients.l2_latency_ns == default_coefficients(H200).l2_latency_ns
    err = res.errors()
    assert err["rms_log_error"] < 0.01 < err["rms_log_error_before"]


def test_unconstrained_coefficients_stay_at_their_prior() -> None:
    res = fit_runs(_runs(TRUTH), [*TRUTH, "tensor_efficiency.mma_sync"])
    assert res.unconstrained == ["tensor_efficiency.mma_sync"]
    assert "tensor_efficiency.mma_sync" not in res.fitted
    assert res.coefficients.tensor_efficiency.mma_sync == \
        default_coefficients(H200).tensor_efficiency.mma_sync


def test_calibrate_records_provenance() -> None:
    ((cal, res),) = calibrate(_runs(TRUTH), name="lab", params=list(TRUTH), source="runs.json")
    assert cal.name == "lab" and cal.arch == "sm_90a" and cal.gpu == "H200-SXM"
    assert cal.provenance.origin == "cake calibrate runs.json"
    assert len(cal.provenance.runs) == len(CASES)
    assert {"kernel", "dims", "gpu", "measured_ms", "predicted_ms"} <= set(
        cal.provenance.runs[0])
    assert cal.provenance.fit_error["rms_log_error"] == res.errors()["rms_log_error"]
    assert cal.provenance.date


def test_calibration_json_round_trip(tmp_path: Path) -> None:
    cal = Calibration("lab", "sm_90a", {"hbm_efficiency": 0.8},
                      CalibrationProvenance("cake calibrate", "2026-01-01",
                                            ({"kernel": "a.cake", "measured_ms": 1.0},),
                                            {"rms_log_error": 0.1}), "H200-SXM")
    other = Calibration("old", "sm_80", {"tensor_efficiency.mma_sync": 0.8})
    path = tmp_path / "cal.json"
    save_calibrations(path, [cal])
    (back,) = load_calibrations(path)
    assert back == cal
    save_calibrations(path, [cal, other])
    both = load_calibrations(path)
    assert pick_calibration(both, "sm_80") == other
    assert pick_calibration(both, "90a") == cal
    assert pick_calibration(both, "sm_100a") is None
    merged = cal.apply(default_coefficients(H200))
    assert merged.hbm_efficiency == 0.8
    assert merged.launch_us == default_coefficients(H200).launch_us


def test_calibration_converts_to_and_from_a_plugin_item() -> None:
    cal = Calibration("lab", "sm_90a", {"hbm_efficiency": 0.8},
                      CalibrationProvenance("cake calibrate", "2026-01-01",
                                            ({"kernel": "a.cake", "dims": {"M": 1},
                                              "gpu": "H200-SXM", "measured_ms": 1.0},)))
    item = to_plugin_item(cal)
    assert (item.name, item.arch, item.coefficients) == ("lab", "sm_90a", {"hbm_efficiency": 0.8})
    assert item.provenance.origin == "cake calibrate" and len(item.provenance.examples) == 1
    back = from_plugin_item(item)
    assert (back.name, back.arch, back.coefficients) == (cal.name, cal.arch, cal.coefficients)


@pytest.mark.parametrize("bad", [
    {"arch": "sm_90a"},
    {"arch": "sm_99", "coefficients": {}},
    {"arch": "sm_90a", "coefficients": {"warp_speed": 9}},
    {"arch": "sm_90a", "coefficients": {"hbm_efficiency": "fast"}},
])
def test_bad_calibrations_are_refused(bad: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        Calibration.from_json(bad)


def test_load_runs_resolves_kernels_next_to_the_results(tmp_path: Path) -> None:
    (tmp_path / "g.cake").write_text((ROOT / "examples" / "gemm_sm90.cake").read_text())
    runs = [{"kernel": "g.cake", "dims": "M=256,N=256,K=256", "gpu": "H200",
             "measured_ms": 0.01},
            {"kernel": "g.cake", "dims": {"M": 512, "N": 512, "K": 512}, "arch": "sm_90a",
             "measured_ms": 0.02}]
    path = tmp_path / "runs.json"
    path.write_text(json.dumps(runs))
    loaded = load_runs(path)
    assert [r.gpu.name for r in loaded] == ["H200-SXM", "H100-SXM5"]
    assert loaded[0].dims == {"M": 256, "N": 256, "K": 256}
    assert loaded[1].measured_s == pytest.approx(2e-5)


@pytest.mark.parametrize(("entry", "message"), [
    ({"dims": "M=1", "measured_ms": 1}, "kernel"),
    ({"kernel": "g.cake", "dims": "M=1,N=1,K=1", "measured_ms": -1}, "positive"),
    ({"kernel": "g.cake", "dims": "M=1", "measured_ms": 1}, "N"),
    ({"kernel": "g.cake", "dims": "M=1,N=1,K=1", "gpu": "Z80", "measured_ms": 1}, "Z80"),
    ({"kernel": "nope.cake", "dims": "M=1,N=1,K=1", "measured_ms": 1}, "nope.cake"),
])
def test_bad_runs_say_what_is_wrong(tmp_path: Path, entry: dict[str, object],
                                    message: str) -> None:
    (tmp_path / "g.cake").write_text((ROOT / "examples" / "gemm_sm90.cake").read_text())
    path = tmp_path / "runs.json"
    path.write_text(json.dumps([entry]))
    with pytest.raises(RunError, match=message):
        load_runs(path)


def test_parse_dims() -> None:
    assert parse_dims("M=1,N=2 K=3") == {"M": 1, "N": 2, "K": 3}
    assert parse_dims({"M": "4"}) == {"M": 4}
    for bad in ("M", "M=x", "M=-1"):
        with pytest.raises(ValueError):
            parse_dims(bad)
