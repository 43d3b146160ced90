"""CK316: the threads of a role overwrite a TMA store's source that only the issuing thread
waited for; and CK308's repair, which must put that wait before a barrier the other
threads pass (the old repair, a bare `tma_store_wait(0)` above the write, still raced)."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from cake_core.check import check_text
from cake_core.diagnostics.model import Applicability, apply_edits
from cake_core.sim import SimKernel, run_schedules

DOCS = Path(__file__).resolve().parents[1] / "docs" / "rules"
_SECTION = re.compile(r"^## (Example|Use instead)\n+```python\n(.*?)^```", re.M | re.S)
CK316 = dict(_SECTION.findall((DOCS / "CK316.md").read_text(encoding="utf-8")))
CK308 = dict(_SECTION.findall((DOCS / "CK308.md").read_text(encoding="utf-8")))
BAD, GOOD = CK316["Example"], CK316["Use instead"]


def codes_of(text: str) -> list[tuple[str, int]]:
    return [(d.code, d.span.start.line + 1) for d in check_text(text, "k.cake").diagnostics]


def line_of(text: str, needle: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), 1) if needle in line)


def test_overwrite_after_a_wait_in_the_issuing_thread_only_is_reported_at_the_write() -> None:
    assert codes_of(BAD) == [("CK316", line_of(BAD, "store(sc, cast(acc, bf16))"))]
    assert codes_of(GOOD) == []


def test_its_safe_fix_makes_the_kernel_check_clean() -> None:
    [d] = check_text(BAD, "k.cake").diagnostics
    [fix] = d.fixes
    assert fix.applicability is Applicability.SAFE
    fixed = apply_edits(BAD, fix.edits)
    assert "barrier_sync(2, 4)" in fixed and codes_of(fixed) == []


def test_a_barrier_after_the_wait_at_the_loop_top_also_orders_the_write() -> None:
    text = BAD.replace("            tma_store_wait(0)\n",
                       "            tma_store_wait(0)\n            barrier_sync(3, 4)\n")
    assert codes_of(text) == []


# --- CK308's repair ------------------------------------------------------------------------
@pytest.mark.parametrize("kernel", ["CK308", "CK316"])
def test_ck308_safe_fix_waits_before_a_barrier_and_checks_clean(kernel: str) -> None:
    """Without any wait, the write races with the store in flight (CK308); its fix must give
    a kernel that checks clean, CK316 included."""
    src = CK308["Example"] if kernel == "CK308" else BAD.replace("            tma_store_wait(0)\n",
                                                                 "", 1)
    [d] = [d for d in check_text(src, "k.cake").diagnostics if d.code == "CK308"]
    [fix] = d.fixes
    assert fix.applicability is Applicability.SAFE
    fixed = apply_edits(src, fix.edits)
    assert codes_of(fixed) == [], fixed
    wait, meet = line_of(fixed, "tma_store_wait(0)"), line_of(fixed, "barrier_sync(2,")
    assert wait + 1 == meet  # the wait, then the barrier that releases the other threads


def test_ck308_fix_reuses_a_barrier_the_role_already_meets_at() -> None:
    """A barrier between the store and the write: the wait goes just above it."""
    src = CK308["Example"].replace(
        "            x = load(", "            barrier_sync(3, 4)\n            x = load(")
    [d] = [d for d in check_text(src, "k.cake").diagnostics if d.code == "CK308"]
    fixed = apply_edits(src, d.fixes[0].edits)
    assert "tma_store_wait(0)\n            barrier_sync(3, 4)" in fixed
    assert codes_of(fixed) == []


# --- the simulator -------------------------------------------------------------------------------
def _simulate(text: str) -> list[tuple[str, int, list[int]]]:
    sk = SimKernel.from_text(text, "k.cake")
    rng = np.random.default_rng(0)
    inputs = {"A": rng.standard_normal((64, 128)).astype(np.float32),
              "W": rng.standard_normal((64, 128)).astype(np.float32)}
    [res] = run_schedules(sk, {"M": 64, "N": 64, "K": 128}, inputs, n=1)
    ref = inputs["A"] @ inputs["W"].T
    np.testing.assert_allclose(res.outputs["C"], ref, rtol=2e-2, atol=2e-1)
    return [(d.code, d.span.start.line + 1, [r.span.start.line + 1 for r in d.related])
            for d in res.diagnostics]


def test_simulation_sees_the_overwrite_only_the_issuing_thread_waited_for() -> None:
    """The wait orders the issuing thread; the role's other warps learn of it at their next
    barrier, so the default schedule reports the write as a race with the store."""
    store, write = line_of(BAD, "tma_store(C.tile"), line_of(BAD, "store(sc, cast(acc")
    assert _simulate(BAD) == [("CK501", write, [store])]
    assert _simulate(GOOD) == []
