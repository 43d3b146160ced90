"""The swizzle tactic's before/after sees bank conflicts: on a conflicted buffer the
swizzle that removes them is predicted faster, a partial one less so, and undoing a good
swizzle is predicted slower."""

from __future__ import annotations

from pathlib import Path

import pytest
from cake_tactics import plugin

from cake_core.check import check_text
from cake_core.diagnostics.model import apply_edits
from cake_core.plugins import Tactic, TacticResult

ROOT = Path(__file__).resolve().parents[3]
COST_DATA = ROOT / "tests" / "cost" / "data"
CONFLICTED = COST_DATA / "gemm_banks_row_major_sm80.cake"
CONFLICT_FREE = COST_DATA / "gemm_banks_swizzle_sm80.cake"


def _swizzle() -> Tactic:
    return next(t for t in plugin.tactics if t.name == "swizzle")


def _apply(text: str, name: str, buffer: str, span: int) -> TacticResult:
    res = check_text(text, name)
    assert res.errors == [] and res.program is not None
    out = _swizzle().apply(res.program.kernels[0], res.source,
                           {"buffer": buffer, "swizzle": span})
    assert out is not None, (buffer, span)
    return out


@pytest.mark.parametrize("buffer", ["sa", "sb"])
def test_swizzling_a_conflicted_buffer_is_predicted_faster(buffer: str) -> None:
    text = CONFLICTED.read_text(encoding="utf-8")
    full = _apply(text, CONFLICTED.name, buffer, 64).params["predicted"]
    half = _apply(text, CONFLICTED.name, buffer, 32).params["predicted"]
    assert "error" not in full and "error" not in half
    assert full["gpu_before"] == full["gpu_after"]
    # swizzle(64) spreads an ldmatrix phase's 8 rows of 64 bytes over all banks (4-way ->
    # none); swizzle(32) only pairs them up (4-way -> 2-way)
    assert full["speedup"] > half["speedup"] > 1.05
    assert full["after_us"] < half["after_us"] < full["before_us"]


def test_swizzling_both_buffers_reaches_the_conflict_free_prediction() -> None:
    text = CONFLICTED.read_text(encoding="utf-8")
    first = _apply(text, CONFLICTED.name, "sa", 64)
    text = apply_edits(text, first.edits)
    second = _apply(text, CONFLICTED.name, "sb", 64)
    done = apply_edits(text, second.edits)
    assert check_text(done, CONFLICTED.name).diagnostics == []
    pred = second.params["predicted"]
    free = _apply(CONFLICT_FREE.read_text(encoding="utf-8"), CONFLICT_FREE.name, "sa", 32)
    # the conflict-free kernel's own "before" is where the two moves must land
    assert pred["after_us"] == pytest.approx(free.params["predicted"]["before_us"])
    total = first.params["predicted"]["before_us"] / pred["after_us"]
    assert total > 1.5


def test_removing_a_good_swizzle_is_predicted_slower() -> None:
    path = ROOT / "examples" / "gemm_sm80.cake"
    out = _apply(path.read_text(encoding="utf-8"), path.name, "sa", 0)
    assert "row_major" in out.rationale
    assert out.params["predicted"]["speedup"] < 1.0
