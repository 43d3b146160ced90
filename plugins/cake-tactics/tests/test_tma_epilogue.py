"""tma-store-epilogue: where it applies, and that every rewrite it offers verifies and
computes the task's reference in the simulator (on the task's own shapes, ragged ones
included, not only on the shape the tactic checked itself)."""

from __future__ import annotations

import re

import pytest
from cake_tactics.tma_epilogue import TMA_EPILOGUE
from tactics_support import ROOT, applies, checked, offered_variants

from cake_core.check import check_text
from cake_core.sim import SimKernel
from cake_core.sim.tasks_run import run_task
from cake_core.tasks import load_task

GEMM = ROOT / "examples" / "gemm_sm90.cake"


def test_it_applies_to_the_per_thread_epilogue_only() -> None:
    assert applies(TMA_EPILOGUE, GEMM)
    for name in ("gemm_sm90_tma_epilogue.cake", "gemm_sm80.cake", "tinygemm_sm90.cake",
                 "kmeans_assign_sm90.cake"):
        assert not applies(TMA_EPILOGUE, ROOT / "examples" / name), name


def test_every_width_and_buffer_count_is_offered_on_gemm_sm90() -> None:
    got = {(v.params["width"], v.params["buffers"]) for v in offered_variants(TMA_EPILOGUE, GEMM)}
    assert got == {(w, b) for w in (64, 32, 16) for b in (1, 2)}


@pytest.mark.parametrize("params", [{"width": 64, "buffers": 2}, {"width": 32, "buffers": 1}])
def test_the_rewrite_verifies_and_matches_the_reference(params: dict[str, int]) -> None:
    variant = next(v for v in offered_variants(TMA_EPILOGUE, GEMM) if v.params == params)
    text = variant.text
    assert not re.search(r"^\s*store\(", text, re.M)  # the per-thread store is gone
    assert text.count("stmatrix(") == 1 and text.count("fence_proxy_async()") == 1
    assert check_text(text, str(GEMM)).diagnostics == []
    report = run_task(load_task("gemm_bf16"), SimKernel.from_text(text, str(GEMM)),
                      n_schedules=2)
    assert report.shapes
    for s in report.shapes:
        assert s.error is None and s.passed, s.dims
    assert [d for d in report.diagnostics if d.severity.value == "error"] == []
    predicted = variant.out.params["predicted"]
    assert predicted["after_us"] < predicted["before_us"]


def test_the_shipped_example_is_the_rewrite_in_spirit() -> None:
    """The example spells the same epilogue by hand: one stmatrix, two buffers, width 64."""
    text, _ = checked(ROOT / "examples" / "gemm_sm90_tma_epilogue.cake")
    assert "stmatrix(sc[j % 2], cast(acc, bf16), j)" in text
