"""Lanes are modelled where code depends on them (`cake_core/sim/lanes.py`).

A condition on `lane.id` or `thread.id` is evaluated thread by thread instead of running
the role warp by warp with every thread taken for lane 0.  Both directions matter: a
branch that changes nothing about synchronisation leaves the verdict (and the processes)
as they were, and a branch that does change it -- who fences, how many threads arrive,
whether the elected thread is there at all -- is seen.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from cake_core.sim import SimKernel, run_schedules
from cake_core.sim.inputs import default_dims, random_inputs

GEMM = (Path(__file__).resolve().parents[1] / "corpus" /
        "mbar_leader_arrive_gemm.fixed.cake").read_text(encoding="utf-8")
"""A warp-specialised GEMM over raw mbarriers; its consumers arrive per warp."""
ARRIVE = '            empty[s].arrive(per="warp")\n'
STORE = "        store(C.tile((BM, BN), (block.x, block.y)), cast(acc, f16))\n"
assert ARRIVE in GEMM and STORE in GEMM


def _run(text: str) -> tuple[SimKernel, list[tuple[str, int]], list[np.ndarray]]:
    sk = SimKernel.from_text(text, "k.cake")
    dims = default_dims(sk, 512)  # K = 512: the 6-stage ring wraps
    results = run_schedules(sk, dims, random_inputs(sk, dims, skip=("C",)), n=2,
                            blocks=[(0, 0)])
    found = sorted({(d.code, d.span.start.line + 1) for r in results for d in r.diagnostics})
    return sk, found, [r.outputs["C"] for r in results]


def _line(text: str, needle: str) -> int:
    return next(i for i, s in enumerate(text.split("\n"), 1) if needle in s)


def test_the_plain_kernel_is_clean() -> None:
    sk, found, _ = _run(GEMM)
    assert found == []
    assert [p.warps for p in sk.procs] == [tuple(range(4)), tuple(range(4, 12))]


# --- no false positives: a lane branch that changes nothing changes no verdict ------------
def test_an_unrelated_lane_branch_changes_nothing() -> None:
    text = GEMM.replace(ARRIVE, ARRIVE + "            if lane.id == 0:\n"
                                         "                z = k + 1\n")
    sk, found, outs = _run(text)
    assert found == []  # no CK510 note, no race between warps storing the tile
    assert [p.warps for p in sk.procs] == [tuple(range(4)), tuple(range(4, 12))]
    _, _, plain = _run(GEMM)
    np.testing.assert_array_equal(outs[0], plain[0])


def test_lane_zero_of_each_warp_arriving_per_thread_is_one_arrival_per_warp() -> None:
    """`if lane.id == 0: arrive(per="thread")` is the hand-written `per="warp"`: eight
    arrivals, which the count of 8 expects."""
    text = GEMM.replace(ARRIVE, '            if lane.id == 0:\n'
                                '                empty[s].arrive(per="thread")\n')
    assert _run(text)[1] == []


def test_a_thread_condition_every_thread_of_the_role_takes_is_no_branch() -> None:
    """The consumers are threads 128-383: `thread.id >= 128` holds for all of them."""
    text = GEMM.replace(ARRIVE, "            if thread.id >= 128:\n    " + ARRIVE)
    sk, found, _ = _run(text)
    assert found == []
    assert len(sk.procs) == 2


def test_thread_zero_of_the_role_issues_what_elect_one_holds() -> None:
    text = GEMM.replace("            full[s].expect_tx(", "            with elect_one():\n"
                                                        "                full[s].expect_tx(")
    text = text.replace("            tma_load(sa", "                tma_load(sa").replace(
        "            tma_load(sb", "                tma_load(sb")
    assert _run(text)[1] == []


# --- lane-dependent bugs are caught ----------------------------------------------------------
def test_lane_zero_arriving_for_a_count_of_every_thread_hangs() -> None:
    """Lane 0 of each warp arrives per thread where the count expects every thread: eight
    arrivals of 256, so the producer waits for ever.  Running each warp as lane 0 made
    this 256 arrivals and hid the hang."""
    text = GEMM.replace("empty = mbarrier(count=8", "empty = mbarrier(count=256").replace(
        ARRIVE, '            if lane.id == 0:\n                empty[s].arrive(per="thread")\n')
    found = {c for c, _ in _run(text)[1]}
    assert "CK502" in found, found


def test_an_elected_op_under_a_lane_its_leader_skips_is_never_issued() -> None:
    """The role's TMA and `expect_tx` are issued by its thread 0; under `lane.id == 1`
    that thread never gets there, so the consumers wait for ever, as on the GPU."""
    text = GEMM.replace("            full[s].expect_tx(", "            if lane.id == 1:\n"
                                                        "                full[s].expect_tx(")
    found = {c for c, _ in _run(text)[1]}
    assert "CK502" in found, found


def test_a_fence_by_lane_zero_leaves_the_tile_unfenced() -> None:
    """The epilogue's generic stores are spread over every thread; a fence by lane 0 of
    each warp covers only its own, so the TMA store reads unfenced bytes."""
    epilogue = ("        sc = cast(acc, f16)\n"
                "        store(st, sc)\n"
                "        if lane.id == 0:\n"
                "            fence_proxy_async()\n"
                "        barrier_sync(1, 8)\n"
                "        tma_store(C.tile((BM, BN), (block.x, block.y)), st)\n"
                "        tma_store_wait(0)\n")
    good = GEMM.replace(STORE, epilogue.replace(
        "        if lane.id == 0:\n            fence_proxy_async()\n",
        "        fence_proxy_async()\n")).replace(
        "    full = mbarrier(", "    st = smem(f16, (BM, BN), layout=row_major)\n"
                               "    full = mbarrier(")
    assert _run(good)[1] == []
    bad = good.replace("        fence_proxy_async()\n        barrier_sync(1, 8)\n",
                       "        if lane.id == 0:\n            fence_proxy_async()\n"
                       "        barrier_sync(1, 8)\n")
    assert bad != good
    found = _run(bad)[1]
    assert ("CK501", _line(bad, "tma_store(C.tile")) in found, found


def test_a_loop_whose_trip_count_depends_on_the_lane_runs_each_lane_its_own_count() -> None:
    """Lanes 0-15 arrive once, lanes 16-31 twice: 48 arrivals per warp, 384 for the
    role.  A count of 384 is right; a count of 256 (one per thread) is exceeded."""
    loop = ('            for j in range(lane.id // 16 + 1):\n'
            '                empty[s].arrive(per="thread")\n')
    right = GEMM.replace("empty = mbarrier(count=8", "empty = mbarrier(count=384").replace(
        ARRIVE, loop)
    sk, found, _ = _run(right)
    assert found == []
    assert len(sk.procs) == 2
    wrong = right.replace("count=384", "count=256")
    assert "CK508" in {c for c, _ in _run(wrong)[1]}
