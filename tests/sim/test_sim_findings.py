"""Each dynamic check finds the bug it is for, with one finding per bug, and stays quiet on
the correct twin.  The buggy kernels live in tests/sim/data; most are small variants of a
warp-specialised GEMM."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import numpy as np

from cake_core.ir.kernel import Op, Value
from cake_core.ir.types import SmemLayout, SmemType
from cake_core.sim import SimKernel, SimResult, simulate
from cake_core.sim.layout import SmemFault, SmemView
from cake_core.tasks import as_dtype

ROOT = Path(__file__).resolve().parents[2]

DATA = Path(__file__).resolve().parent / "data"
Launch = Callable[..., list[SimResult]]
GEMM = {"M": 64, "N": 64, "K": 256}


def _gemm_inputs(m: int, n: int, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(1)
    a = as_dtype(rng.standard_normal((m, k)), "bf16")
    b = as_dtype(rng.standard_normal((n, k)), "bf16")
    return a, b, a.astype(np.float64) @ b.astype(np.float64).T


def test_wrong_swizzle_on_the_reading_side_gives_wrong_numbers() -> None:
    """TMA writes `sa` with swizzle(128); make the wgmma read it as if it were swizzle(64)
    (or unswizzled): the same bytes, scrambled differently -- as on the GPU."""
    m, n, k = 128, 256, 128
    a, b, want = _gemm_inputs(m, n, k)
    sk = SimKernel.from_file(ROOT / "examples" / "gemm_sm90.cake")
    good = simulate(sk, {"M": m, "N": n, "K": k}, {"A": a, "B": b})
    assert np.abs(good.outputs["C"] - want).max() < 0.5
    # swizzle(64) agrees with swizzle(128) on the rows whose index mod 8 is below 4, an
    # unswizzled read only on rows 0 mod 8: that many rows of C stay right
    for layout, right_rows in ((SmemLayout(swizzle=64), 0.5), (SmemLayout(), 0.125)):
        sk = SimKernel.from_file(ROOT / "examples" / "gemm_sm90.cake")
        for op in sk.ops:
            if op.name == "wgmma":
                _set_layout(op, "a", layout)
        bad = simulate(sk, {"M": m, "N": n, "K": k}, {"A": a, "B": b})
        row_ok = (np.abs(bad.outputs["C"] - want) < 0.5).all(axis=1)
        assert row_ok.mean() == right_rows, layout
        assert bad.diagnostics == []  # a layout mix-up is no race: only the numbers show it


def _set_layout(op: Op, arg: str, layout: SmemLayout) -> None:
    v = op.args[arg]
    assert isinstance(v.type, SmemType)
    op.args[arg] = Value(v.name, replace(v.type, layout=layout), v.span, v.sym, v.const)


def test_release_before_reading_is_a_race(run_data: Launch) -> None:
    results = run_data("race_release_early.cake", GEMM)
    for r in results:
        races = [d for d in r.diagnostics if d.code == "CK501"]
        assert {d.data["buffer"] for d in races} == {"sa", "sb"}
        for d in races:
            assert len(d.related) == 1
            lines = {d.span.start.line + 1, d.related[0].span.start.line + 1}
            assert lines in ({15, 23}, {16, 23}), lines  # the TMA write and the wgmma read
            assert "bytes [0, 8192)" in d.message


def test_correct_gemm_has_no_race(run_data: Launch) -> None:
    for r in run_data("gemm_ws.cake", {"M": 128, "N": 256, "K": 512}, schedules=3):
        assert r.diagnostics == [], r.schedule


def test_consumer_waiting_on_an_uncommitted_pipeline_deadlocks_once(run_data: Launch) -> None:
    for r in run_data("deadlock_no_commit.cake", {"M": 128, "N": 64, "K": 256}):
        dead = [d for d in r.diagnostics if d.code == "CK502"]
        assert len(dead) == 1, [d.message for d in r.diagnostics]
        d = dead[0]
        assert d.span.start.line + 1 == 13  # the producer's acquire, blocked on `empty`
        assert [x.span.start.line + 1 for x in d.related] == [19]  # the consumer's wait
        assert set(d.data["blocked"]) == {"role 'load'", "role 'mma'"}
        assert "full barrier of stage 0" in d.message
        assert [x.code for x in r.diagnostics] == ["CK502"]


def test_constant_parity_on_a_raw_mbarrier_drifts(run_data: Launch) -> None:
    for r in run_data("parity_drift.cake", {"M": 64, "K": 256}):
        drift = [d for d in r.diagnostics if d.code == "CK503"]
        assert len(drift) == 1
        assert drift[0].span.start.line + 1 == 20
        assert "already waited for" in drift[0].message


def test_flipping_parity_is_clean(launch: Launch) -> None:
    text = (DATA / "parity_drift.cake").read_text().replace("full.wait(0)", "full.wait(k % 2)")
    sk = SimKernel.from_text(text, "parity_ok.cake")
    for r in launch(sk, {"M": 64, "K": 256}, schedules=3):
        assert r.diagnostics == [], r.schedule
        np.testing.assert_array_equal(r.outputs["C"], r.outputs["A"])


def test_uninitialised_smem_read(run_data: Launch) -> None:
    for r in run_data("uninit_read.cake", {"M": 64, "N": 64}):
        assert [d.code for d in r.diagnostics] == ["CK505"]
        assert r.diagnostics[0].data["elements"] == 64 * 64
        assert np.isnan(r.outputs["C"]).all(), "garbage smem reads back as NaN"


def test_accumulator_read_before_wgmma_wait(run_data: Launch) -> None:
    for r in run_data("acc_before_wait.cake", {"M": 64, "N": 64}):
        assert "CK506" in {d.code for d in r.diagnostics}
        # the registers do not hold the product before the wait
        assert np.abs(r.outputs["C"]).max() == 0.0


def test_runtime_index_past_a_ring_is_out_of_bounds(run_data: Launch) -> None:
    for r in run_data("smem_oob.cake", {"M": 64, "K": 128}):
        oob = [d for d in r.diagnostics if d.code == "CK504"]
        assert len(oob) == 1
        assert "index 2 is out of range" in oob[0].message


def test_view_bounds() -> None:
    from cake_core.ir.types import DType
    from cake_core.sim.layout import Buffer
    from cake_core.source import Position, Span

    p = Position(0, 0, 0, 0)
    buf = Buffer("s", DType.F16, (2, 64, 32), SmemLayout(), 0, 2 * 64 * 32 * 2, Span(p, p))
    v = SmemView.whole(buf)
    assert v.index((1,)).tile((16, 16), (3, 1)).origin == (48, 16)
    for bad in (lambda: v.index((2,)), lambda: v.index((0,)).tile((16, 16), (4, 0)),
                lambda: v.index((0,)).tile((16, 16), (0, -1))):
        try:
            bad()
        except SmemFault:
            continue
        raise AssertionError("expected an out-of-bounds fault")


def test_bulk_store_left_in_flight_at_exit(launch: Launch) -> None:
    text = """
