"""Who arrives on a raw mbarrier (`per=`), and CK313: an elected arrival that hands over a
stage the role's other warps may still be reading.

The same kernel is checked statically, simulated with the default schedule and lowered,
so the three views of an arrival (count, ordering, emitted code) are held together.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from cake_core.check import check_text
from cake_core.diagnostics.model import Applicability, apply_edits
from cake_core.lower import lower_source
from cake_core.sim import SimKernel, run_schedules
from cake_core.source import SourceFile

PAGE = Path(__file__).resolve().parents[1] / "docs" / "rules" / "CK313.md"
_SECTION = re.compile(r"^## (Example|Use instead)\n+```python\n(.*?)^```", re.M | re.S)
BLOCKS = dict(_SECTION.findall(PAGE.read_text(encoding="utf-8")))
BAD, GOOD = BLOCKS["Example"], BLOCKS["Use instead"]
DIMS = {"M": 128, "N": 256, "K": 512}


def codes_of(text: str) -> list[tuple[str, int]]:
    return [(d.code, d.span.start.line + 1) for d in check_text(text, "k.cake").diagnostics]


def line_of(text: str, needle: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), 1) if needle in line)


# --- the rule ------------------------------------------------------------------------------
def test_elected_release_of_a_two_warpgroup_role_is_reported_at_the_arrive() -> None:
    assert codes_of(BAD) == [("CK313", line_of(BAD, "empty[s].arrive()"))]
    assert codes_of(GOOD) == []


@pytest.mark.parametrize("which", [0, 1], ids=["per-warp", "named-barrier"])
def test_each_safe_fix_repairs_the_race(which: int) -> None:
    d = check_text(BAD, "k.cake").diagnostics[0]
    assert len(d.fixes) == 2
    fix = d.fixes[which]
    assert fix.applicability is Applicability.SAFE
    repaired = apply_edits(BAD, fix.edits)
    assert codes_of(repaired) == []
    if which == 0:
        assert 'empty[s].arrive(per="warp")' in repaired
        assert "empty = mbarrier(count=8, n=STAGES)" in repaired
    else:
        assert "barrier_sync(1, 8)" in repaired


def test_one_warpgroup_of_wgmma_needs_no_meeting() -> None:
    """A wgmma is one operation of its warpgroup: after `wgmma_wait` it is done for all four
    warps, so one elected arrival after it covers the whole (one-warpgroup) role."""
    text = BAD.replace("warps=12", "warps=8").replace("range(4, 12)", "range(4, 8)") \
        .replace("BM, BN, BK, STAGES = 128, 256, 64, 4", "BM, BN, BK, STAGES = 64, 256, 64, 4")
    assert codes_of(text) == []


def test_generic_reads_of_several_warps_need_a_meeting() -> None:
    text = BAD.replace("            wgmma_wait(0)\n",
                       "            wgmma_wait(0)\n            x = load(sa[s])\n"
                       "            store(C.tile((BM, BK), (block.x, k)), x)\n")
    text = text.replace("warps=12", "warps=8").replace("range(4, 12)", "range(4, 8)") \
        .replace("BM, BN, BK, STAGES = 128, 256, 64, 4", "BM, BN, BK, STAGES = 64, 256, 64, 4")
    assert ("CK313", line_of(text, "empty[s].arrive()")) in codes_of(text)


def test_per_thread_counts_every_thread_of_the_role() -> None:
    ok = GOOD.replace("count=8, n=STAGES", "count=256, n=STAGES").replace(
        'arrive(per="warp")', 'arrive(per="thread")')
    assert codes_of(ok) == []
    bad = GOOD.replace('arrive(per="warp")', 'arrive(per="thread")')
    assert [c for c, _ in codes_of(bad)] == ["CK303"]


def test_per_must_name_a_granularity() -> None:
    bad = GOOD.replace('per="warp"', 'per="lane"')
    [d] = check_text(bad, "k.cake").diagnostics
    assert "`per` says who arrives" in d.message


# --- the simulator ---------------------------------------------------------------------------
def _simulate(text: str) -> list:
    sk = SimKernel.from_text(text, "k.cake")
    rng = np.random.default_rng(0)
    inputs = {"A": rng.standard_normal((DIMS["M"], DIMS["K"])).astype(np.float32),
              "B": rng.standard_normal((DIMS["N"], DIMS["K"])).astype(np.float32)}
    return run_schedules(sk, DIMS, inputs, n=1)  # the default, friendly round-robin


def test_default_simulation_sees_the_leader_release_race() -> None:
    [res] = _simulate(BAD)
    races = [d for d in res.diagnostics if d.code == "CK501"]
    assert races, [d.code for d in res.diagnostics]
    arrive = line_of(BAD, "empty[s].arrive()")
    # one finding, at the arrival, naming the refill and the read it races with
    assert [d.span.start.line + 1 for d in races] == [arrive]


@pytest.mark.parametrize("fix", [0, 1], ids=["per-warp", "named-barrier"])
def test_repaired_kernels_simulate_clean_and_right(fix: int) -> None:
    d = check_text(BAD, "k.cake").diagnostics[0]
    [res] = _simulate(apply_edits(BAD, d.fixes[fix].edits))
    assert [x.code for x in res.diagnostics if x.severity.value == "error"] == []
    a, b = res.outputs["A"], res.outputs["B"]
    ref = a.astype(np.float32) @ b.astype(np.float32).T
    np.testing.assert_allclose(res.outputs["C"], ref, rtol=2e-2, atol=2e-1)


# --- the lowering ------------------------------------------------------------------------------
def _cu(text: str) -> str:
    res = lower_source(SourceFile(text, "k.cake"))
    assert res.cu is not None, [d.message for d in res.diagnostics]
    return res.cu.split("__global__", 1)[1]


def test_lowering_emits_exactly_the_arrivals_per_names() -> None:
    warp = _cu(GOOD)
    assert "cake_mbar_init(empty + 8 * bi, 8)" in warp
    assert "__syncwarp(); if (lane == 0) { cake_mbar_arrive(empty" in warp
    thread = _cu(GOOD.replace("count=8, n=STAGES", "count=256, n=STAGES").replace(
        'arrive(per="warp")', 'arrive(per="thread")'))
    assert "cake_mbar_init(empty + 8 * bi, 256)" in thread
    assert re.search(r"^\s*cake_mbar_arrive\(empty", thread, re.M)
    synced = _cu(BAD.replace("            empty[s].arrive()\n",
                             "            barrier_sync(1, 8)\n            empty[s].arrive()\n"))
    assert "cake_bar_sync(1, 256);" in synced
    assert "__syncwarp(); if (leader) cake_mbar_arrive(empty" in synced
