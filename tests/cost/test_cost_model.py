"""Sanity properties of the time model: monotone in work, stages, bottleneck names, K scaling."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from cost_support import example, examples_present, variant
from hypothesis import given, settings
from hypothesis import strategies as st

from cake_core.cost.calibration import UNCALIBRATED, Calibration, default_coefficients
from cake_core.cost.model import CATEGORIES, CostError, estimate, predict, profile
from cake_core.hardware import GpuSpec, get_gpu

H200 = get_gpu("h200")
SIZES = st.sampled_from([16, 64, 128, 256, 1000, 2048, 4096, 8192])


def _t(kernel_file: str, dims: dict[str, int], gpu: GpuSpec | None = H200) -> float:
    return predict(example(kernel_file), dims, gpu).seconds


@settings(max_examples=60, deadline=None)
@given(m=SIZES, n=SIZES, k=SIZES, axis=st.sampled_from("MNK"), factor=st.sampled_from([2, 3]))
def test_more_work_never_predicts_less_time(m: int, n: int, k: int, axis: str,
                                            factor: int) -> None:
    small = {"M": m, "N": n, "K": k}
    large = {**small, axis: small[axis] * factor}
    for name, gpu in (("gemm_sm90.cake", H200), ("gemm_sm80.cake", None)):
        assert _t(name, large, gpu) >= _t(name, small, gpu)


@settings(max_examples=30, deadline=None)
@given(n=SIZES, k=SIZES, factor=st.sampled_from([2, 4]))
def test_more_bytes_never_predict_less_time_when_memory_bound(n: int, k: int,
                                                              factor: int) -> None:
    small = {"M": 16, "N": n, "K": k}
    assert _t("tinygemm_sm90.cake", {**small, "K": k * factor}) >= \
        _t("tinygemm_sm90.cake", small)
    assert _t("tinygemm_sm90.cake", {**small, "N": n * factor}) >= \
        _t("tinygemm_sm90.cake", small)


def test_lower_bandwidth_never_predicts_less_time() -> None:
    p = profile(example("tinygemm_sm90.cake"), {"M": 16, "N": 8192, "K": 8192}, H200)
    base = default_coefficients(H200)
    times = [estimate(p, replace(base, hbm_efficiency=e)).seconds for e in (0.9, 0.7, 0.5, 0.3)]
    assert times == sorted(times)
    assert times[-1] > times[0]


@pytest.mark.parametrize(("bm", "bn"), [(128, 128), (128, 256), (256, 128), (64, 256)])
def test_more_stages_never_hurt_while_occupancy_holds(bm: int, bn: int) -> None:
    dims = {"M": 4096, "N": 4096, "K": 4096}
    prev = None
    for stages in range(2, 9):
        try:
            k = variant(bm, bn, 64, stages)
        except AssertionError:  # the smem limit: no more stages
            break
        p = predict(k, dims, H200)
        if prev is not None and p.blocks_per_sm == prev.blocks_per_sm:
            assert p.seconds <= prev.seconds * (1 + 1e-12), (bm, bn, stages)
        prev = p


def test_too_few_stages_expose_memory_latency() -> None:
    dims = {"M": 4096, "N": 4096, "K": 4096}
    two = predict(variant(128, 128, 64, 2), dims, H200)
    four = predict(variant(128, 128, 64, 4), dims, H200)
    assert two.bottleneck == "latency"
    assert four.seconds < two.seconds


def test_large_square_gemm_is_compute_bound() -> None:
    p = predict(example("gemm_sm90.cake"), {"M": 8192, "N": 8192, "K": 8192}, H200)
    assert p.bottleneck == "compute"
    assert "wgmma" in p.bottleneck_detail
    assert 0.4 < p.roofline_fraction <= 1.0
    p80 = predict(example("gemm_sm80.cake"), {"M": 8192, "N": 8192, "K": 8192})
    assert p80.bottleneck == "compute"
    assert p80.gpu == "A100-SXM4-80GB"


@pytest.mark.parametrize(("name", "dims"), [
    ("tinygemm_sm90.cake", {"M": 16, "N": 8192, "K": 8192}),
    ("tinygemm_sm90.cake", {"M": 64, "N": 16384, "K": 4096}),
])
def test_small_m_gemm_is_memory_bound(name: str, dims: dict[str, int]) -> None:
    p = predict(example(name), dims, H200)
    assert p.bottleneck == "memory"
    assert p.bottleneck_detail in ("DRAM bandwidth", "L2 bandwidth")


def test_small_m_gemm_variant_is_memory_bound() -> None:
    p = predict(variant(64, 64, 64, 4), {"M": 64, "N": 8192, "K": 8192}, H200)
    assert p.bottleneck == "memory"


def test_time_is_linear_in_k_for_large_k() -> None:
    dims = {"M": 4096, "N": 4096}
    t1 = _t("gemm_sm90.cake", {**dims, "K": 32768})
    t2 = _t("gemm_sm90.cake", {**dims, "K": 65536})
    assert 1.9 < t2 / t1 < 2.05
    m1 = _t("tinygemm_sm90.cake", {"M": 16, "N": 8192, "K": 65536})
    m2 = _t("tinygemm_sm90.cake", {"M": 16, "N": 8192, "K": 131072})
    assert 1.9 < m2 / m1 < 2.05


def test_tiny_launch_is_launch_bound() -> None:
    p = predict(example("tinygemm_sm90.cake"), {"M": 16, "N": 256, "K": 256}, H200)
    assert p.bottleneck == "launch"


def test_prediction_is_deterministic() -> None:
    k = example("kmeans_assign_sm90.cake")
    dims = {"B": 8, "N": 65536, "K": 1024}
    a = json.dumps(predict(k, dims, H200).to_json(), sort_keys=True)
    b = json.dumps(predict(k, dims, H200).to_json(), sort_keys=True)
    assert a == b


@pytest.mark.parametrize("path", examples_present(), ids=lambda p: p.name)
def test_time_adds_up_over_categories_and_lines(path: Path) -> None:
    k = example(path.name)
    dims = {d: 2048 for d in k.dims} | ({"M": 64} if "M" in k.dims else {}) | (
        {"B": 4} if "B" in k.dims else {})
    gpu = H200 if k.arch == "sm_90a" else None
    p = predict(k, dims, gpu)
    assert p.seconds > 0
    assert set(p.categories) == set(CATEGORIES)
    assert sum(p.categories.values()) == pytest.approx(p.seconds, rel=1e-9)
    assert sum(ln.share for ln in p.lines) == pytest.approx(1.0, rel=1e-9)
    assert sum(ln.seconds for ln in p.lines) == pytest.approx(p.seconds, rel=1e-9)
    assert p.bottleneck in CATEGORIES
    assert p.calibration == UNCALIBRATED
    assert all(1 <= ln.line <= path.read_text().count("\n") + 1 for ln in p.lines)


def test_the_hot_line_is_the_mma() -> None:
    k = example("gemm_sm90.cake")
    p = predict(k, {"M": 8192, "N": 8192, "K": 8192}, H200)
    top = max(p.lines, key=lambda ln: ln.share)
    assert top.ops == ["wgmma"]
    assert top.share > 0.5


def test_a_calibration_names_itself_and_changes_the_estimate() -> None:
    k = example("gemm_sm90.cake")
    dims = {"M": 4096, "N": 4096, "K": 4096}
    base = predict(k, dims, H200)
    cal = Calibration("h200-lab", "sm_90a", {"tensor_efficiency.wgmma": 0.5})
    slow = predict(k, dims, H200, calibration=cal)
    assert slow.calibration == "h200-lab"
    assert slow.seconds > base.seconds


def test_missing_dims_and_wrong_gpu_are_cost_errors() -> None:
    k = example("gemm_sm90.cake")
    with pytest.raises(CostError, match="N"):
        predict(k, {"M": 1, "K": 1}, H200)
    with pytest.raises(CostError, match="sm_90a"):
        predict(k, {"M": 1, "N": 1, "K": 1}, get_gpu("a100"))


def test_older_code_runs_on_a_newer_gpu_with_the_legacy_mma_path() -> None:
    k = example("gemm_sm80.cake")
    dims = {"M": 8192, "N": 8192, "K": 8192}
    on_h100 = predict(k, dims, get_gpu("h100"))
    assert on_h100.target == "sm_80" and on_h100.arch == "sm_90a"
    assert on_h100.seconds < predict(k, dims).seconds  # H100 is faster than A100 even so


def test_declared_dim_limits_are_warned_about() -> None:
    p = predict(example("tinygemm_sm90.cake"), {"M": 128, "N": 4096, "K": 4096}, H200)
    assert any("max=64" in w for w in p.warnings)