BM, BN = 64, 64
M, N = dim("M"), dim("N", multiple_of=8)

@kernel(arch="sm_90a", grid=(cdiv(M, BM), cdiv(N, BN)), warps=4)
def fill(A: Tensor[f32, (M, N)], C: Tensor[f32, (M, N)]):
    st = smem(f32, (BM, BN))
    store(st, load(A.tile((BM, BN), (block.x, block.y))))
    fence_proxy_async()
    syncthreads()
    tma_store(C.tile((BM, BN), (block.x, block.y)), st)
"""
    sk = SimKernel.from_text(text, "fill.cake")
    rr, adv = launch(sk, {"M": 64, "N": 64})
    assert rr.diagnostics == []  # round-robin completes the store before the role ends
    assert [d.code for d in adv.diagnostics] == ["CK509"]
    np.testing.assert_array_equal(adv.outputs["C"], adv.outputs["A"])
    # without the fence, TMA reads generic writes it may not see
    sk = SimKernel.from_text(text.replace("    fence_proxy_async()\n", ""), "nofence.cake")
    codes = {d.code for r in launch(sk, {"M": 64, "N": 64}) for d in r.diagnostics}
    assert "CK501" in codes


def test_missing_syncthreads_between_warps_is_a_race(launch: Launch) -> None:
    """In the sm_80 GEMM every warp copies a share of each tile with cp.async; drop the
    syncthreads after cp_async_wait and a warp reads rows another warp copied."""
    text = (ROOT / "examples" / "gemm_sm80.cake").read_text()
    assert text.count("        syncthreads()\n") == 1
    sk = SimKernel.from_text(text.replace("        syncthreads()\n", ""), "nosync.cake")
    results = launch(sk, {"M": 128, "N": 128, "K": 128}, schedules=1)
    races = [d for d in results[0].diagnostics if d.code == "CK501"]
    assert races and all(d.data["buffer"] in ("sa", "sb") for d in races)


def test_two_blocks_writing_one_tile_race(launch: Launch) -> None:
    text = """
