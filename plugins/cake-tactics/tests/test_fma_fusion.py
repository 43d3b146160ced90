"""fuse-multiply-add: its output verifies, computes the task's reference on the task's
small shapes, writes exactly the unfused kernel's outputs, and is predicted faster; a
constant that is not a power of two (whose product rounds) is left alone."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from cake_tactics.fma_fusion import FMA_FUSION

from cake_core.check import check_text
from cake_core.diagnostics.model import apply_edits
from cake_core.sim import SimKernel, simulate
from cake_core.sim.inputs import random_inputs
from cake_core.sim.tasks_run import run_task
from cake_core.tasks import load_task

ROOT = Path(__file__).resolve().parents[3]
EXAMPLES = ROOT / "examples"


def _fused(name: str, text: str | None = None) -> tuple[str, str, object]:
    path = EXAMPLES / name
    before = path.read_text(encoding="utf-8") if text is None else text
    res = check_text(before, path.name)
    assert res.errors == [] and res.program is not None
    kernel = res.program.kernels[0]
    assert FMA_FUSION.applies(kernel, res.source) is not None
    out = FMA_FUSION.apply(kernel, res.source, {})
    assert out is not None
    return before, apply_edits(before, out.edits), out


@pytest.mark.parametrize("name, sites", [("kmeans_assign_sm90.cake", 1),
                                         ("kmeans_assign_sm90_pingpong.cake", 2),
                                         ("kmeans_assign_sm90_dbuf.cake", 5)])
def test_every_site_is_fused_and_the_kernel_verifies(name: str, sites: int) -> None:
    before, after, out = _fused(name)
    res = check_text(after, name)
    assert res.diagnostics == [], [d.message for d in res.diagnostics]
    assert after.count("fma(") == sites and "- 2.0 *" not in after
    assert before.count("- 2.0 *") == sites
    pred = out.params["predicted"]  # type: ignore[attr-defined]
    assert pred["after_us"] < pred["before_us"]


def test_the_fused_seed_matches_the_task_reference_and_the_unfused_outputs() -> None:
    before, after, _ = _fused("kmeans_assign_sm90.cake")
    assert "dist = fma(dot, -2.0, cn)" in after
    task = load_task("kmeans_assign")
    sk = SimKernel.from_text(after, "fused.cake")
    report = run_task(task, sk, n_schedules=2)
    for s in report.shapes:
        assert s.error is None and s.passed, (s.dims, s.error)
    old = SimKernel.from_text(before, "seed.cake")
    dims = {"B": 2, "N": 200, "K": 384}
    data = random_inputs(old, dims, seed=3)
    r0, r1 = simulate(old, dims, data), simulate(sk, dims, data)
    assert r0.ok and r1.ok
    assert np.array_equal(r0.outputs["out"], r1.outputs["out"])


@pytest.mark.parametrize("expr, fused", [("cn + 0.5 * dot", "fma(dot, 0.5, cn)"),
                                         ("dot * -4.0 + cn", "fma(dot, -4.0, cn)"),
                                         ("cn - dot * 2.0", "fma(dot, -2.0, cn)")])
def test_the_mirrored_forms_are_fused(expr: str, fused: str) -> None:
    seed = (EXAMPLES / "kmeans_assign_sm90.cake").read_text(encoding="utf-8")
    _, after, _ = _fused("kmeans_assign_sm90.cake", seed.replace("cn - 2.0 * dot", expr))
    assert f"dist = {fused}" in after


@pytest.mark.parametrize("expr", ["cn - 3.0 * dot", "cn - 0.1 * dot", "cn - dot * dot"])
def test_a_product_that_rounds_is_left_alone(expr: str) -> None:
    seed = (EXAMPLES / "kmeans_assign_sm90.cake").read_text(encoding="utf-8")
    text = seed.replace("cn - 2.0 * dot", expr)
    res = check_text(text, "k.cake")
    assert res.errors == [] and res.program is not None
    kernel = res.program.kernels[0]
    assert FMA_FUSION.applies(kernel, res.source) is None
    assert FMA_FUSION.apply(kernel, res.source, {}) is None


def test_a_kernel_without_a_fragment_multiply_add_is_left_alone() -> None:
    """gemm_sm90's only products are index arithmetic (and the seed's `i + j * BN`, an
    int fragment, is not counted among its sites above)."""
    path = EXAMPLES / "gemm_sm90.cake"
    res = check_text(path.read_text(encoding="utf-8"), path.name)
    assert res.program is not None
    assert FMA_FUSION.applies(res.program.kernels[0], res.source) is None
