"""CK314 and CK315: ops that only some threads of a role run, and the uniformity analysis
that tells which conditions split the threads of a warp or a warpgroup.

The docs pages' examples are the base kernels, so the pages and these tests hold the same
programs; variants change one condition at a time.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from cake_core.check import check_text
from cake_core.diagnostics.model import Applicability, apply_edits

RULES = Path(__file__).resolve().parents[1] / "docs" / "rules"
BUGS = Path(__file__).resolve().parent / "bugs"
_SECTION = re.compile(r"^## (Example|Use instead)\n+```python\n(.*?)^```", re.M | re.S)


def _blocks(code: str) -> tuple[str, str]:
    blocks = dict(_SECTION.findall((RULES / f"{code}.md").read_text(encoding="utf-8")))
    return blocks["Example"], blocks["Use instead"]


COLL_BAD, COLL_GOOD = _blocks("CK314")
FENCE_BAD, FENCE_GOOD = _blocks("CK315")
WGMMA_GUARD = "            if warp.rank == 0:\n                wgmma(acc, sa[s], sb[s].T)\n"


def codes_of(text: str) -> list[tuple[str, int]]:
    return [(d.code, d.span.start.line + 1) for d in check_text(text, "k.cake").diagnostics]


def line_of(text: str, needle: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), 1) if needle in line)


def _guarded(cond: str) -> str:
    return COLL_BAD.replace("if warp.rank == 0:", f"if {cond}:")


# --- CK314 -----------------------------------------------------------------------------------
def test_wgmma_issued_by_one_warp_is_reported_once_at_the_wgmma() -> None:
    assert codes_of(COLL_BAD) == [("CK314", line_of(COLL_BAD, "wgmma(acc"))]
    assert codes_of(COLL_GOOD) == []


def test_the_finding_names_the_condition_and_offers_no_fix() -> None:
    [d] = check_text(COLL_BAD, "k.cake").diagnostics
    cond = line_of(COLL_BAD, "if warp.rank == 0:")
    assert [r.span.start.line + 1 for r in d.related] == [cond]
    assert f"line {cond}" in d.notes[0]
    assert "warp.rank" in d.message and d.fixes == ()


@pytest.mark.parametrize("cond", ["lane.id < 16", "thread.id % 32 == 0", "warp.id != 5",
                                  "warp.rank < 2", "warp.rank // 2 == 0",
                                  "k % 2 == 0 and lane.id == 0", "not warp.rank == 3"])
def test_conditions_that_split_a_warpgroup_are_reported(cond: str) -> None:
    text = _guarded(cond)
    assert codes_of(text) == [("CK314", line_of(text, "wgmma(acc"))]


@pytest.mark.parametrize("cond", ["warp.rank < 4", "warp.rank // 4 == 0", "warpgroup.rank == 0",
                                  "k + 1 < cdiv(K, BK)", "block.x == 0", "thread.id // 128 == 1",
                                  "warp.id >= 4"])
def test_conditions_whole_warpgroups_agree_on_are_fine(cond: str) -> None:
    assert codes_of(_guarded(cond)) == []


def test_the_split_follows_assignments() -> None:
    text = COLL_BAD.replace("            if warp.rank == 0:\n",
                            "            w = warp.rank * 2\n            first = w + 1\n"
                            "            if first < 3:\n")
    assert codes_of(text) == [("CK314", line_of(text, "wgmma(acc"))]


def test_a_warpgroup_collective_after_the_guard_is_fine_and_one_guard_is_one_finding() -> None:
    both = COLL_BAD.replace(WGMMA_GUARD + "            wgmma_wait(0)\n",
                            WGMMA_GUARD + "                wgmma_wait(0)\n")
    [d] = check_text(both, "k.cake").diagnostics
    assert d.code == "CK314" and d.span.start.line + 1 == line_of(both, "wgmma(acc")
    assert any("wgmma_wait" in r.message for r in d.related)


def test_loop_bounds_that_differ_per_lane_split_the_warp() -> None:
    text = COLL_BAD.replace(WGMMA_GUARD, "            for i in range(lane.id % 2):\n"
                                         "                wgmma(acc, sa[s], sb[s].T)\n")
    assert codes_of(text) == [("CK314", line_of(text, "wgmma(acc"))]


def test_warp_collectives_tolerate_warp_level_conditions() -> None:
    """ldmatrix and mma.sync need their warp's 32 lanes only: a branch per warp is fine, a
    branch per lane is not (through an assignment, on sm_80)."""
    base = (BUGS / "smem_view_past_stage.fixed.cake").read_text(encoding="utf-8")
    call = next(ln for ln in base.splitlines() if "mma_sync(" in ln)
    indent = call[: len(call) - len(call.lstrip())]

    def guard(cond: str) -> str:
        return base.replace(call + "\n", f"{indent}half = {cond}\n{indent}if half == 0:\n"
                                         f"    {call}\n")
    assert codes_of(guard("warp.id // 2")) == []
    lanes = guard("lane.id // 16")
    assert codes_of(lanes) == [("CK314", line_of(lanes, "mma_sync("))]


# --- CK315 -----------------------------------------------------------------------------------
def test_fence_by_one_lane_is_reported_once_at_the_fence() -> None:
    assert codes_of(FENCE_BAD) == [("CK315", line_of(FENCE_BAD, "fence_proxy_async()"))]
    assert codes_of(FENCE_GOOD) == []


@pytest.mark.parametrize("cond", ["warp.rank == 0", "warpgroup.rank == 0", "thread.id < 96"])
def test_any_thread_guard_makes_the_fence_partial(cond: str) -> None:
    text = FENCE_BAD.replace("if lane.id == 0:", f"if {cond}:")
    assert [c for c, _ in codes_of(text)] == ["CK315"]


def test_the_safe_fix_runs_the_fence_everywhere_and_gives_the_clean_kernel() -> None:
    [d] = check_text(FENCE_BAD, "k.cake").diagnostics
    [fix] = d.fixes
    assert fix.applicability is Applicability.SAFE
    repaired = apply_edits(FENCE_BAD, fix.edits)
    assert repaired == FENCE_GOOD
    assert codes_of(repaired) == []


def test_a_guard_holding_more_than_the_fence_gets_an_unsafe_move() -> None:
    text = FENCE_BAD.replace(
        "        if lane.id == 0:\n            fence_proxy_async()\n",
        "        if lane.id == 0:\n            fence_proxy_async()\n"
        "            syncthreads_free = 1\n")
    [d] = check_text(text, "k.cake").diagnostics
    [fix] = d.fixes
    assert fix.applicability is Applicability.UNSAFE
    repaired = apply_edits(text, fix.edits)
    assert "            syncthreads_free = 1\n        fence_proxy_async()\n" in repaired
    assert codes_of(repaired) == []


def test_writes_under_the_same_guard_are_fenced_by_their_own_threads() -> None:
    text = FENCE_BAD.replace(
        "        store(sc, cast(acc, bf16))\n        if lane.id == 0:\n",
        "        if lane.id == 0:\n            store(sc, cast(acc, bf16))\n")
    assert "CK315" not in [c for c, _ in codes_of(text)]


def test_a_guarded_fence_with_no_tma_read_after_it_is_not_this_rule() -> None:
    text = FENCE_BAD.replace("        tma_store(C.tile((BM, BN), (block.x, block.y)), sc)\n"
                             "        tma_store_wait(0)\n",
                             "        store(C.tile((BM, BN), (block.x, block.y)), load(sc))\n")
    assert "CK315" not in [c for c, _ in codes_of(text)]
