"""Asynchronous completion: wait_group counts, out-of-order and late completion.

`cp_async_wait(n)` leaves the newest `n` committed groups of the thread in flight, empty
groups included; the adversarial schedule lands the copies a wait needs as late as it
can and newest first, and no schedule lets a wait vouch for a group it does not cover.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np

from cake_core.sim import SimKernel, SimResult, simulate
from cake_core.sim.inputs import random_inputs
from cake_core.sim.schedule import Adversarial, RoundRobin, schedules

Launch = Callable[..., list[SimResult]]

ROOT = Path(__file__).resolve().parents[2]
SM80 = (ROOT / "examples" / "gemm_sm80.cake").read_text()


def _guarded(text: str) -> str:
    """gemm_sm80 with the copies past the end of K skipped, the commits kept: a short K
    commits empty groups, which the wait counts must still count."""
    for old in ("        cp_async(sa[p], A.tile((BM, BK), (block.x, p)))\n"
                "        cp_async(sb[p], B.tile((BN, BK), (block.y, p)))\n",
                "        cp_async(sa[nxt % STAGES], A.tile((BM, BK), (block.x, nxt)))\n"
                "        cp_async(sb[nxt % STAGES], B.tile((BN, BK), (block.y, nxt)))\n"):
        assert old in text
        cond = "p < ktiles" if "[p]" in old else "nxt < ktiles"
        body = "".join("    " + line + "\n" for line in old.splitlines())
        text = text.replace(old, f"        if {cond}:\n" + body)
    return text


def _shallow(text: str) -> str:
    assert text.count("cp_async_wait(STAGES - 2)") == 1
    return text.replace("cp_async_wait(STAGES - 2)", "cp_async_wait(STAGES - 1)")


def _gemm_ok(sk: SimKernel, dims: dict[str, int], n: int) -> None:
    inputs = random_inputs(sk, dims, seed=3, skip=("C",))
    a = np.asarray(inputs["A"], dtype=np.float64)
    b = np.asarray(inputs["B"], dtype=np.float64)
    for sched in schedules(n, seed=1):
        r = simulate(sk, dims, inputs, schedule=sched)
        assert r.diagnostics == [], (sched.name, [d.code for d in r.diagnostics])
        np.testing.assert_allclose(r.outputs["C"], a @ b.T, atol=0.1, rtol=0.02)


def test_empty_groups_count_in_cp_async_wait() -> None:
    """K of one or two tiles: the prologue and the loop commit empty groups, and
    `cp_async_wait(STAGES - 2)` must still wait for the tile about to be read (before:
    the empty groups were taken for the pending ones, and the adversarial schedule read
    unwritten shared memory, CK505/CK501)."""
    sk = SimKernel.from_text(_guarded(SM80), "guarded.cake")
    for k in (32, 64, 160):
        _gemm_ok(sk, {"M": 128, "N": 128, "K": k}, 4)


def test_too_shallow_wait_with_empty_groups_is_caught(launch: Launch) -> None:
    sk = SimKernel.from_text(_shallow(_guarded(SM80)), "guarded_shallow.cake")
    for r in launch(sk, {"M": 128, "N": 128, "K": 64}, skip=("C",)):
        races = {d.data["buffer"] for d in r.diagnostics if d.code == "CK501"}
        assert races == {"sa", "sb"}, r.schedule


def test_too_shallow_cp_async_wait_is_a_race_on_every_default_schedule(launch: Launch
                                                                        ) -> None:
    """`cp_async_wait(STAGES - 1)` in the sm_80 GEMM reads the tile of a group the wait
    does not cover.  Round-robin lands that group before the read, but the wait does not
    vouch for it: a race (before: only the adversarial schedule saw it)."""
    sk = SimKernel.from_text(_shallow(SM80), "shallow.cake")
    rr, adv = launch(sk, {"M": 128, "N": 128, "K": 128}, skip=("C",))
    for r in (rr, adv):
        races = [d for d in r.diagnostics if d.code == "CK501"]
        assert races and {d.data["buffer"] for d in races} == {"sa", "sb"}, r.schedule
    assert "CK505" in {d.code for d in adv.diagnostics}  # landed too late to be read


OVERLAP = """
N = dim("N", multiple_of=64)