BM = 64
M = dim("M")

@kernel(arch="sm_80", grid=(cdiv(M, BM),), warps=4)
def overlap(A: Tensor[f32, (M, BM)], C: Tensor[f32, (M, BM)]):
    store(C.tile((BM, BM), (0, 0)), load(A.tile((BM, BM), (block.x, 0))))
"""
    sk = SimKernel.from_text(text, "overlap.cake")
    (r,) = launch(sk, {"M": 128}, schedules=1)
    assert [d.code for d in r.diagnostics] == ["CK501"]
    assert "blocks write overlapping parts of `C`" in r.diagnostics[0].message


def test_schedules_are_reproducible(launch: Launch) -> None:
    sk = SimKernel.from_file(DATA / "race_release_early.cake")
    a = launch(sk, GEMM, schedules=4)
    b = launch(sk, GEMM, schedules=4)
    assert [r.schedule for r in a] == ["round-robin", "adversarial (starving role 'mma')",
                                       "random (seed 0)", "random (seed 1)"]
    assert [r.steps for r in a] == [r.steps for r in b]
    for x, y in zip(a, b, strict=True):
        np.testing.assert_array_equal(x.outputs["C"], y.outputs["C"])


DBUF = (ROOT / "examples" / "kmeans_assign_sm90_dbuf.cake").read_text(encoding="utf-8")
KMEANS = {"B": 1, "N": 200, "K": 640}


def test_double_buffered_accumulators_are_clean(launch: Launch) -> None:
    """Two accumulators in turn, one chunk's wgmma groups in flight across the loop's back
    edge: no finding, and the argmin is the reference's (tests/sim/test_sim_examples.py)."""
    for r in launch(SimKernel.from_text(DBUF, "dbuf.cake"), KMEANS, schedules=3):
        assert r.diagnostics == [], r.schedule


def test_too_shallow_wait_in_a_double_buffer_is_seen(launch: Launch) -> None:
    """`wgmma_wait(3)` leaves a group of the older chunk in flight: its accumulator is read
    before it is complete, and its stage is released while the wgmma still reads it."""
    bad = DBUF.replace("wgmma_wait(2)            # d0 (chunk 2 * p)",
                       "wgmma_wait(3)            # d0 (chunk 2 * p)")
    assert bad != DBUF
    for r in launch(SimKernel.from_text(bad, "shallow.cake"), KMEANS):
        found = [d for d in r.diagnostics if d.code == "CK506"]
        assert found and "`d0` is read" in found[0].message, r.schedule


def test_rebinding_an_accumulator_in_flight_is_seen(launch: Launch) -> None:
    """A fresh `acc = fragment(...)` per iteration with the previous iteration's wgmma kept
    in flight by `wgmma_wait(1)`: the new fragment takes the registers the group writes."""
    block = (ROOT / "bench" / "data" / "gemm_sm90_block.cake").read_text(encoding="utf-8")
    text = block.replace("# --- kernel ---\n", "").rstrip("\n") + "\n"
    text = text.replace("        acc = fragment(f32, (BM, BN), layout=wgmma_acc)\n", "")
    text = text.replace("            wgmma(acc, sa[s], sb[s].T)\n            wgmma_wait(0)\n"
                        "            ab.release()\n",
                        "            acc = fragment(f32, (BM, BN), layout=wgmma_acc)\n"
                        "            wgmma(acc, sa[s], sb[s].T)\n            if k > 0:\n"
                        "                wgmma_wait(1)\n                ab.release()\n")
    text += "        wgmma_wait(0)\n        ab.release()\n"
    assert "if k > 0" in text
    for r in launch(SimKernel.from_text(text, "rebind.cake"), GEMM):
        msgs = [d.message for d in r.diagnostics if d.code == "CK506"]
        assert any("`acc` is re-bound" in m for m in msgs), r.schedule


PINGPONG = (ROOT / "examples" / "kmeans_assign_sm90_pingpong.cake").read_text(encoding="utf-8")


def test_ping_pong_consumers_are_clean(launch: Launch) -> None:
    """Two consumer roles ordered by named barriers 1 and 2: every arrival is met by a
    sync, so no barrier is left open and nothing races."""
    for r in launch(SimKernel.from_text(PINGPONG, "pingpong.cake"), KMEANS, schedules=3):
        assert r.diagnostics == [], r.schedule

