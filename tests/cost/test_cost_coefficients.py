"""Coefficients: a typed record whose name set is checked at every boundary."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from cost_support import example

from cake_core.cost.calibration import (
    Calibration,
    default_coefficients,
    from_plugin_item,
    load_calibrations,
    save_calibrations,
)
from cake_core.cost.coefficients import COEFFICIENT_DOCS, CoefficientError, Coefficients
from cake_core.cost.model import estimate, predict, profile
from cake_core.hardware import GPUS, get_gpu
from cake_core.plugins import CalibrationItem
from cake_core.primitives.registry import Provenance

H200 = get_gpu("h200")
CUBE = {"M": 4096, "N": 4096, "K": 4096}


def test_every_coefficient_is_documented_and_every_gpu_has_them_all() -> None:
    assert all(doc.strip() for doc in COEFFICIENT_DOCS.values())
    for gpu in GPUS.values():
        assert list(default_coefficients(gpu).as_mapping()) == list(COEFFICIENT_DOCS)


def test_unknown_and_missing_names_are_refused_by_name() -> None:
    full = default_coefficients(H200).as_mapping()
    with pytest.raises(CoefficientError, match=r"unknown coefficient.*warp_speed"):
        Coefficients.from_mapping({**full, "warp_speed": 9.0})
    partial = {k: v for k, v in full.items() if k not in ("launch_us", "sync_ns.fence")}
    with pytest.raises(CoefficientError, match=r"missing coefficient.*sync_ns\.fence, launch_us"):
        Coefficients.from_mapping(partial)
    with pytest.raises(CoefficientError, match=r"unknown coefficient.*tensor_efficiency\.hmma"):
        default_coefficients(H200).overridden({"tensor_efficiency.hmma": 0.5})
    with pytest.raises(CoefficientError, match="warp_speed"):
        Calibration("lab", "sm_90a", {"warp_speed": 9.0})


def test_a_family_or_kind_without_a_coefficient_is_an_error_not_a_default() -> None:
    c = default_coefficients(H200)
    assert c.tensor_efficiency.of("wgmma") == c.tensor_efficiency.wgmma
    assert c.sync_ns.of("fence") == c.sync_ns.fence
    with pytest.raises(CoefficientError, match="instruction family 'hmma'"):
        c.tensor_efficiency.of("hmma")
    with pytest.raises(CoefficientError, match="synchronization kind 'cluster_barrier'"):
        c.sync_ns.of("cluster_barrier")


def test_the_mapping_form_round_trips_through_json() -> None:
    c = replace(default_coefficients(H200), launch_us=4.25)
    text = json.dumps(c.as_mapping())
    assert Coefficients.from_mapping(json.loads(text)) == c


def test_a_partial_calibration_overrides_only_what_it_names(tmp_path: Path) -> None:
    defaults = default_coefficients(H200)
    cal = Calibration("lab", "sm_90a", {"hbm_efficiency": 0.5, "sync_ns.fence": 3.0})
    path = tmp_path / "cal.json"
    save_calibrations(path, [cal])
    (back,) = load_calibrations(path)
    assert json.loads(path.read_text())["coefficients"] == {"hbm_efficiency": 0.5,
                                                            "sync_ns.fence": 3.0}
    merged = back.apply(defaults)
    changed = {k for k, v in merged.as_mapping().items() if defaults.as_mapping()[k] != v}
    assert changed == {"hbm_efficiency", "sync_ns.fence"}
    assert merged.sync_ns.fence == 3.0 and merged.hbm_efficiency == 0.5
    # the calibration prices exactly like the merged record it stands for
    p = profile(example("tinygemm_sm90.cake"), {"M": 16, "N": 8192, "K": 8192}, H200)
    assert estimate(p, calibration=back).seconds == estimate(p, merged).seconds
    assert estimate(p, calibration=back).seconds > estimate(p).seconds


def test_a_plugin_calibration_loads_and_applies() -> None:
    item = CalibrationItem("lab-h200", "sm_90a", {"tensor_efficiency.wgmma": 0.4},
                           Provenance("measured", "2026-01-01", ()))
    cal = from_plugin_item(item)
    assert cal.apply(default_coefficients(H200)).tensor_efficiency.wgmma == 0.4
    k = example("gemm_sm90.cake")
    slow = predict(k, CUBE, H200, calibration=cal)
    assert slow.calibration == "lab-h200"
    assert slow.seconds > predict(k, CUBE, H200).seconds
    bad = CalibrationItem("typo", "sm_90a", {"tensor_efficency.wgmma": 0.4})
    with pytest.raises(ValueError, match=r"tensor_efficency\.wgmma"):
        from_plugin_item(bad)