@kernel(arch="sm_80", grid=(1,), warps=1)
def overlap(A: Tensor[f32, (N,)], C: Tensor[f32, (N,)]):
    s = smem(f32, (64,))
    cp_async(s, A.tile((64,), (0,)))
    cp_async(s, A.tile((64,), (1,)))
    cp_async_commit()
    cp_async_wait(0)
    store(C.tile((64,), (0,)), load(s))
"""


def test_adversarial_lands_the_copies_of_a_group_newest_first() -> None:
    """The copies of one cp.async group are unordered: two writing the same bytes give
    the program-order result under round-robin and the other one under the adversary."""
    sk = SimKernel.from_text(OVERLAP, "overlap.cake")
    inputs = random_inputs(sk, {"N": 128}, seed=0, skip=("C",))
    a = np.asarray(inputs["A"])
    rr = simulate(sk, {"N": 128}, inputs, schedule=RoundRobin())
    adv = simulate(sk, {"N": 128}, inputs, schedule=Adversarial())
    np.testing.assert_array_equal(rr.outputs["C"][:64], a[64:])
    np.testing.assert_array_equal(adv.outputs["C"][:64], a[:64])


REUSE = """
BM, BN = 64, 64
M, N = dim("M"), dim("N", multiple_of=8)

@kernel(arch="sm_90a", grid=(cdiv(M, BM), cdiv(N, BN)), warps=4)
def reuse(A: Tensor[f32, (M, N)], C: Tensor[f32, (M, N)]):
    st = smem(f32, (BM, BN))
    store(st, load(A.tile((BM, BN), (block.x, block.y))))
    fence_proxy_async()
    syncthreads()
    tma_store(C.tile((BM, BN), (block.x, block.y)), st)
    store(st, load(A.tile((BM, BN), (block.x, block.y))) * 2.0)
    tma_store_wait(0)
"""


def test_overwriting_a_bulk_store_source_before_its_wait_races(launch: Launch) -> None:
    """The adversary lands the store after the overwrite: the store reads the new values
    (wrong output) and the overwrite races with it on both schedules."""
    sk = SimKernel.from_text(REUSE, "reuse.cake")
    rr, adv = launch(sk, {"M": 64, "N": 64})
    for r in (rr, adv):
        assert [d.code for d in r.diagnostics] == ["CK501"], r.schedule
    np.testing.assert_array_equal(rr.outputs["C"], rr.outputs["A"])
    np.testing.assert_array_equal(adv.outputs["C"], 2 * adv.outputs["A"])


LANE = """
BM, BN = 64, 64
M, N = dim("M"), dim("N", multiple_of=8)

@kernel(arch="sm_80", grid=(cdiv(M, BM), cdiv(N, BN)), warps=4)
def lane_scale(A: Tensor[f32, (M, N)], C: Tensor[f32, (M, N)]):
    st = smem(f32, (BM, BN))
    store(st, load(A.tile((BM, BN), (block.x, block.y))) * (1 + lane.id // 32))
    syncthreads()
    store(C.tile((BM, BN), (block.x, block.y)), load(st))
"""


def test_lane_id_as_data_keeps_the_block_one_process(launch: Launch) -> None:
    """`lane.id` in an expression used to split the block into warps, each storing the
    whole tile: a write-after-write race between warps that do the same store together."""
    sk = SimKernel.from_text(LANE, "lane.cake")
    assert [p.warps for p in sk.procs] == [(0, 1, 2, 3)]
    for r in launch(sk, {"M": 64, "N": 64}):
        assert [d.code for d in r.diagnostics] == ["CK510"], r.schedule  # the lane-0 note
        np.testing.assert_array_equal(r.outputs["C"], r.outputs["A"])


def test_lane_id_in_a_condition_keeps_the_block_one_process(launch: Launch) -> None:
    """A branch on `lane.id` is evaluated thread by thread (`lanes.py`), not by running
    the block warp by warp: every lane takes `lane.id < 32`, so the block stores its tile
    once, as before the branch was there."""
    last = "    store(C.tile((BM, BN), (block.x, block.y)), load(st))\n"
    text = LANE.replace(last, "    if lane.id < 32:\n    " + last)
    sk = SimKernel.from_text(text, "lane_if.cake")
    assert [p.warps for p in sk.procs] == [(0, 1, 2, 3)]
    for r in launch(sk, {"M": 64, "N": 64}):
        assert [d.code for d in r.diagnostics] == ["CK510"], r.schedule  # the data note
        np.testing.assert_array_equal(r.outputs["C"], r.outputs["A"])
