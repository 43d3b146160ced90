"""The synchronization rules (CK3xx), one behaviour per test.

Kernels are built from a few realistic templates by textual edits, so each test shows
exactly what changed.  The checks run the sync pass only (plus parsing and type checking),
so a change in another pass cannot make these tests pass or fail.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from kernels import GEMM_SM90 as GEMM
from kernels import GEMM_VARIANTS

from cake_core.check import check_text
from cake_core.diagnostics.model import Applicability, Diagnostic, apply_edits
from cake_core.diagnostics.text import render_text
from cake_core.source import SourceFile
from cake_core.verify import BUILTIN_PASSES, sync
from cake_core.verify.unroll import concrete_sizes

ROOT = Path(__file__).resolve().parent.parent

RAW = '''BM, BN, BK, STAGES = 128, 256, 64, 4
M, N, K = dim("M"), dim("N"), dim("K", multiple_of=64)

@kernel(arch="sm_90a", grid=(cdiv(M, BM), cdiv(N, BN)), warps=12)
def gemm(A: Tensor[bf16, (M, K)], B: Tensor[bf16, (N, K)], C: Tensor[bf16, (M, N)]):
    sa = smem(bf16, (STAGES, BM, BK), layout=swizzle(128))
    sb = smem(bf16, (STAGES, BN, BK), layout=swizzle(128))
    full = mbarrier(count=1, n=STAGES)
    empty = mbarrier(count=8, n=STAGES)
    fence_barrier_init()
    syncthreads()
    with role("load", warps=range(0, 4), regs=40):
        for k in range(cdiv(K, BK)):
            s = k % STAGES
            empty[s].wait((k // STAGES + 1) % 2)
            full[s].expect_tx(BM * BK * 2 + BN * BK * 2)
            tma_load(sa[s], A.tile((BM, BK), (block.x, k)), full[s])
            tma_load(sb[s], B.tile((BN, BK), (block.y, k)), full[s])
    with role("mma", warps=range(4, 12), regs=232):
        acc = fragment(f32, (BM, BN), layout=wgmma_acc)
        for k in range(cdiv(K, BK)):
            s = k % STAGES
            full[s].wait((k // STAGES) % 2)
            wgmma(acc, sa[s], sb[s].T)
            wgmma_wait(0)
            empty[s].arrive(per="warp")
        store(C.tile((BM, BN), (block.x, block.y)), cast(acc, bf16))
'''

SM80 = '''BM, BN, BK, STAGES = 128, 128, 32, 3
WM, WN = 64, 64
M = dim("M")
N = dim("N", multiple_of=8)
K = dim("K", multiple_of=8)

@kernel(arch="sm_80", grid=(cdiv(M, BM), cdiv(N, BN)), warps=4)
def gemm_sm80(A: Tensor[f16, (M, K)], B: Tensor[f16, (N, K)], C: Tensor[f16, (M, N)]):
    sa = smem(f16, (STAGES, BM, BK), layout=swizzle(64))
    sb = smem(f16, (STAGES, BN, BK), layout=swizzle(64))
    acc = fragment(f32, (WM, WN), layout=mma_acc)
    wm, wn = warp.id // 2, warp.id % 2
    ktiles = cdiv(K, BK)
    for p in range(STAGES - 1):
        cp_async(sa[p], A.tile((BM, BK), (block.x, p)))
        cp_async(sb[p], B.tile((BN, BK), (block.y, p)))
        cp_async_commit()
    for k in range(ktiles):
        cp_async_wait(STAGES - 2)
        syncthreads()
        nxt = k + STAGES - 1
        cp_async(sa[nxt % STAGES], A.tile((BM, BK), (block.x, nxt)))
        cp_async(sb[nxt % STAGES], B.tile((BN, BK), (block.y, nxt)))
        cp_async_commit()
        s = k % STAGES
        for kk in range(BK // 16):
            a = ldmatrix(sa[s].tile((WM, 16), (wm, kk)))
            b = ldmatrix(sb[s].tile((WN, 16), (wn, kk)).T)
            mma_sync(acc, a, b)
    cp_async_wait(0)
    store(C.tile((WM, WN), (block.x * 2 + wm, block.y * 2 + wn)), cast(acc, f16))
'''

EPILOGUE = '''BM, BN, TILES = 64, 128, 4
M, N = dim("M", multiple_of=256), dim("N", multiple_of=128)

@kernel(arch="sm_90a", grid=(cdiv(M, BM * TILES), cdiv(N, BN)), warps=8)
def scale(X: Tensor[bf16, (M, N)], Y: Tensor[bf16, (M, N)]):
    sc = smem(bf16, (BM, BN), layout=row_major)
    with role("compute", warps=range(0, 4)):
        for t in range(TILES):
            x = load(X.tile((BM, BN), (block.x * TILES + t, block.y)))
            y = cast(cast(x, f32) * 0.5, bf16)
            if t > 0:
                barrier_sync(2, 8)
            store(sc, y)
            fence_proxy_async()
            barrier_arrive(1, 8)
    with role("store", warps=range(4, 8)):
        for t in range(TILES):
            barrier_sync(1, 8)
            tma_store(Y.tile((BM, BN), (block.x * TILES + t, block.y)), sc)
            tma_store_wait(0)
            barrier_arrive(2, 8)
'''

CLEAN = {"gemm": GEMM, "raw": RAW, "sm80": SM80, "epilogue": EPILOGUE}


def edit(text: str, old: str, new: str) -> str:
    assert old in text, f"template lacks {old!r}"
    return text.replace(old, new, 1)


def run(text: str) -> list[Diagnostic]:
    result = check_text(text, "k.cake", passes=[sync.check])
    return result.diagnostics


def only(text: str, code: str) -> Diagnostic:
    found = run(text)
    assert [d.code for d in found] == [code], render_text(found, {"k.cake": _src(text)})
    return found[0]


def _src(text: str) -> SourceFile:
    return check_text(text, "k.cake", passes=[]).source


def line_of(text: str, needle: str) -> int:
    """The 1-based line of the first line containing `needle`."""
    for i, line in enumerate(text.split("\n"), 1):
        if needle in line:
            return i
    raise AssertionError(needle)


def fixed(text: str, d: Diagnostic) -> str:
    assert d.fixes, "expected a fix"
    return apply_edits(text, d.fixes[0].edits)


# --- clean kernels ---
def test_sync_is_a_builtin_pass() -> None:
    assert "sync" in BUILTIN_PASSES


@pytest.mark.parametrize("name", sorted(CLEAN))
def test_templates_are_clean(name: str) -> None:
    assert run(CLEAN[name]) == []


EXAMPLES = sorted((ROOT / "examples").glob("*.cake"))


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_examples_have_no_sync_findings(path: Path) -> None:
    assert run(path.read_text(encoding="utf-8")) == []


@pytest.mark.parametrize("path", GEMM_VARIANTS, ids=lambda p: p.name)
def test_gemm_variants_have_no_sync_findings(path: Path) -> None:
    assert run(path.read_text(encoding="utf-8")) == []


def test_loops_are_unrolled_past_two_laps_of_the_ring() -> None:
    program = check_text(GEMM, "k.cake", passes=[]).program
    assert program is not None
    sizes = concrete_sizes(program.kernels[0])
    assert sizes["$K"] // 64 >= 2 * 4 + 1


# --- CK301 pipeline protocol ---
def test_missing_commit_is_reported_at_the_acquire_with_a_fix() -> None:
    bad = edit(GEMM, "            ab.commit()\n", "")
    d = only(bad, "CK301")
    assert d.span.start.line + 1 == line_of(bad, "s = ab.acquire()")
    assert "commit()` is missing" in d.message
    assert d.fixes[0].applicability is Applicability.UNSAFE
    assert run(fixed(bad, d)) == []


def test_release_on_one_branch_is_reported_at_the_if() -> None:
    bad = edit(GEMM, "            wgmma(acc, sa[s], sb[s].T)\n            wgmma_wait(0)\n"
               "            ab.release()\n",
               "            if block.y == 0:\n                wgmma(acc, sa[s], sb[s].T)\n"
               "                wgmma_wait(0)\n                ab.release()\n")
    d = only(bad, "CK301")
    assert d.span.start.line + 1 == line_of(bad, "if block.y == 0:")
    assert any("one branch only" in r.message for r in d.related)


def test_two_acquires_before_a_commit() -> None:
    bad = edit(GEMM, "            tma_load(sb[s], B", "            t = ab.acquire()\n"
               "            tma_load(sb[t], B")
    d = only(bad, "CK301")
    assert d.span.start.line + 1 == line_of(bad, "t = ab.acquire()")
    assert d.related and d.related[0].span.start.line + 1 == line_of(bad, "s = ab.acquire()")


def test_release_without_a_wait() -> None:
    bad = edit(GEMM, "            s = ab.wait()\n", "            s = ab.wait()\n"
               "            ab.release()\n")
    assert "no stage to release" in only(bad, "CK301").message or \
        "gives back" in only(bad, "CK301").message


def test_release_of_the_previous_stage_is_balanced_over_the_loop() -> None:
    ok = edit(GEMM, "            wgmma_wait(0)\n            ab.release()\n",
              "            wgmma_wait(1)\n            if k > 0:\n                ab.release()\n")
    ok = edit(ok, "        store(C.tile", "        wgmma_wait(0)\n        ab.release()\n"
              "        store(C.tile")
    assert run(ok) == []


def test_an_iteration_dependent_imbalance_is_found_on_the_unrolled_loop() -> None:
    bad = edit(GEMM, "            s = ab.acquire()\n", "            if k % 2 == 0:\n"
               "                s = ab.acquire()\n")
    d = only(bad, "CK301")
    assert d.span.start.line + 1 == line_of(bad, "ab.commit()")
    assert "k = 1" in d.message


# --- CK302 expect_tx bytes ---
def test_expect_tx_short_by_one_tile_has_the_computed_fix() -> None:
    bad = edit(RAW, "expect_tx(BM * BK * 2 + BN * BK * 2)", "expect_tx(BM * BK * 2)")
    d = only(bad, "CK302")
    assert "16384" in d.message and "49152" in d.message
    assert d.fixes[0].applicability is Applicability.SAFE
    assert d.fixes[0].edits[0].new_text == "49152"
    assert run(fixed(bad, d)) == []


def test_expect_tx_too_large_hangs() -> None:
    bad = edit(RAW, "expect_tx(BM * BK * 2 + BN * BK * 2)",
               "expect_tx(2 * BM * BK * 2 + BN * BK * 2)")
    assert "never completes" in only(bad, "CK302").message


def test_copies_into_an_unarmed_barrier() -> None:
    bad = edit(RAW, "            full[s].expect_tx(BM * BK * 2 + BN * BK * 2)\n",
               "            full[s].arrive()\n")
    d = only(bad, "CK302")
    assert d.span.start.line + 1 == line_of(bad, "tma_load(sa[s]")
    assert d.fixes[0].edits[0].new_text.strip() == "full[s].expect_tx(49152)"


# --- CK303 arrival counts ---
def test_count_larger_than_the_arrivals_hangs() -> None:
    bad = edit(RAW, "full = mbarrier(count=1", "full = mbarrier(count=2")
    d = only(bad, "CK303")
    assert d.span.start.line + 1 == line_of(bad, "full = mbarrier")
    assert "never completes" in d.message
    assert run(fixed(bad, d)) == []


def test_arrive_count_argument_is_counted() -> None:
    ok = edit(RAW, "empty = mbarrier(count=8", "empty = mbarrier(count=16")
    ok = edit(ok, 'empty[s].arrive(per="warp")', 'empty[s].arrive(count=2, per="warp")')
    assert run(ok) == []


def test_a_waited_barrier_nobody_arrives_on() -> None:
    bad = edit(RAW, '            empty[s].arrive(per="warp")\n', "")
    d = only(bad, "CK303")
    assert "no role arrives on" in d.message
    # the orphan wait is the bug: reported there, with the declaration as related information
    assert d.span.start.line + 1 == line_of(bad, "empty[s].wait(")
    assert [r.span.start.line + 1 for r in d.related] == [line_of(bad, "empty = mbarrier")]


def test_a_first_wait_with_parity_one_does_not_wait() -> None:
    """Parity 1 on a fresh barrier returns at once: said so, at the wait."""
    bad = edit(RAW, "full[s].wait((k // STAGES) % 2)", "full[s].wait((k // STAGES + 1) % 2)")
    d = only(bad, "CK312")
    assert "first wait" in d.message and "does not wait for phase 0" in d.message
    assert d.span.start.line + 1 == line_of(bad, "full[s].wait(")


# --- CK304 stage spans ---
def test_producer_write_after_commit() -> None:
    bad = edit(GEMM, "            tma_load(sb[s], B.tile((BN, BK), (block.y, k)), ab)\n"
               "            ab.commit()\n",
               "            ab.commit()\n"
               "            tma_load(sb[s], B.tile((BN, BK), (block.y, k)), ab)\n")
    d = only(bad, "CK304")
    assert d.span.start.line + 1 == line_of(bad, "tma_load(sb[s]")
    assert d.related[0].span.start.line + 1 == line_of(bad, "ab.commit()")


def test_stage_of_another_pipeline() -> None:
    bad = edit(GEMM, 'ab = pipeline(stages=STAGES, producer="load", consumer="mma")',
               'ab = pipeline(stages=STAGES, producer="load", consumer="mma")\n'
               '    cd = pipeline(stages=STAGES, producer="load", consumer="mma")')
    bad = edit(bad, "            ab.commit()\n", "            ab.commit()\n"
               "            u = cd.acquire()\n            cd.commit()\n")
    bad = edit(bad, "            s = ab.wait()\n", "            s = ab.wait()\n"
               "            u = cd.wait()\n")
    bad = edit(bad, "wgmma(acc, sa[s], sb[s].T)", "wgmma(acc, sa[u], sb[s].T)")
    bad = edit(bad, "            ab.release()\n", "            ab.release()\n"
               "            cd.release()\n")
    d = only(bad, "CK304")
    assert "stage of `cd`" in d.message


def test_constant_index_outside_the_stage() -> None:
    bad = edit(GEMM, "wgmma(acc, sa[s], sb[s].T)", "wgmma(acc, sa[0], sb[s].T)")
    assert "outside any `ab` stage" in only(bad, "CK304").message


# --- CK305 consumers that never release ---
def test_consumer_that_never_takes_part() -> None:
    bad = edit(GEMM, 'consumer="mma"', 'consumer=("mma", "epi")')
    bad = edit(bad, "        store(C.tile", "        barrier_arrive(1, 12)\n        store(C.tile")
    bad += '''    with role("epi", warps=range(12, 16)):
        barrier_sync(1, 12)
'''
    bad = edit(bad, "warps=12)", "warps=16)")
    d = only(bad, "CK305")
    assert "never waits for or releases" in d.message


def test_consumer_that_waits_but_never_releases_has_a_fix() -> None:
    bad = edit(GEMM, "            ab.release()\n", "")
    d = only(bad, "CK305")
    assert d.span.start.line + 1 == line_of(bad, "s = ab.wait()")
    assert run(fixed(bad, d)) == []


# --- CK306 wgmma waits ---
def test_accumulator_cast_before_the_wait() -> None:
    bad = edit(GEMM, "            wgmma_wait(0)\n            ab.release()\n",
               "            wgmma_wait(1)\n            if k > 0:\n                ab.release()\n")
    bad += "        wgmma_wait(0)\n        ab.release()\n"
    d = only(bad, "CK306")
    assert d.span.start.line + 1 == line_of(bad, "cast(acc, bf16)")
    assert "reads `acc`" in d.message
    assert d.fixes[0].applicability is Applicability.SAFE
    assert d.fixes[0].edits[0].new_text.strip() == "wgmma_wait(0)"
    assert run(fixed(bad, d)) == []


def test_reading_the_accumulator_while_a_wgmma_is_pending() -> None:
    bad = edit(GEMM, "            wgmma_wait(0)\n            ab.release()\n",
               "            wgmma_wait(0)\n            ab.release()\n"
               "        wgmma(acc, sa[0], sb[0].T)\n" if False else
               "            wgmma_wait(0)\n            ab.release()\n")
    bad = edit(bad, "        store(C.tile((BM, BN), (block.x, block.y)), cast(acc, bf16))",
               "        acc2 = fragment(f32, (BM, BN), layout=wgmma_acc)\n"
               "        store(C.tile((BM, BN), (block.x, block.y)), cast(acc + acc2, bf16))")
    assert run(bad) == []  # a fresh fragment has no wgmma pending


def test_wgmma_wait_one_leaves_the_newest_group_pending() -> None:
    bad = edit(GEMM, "            wgmma_wait(0)\n            ab.release()\n",
               "            wgmma_wait(1)\n            ab.release()\n")
    d = only(bad, "CK306")
    assert d.span.start.line + 1 == line_of(bad, "            ab.release()")
    assert "wgmma_wait(0)" in d.message


# --- CK306 across loop iterations: double-buffered accumulators ---
DBUF = (ROOT / "examples" / "kmeans_assign_sm90_dbuf.cake").read_text(encoding="utf-8")
"""Two accumulators in turn: chunk j + 1 is issued into one, `wgmma_wait(2)` completes the
other (chunk j) while j + 1's two groups stay in flight, then chunk j's stage is released."""

_WAIT_EVEN = "wgmma_wait(2)            # d0 (chunk 2 * p)"
_WAIT_ODD = "wgmma_wait(2)            # d1 (chunk 2 * p + 1)"


def test_loop_carried_stage_and_accumulator_are_the_latest_definition() -> None:
    """`scn[s0]` and `d0` at the top of the body mean the definitions before the loop on
    the first iteration and those at the bottom of the body after it: no stage is seen as
    released early, and the accumulator read is checked against the right wgmma."""
    assert run(DBUF) == []


def test_too_shallow_wait_in_a_double_buffer_is_one_finding_per_wait() -> None:
    bad = edit(DBUF, _WAIT_EVEN, _WAIT_EVEN.replace("(2)", "(3)"))
    bad = edit(bad, _WAIT_ODD, _WAIT_ODD.replace("(2)", "(3)"))
    found = run(bad)
    assert [d.code for d in found] == ["CK306", "CK306"], render_text(found, {"k.cake": _src(bad)})
    assert [d.span.start.line + 1 for d in found] == [
        line_of(bad, "chunks.release()          # the stage of chunk 2 * p"),
        line_of(bad, "chunks.release()          # the stage of chunk 2 * p + 1")]
    for d, wait in zip(found, (_WAIT_EVEN, _WAIT_ODD), strict=True):
        assert "n <= 2" in d.message
        assert any(r.span.start.line + 1 == line_of(bad, wait.replace("(2)", "(3)"))
                   for r in d.related)
        assert d.fixes[0].applicability is Applicability.SAFE
        assert d.fixes[0].edits[0].new_text == "2"  # deepens the wait, adds no second one
    assert run(apply_edits(bad, [e for d in found for e in d.fixes[0].edits])) == []


def test_reading_the_older_accumulator_with_no_wait_at_all() -> None:
    bad = edit(DBUF, "            " + _WAIT_EVEN + " is complete\n", "")
    d = only(bad, "CK306")
    release = "chunks.release()          # the stage of chunk 2 * p"
    assert d.span.start.line + 1 == line_of(bad, release)
    assert run(fixed(bad, d)) == []


def test_rebinding_an_accumulator_a_wgmma_still_writes() -> None:
    """`acc = fragment(...)` zero-fills registers the previous iteration's wgmma, kept in
    flight by `wgmma_wait(1)`, is still writing."""
    bad = edit(GEMM, "        acc = fragment(f32, (BM, BN), layout=wgmma_acc)\n", "")
    bad = edit(bad, "            wgmma(acc, sa[s], sb[s].T)\n            wgmma_wait(0)\n"
               "            ab.release()\n",
               "            acc = fragment(f32, (BM, BN), layout=wgmma_acc)\n"
               "            wgmma(acc, sa[s], sb[s].T)\n            wgmma_wait(0)\n"
               "            ab.release()\n")
    assert run(bad) == []  # a fresh accumulator per iteration, drained: fine
    bad = edit(bad, "            wgmma_wait(0)\n            ab.release()\n",
               "            if k > 0:\n                wgmma_wait(1)\n"
               "                ab.release()\n")
    bad += "        wgmma_wait(0)\n        ab.release()\n"
    d = run(bad)[0]
    assert d.code == "CK306" and "re-binds `acc`" in d.message, d.message
    assert d.span.start.line + 1 == line_of(bad, "            acc = fragment(")


# --- CK307 cp.async groups ---
def test_wait_that_leaves_the_needed_group_in_flight_has_a_counted_fix() -> None:
    bad = edit(SM80, "cp_async_wait(STAGES - 2)", "cp_async_wait(STAGES - 1)")
    d = only(bad, "CK307")
    assert d.span.start.line + 1 == line_of(bad, "a = ldmatrix")
    assert d.fixes[0].edits[0].new_text == "1"
    assert run(fixed(bad, d)) == []


def test_read_without_any_wait() -> None:
    bad = edit(SM80, "        cp_async_wait(STAGES - 2)\n", "")
    assert "leaves" in only(bad, "CK307").message or "no `cp_async_wait`" in \
        only(bad, "CK307").message


def test_uncommitted_group_is_not_complete() -> None:
    bad = edit(SM80, "        cp_async_commit()\n    for k", "    for k")
    assert "not even committed" in only(bad, "CK307").message or \
        "in flight" in only(bad, "CK307").message


def test_missing_barrier_after_the_wait_has_a_fix_after_the_wait() -> None:
    bad = edit(SM80, "        cp_async_wait(STAGES - 2)\n        syncthreads()\n",
               "        cp_async_wait(STAGES - 2)\n")
    d = only(bad, "CK307")
    assert "each thread waits only for its own copies" in d.message
    repaired = fixed(bad, d)
    assert repaired == SM80
    assert run(repaired) == []


# --- CK308 races ---
def test_loop_back_barrier_missing_in_a_double_buffer() -> None:
    bad = edit(SM80, "        cp_async_wait(STAGES - 2)\n        syncthreads()\n", "")
    bad = edit(bad, "        s = k % STAGES\n", "        cp_async_wait(STAGES - 1)\n"
               "        syncthreads()\n        s = k % STAGES\n")
    d = only(bad, "CK308")
    assert d.span.start.line + 1 == line_of(bad, "cp_async(sa[nxt % STAGES]")
    assert d.related[0].span.start.line + 1 == line_of(bad, "a = ldmatrix")


def test_staging_buffer_reused_while_its_tma_store_runs() -> None:
    text = '''BM, BN, TILES = 64, 128, 4
M, N = dim("M", multiple_of=256), dim("N", multiple_of=128)

@kernel(arch="sm_90a", grid=(cdiv(M, BM * TILES), cdiv(N, BN)), warps=4)
def scale(X: Tensor[bf16, (M, N)], Y: Tensor[bf16, (M, N)]):
    sc = smem(bf16, (BM, BN), layout=row_major)
    for t in range(TILES):
        x = load(X.tile((BM, BN), (block.x * TILES + t, block.y)))
        tma_store_wait(0)
        syncthreads()
        store(sc, cast(cast(x, f32) * 0.5, bf16))
        fence_proxy_async()
        syncthreads()
        tma_store(Y.tile((BM, BN), (block.x * TILES + t, block.y)), sc)
    tma_store_wait(0)
'''
    assert run(text) == []
    # the wait blocks the issuing thread only: the others need the barrier after it
    racy = edit(text, "        tma_store_wait(0)\n        syncthreads()\n",
                "        tma_store_wait(0)\n")
    assert only(racy, "CK316").span.start.line + 1 == line_of(racy, "store(sc, cast")
    bad = edit(text, "        tma_store_wait(0)\n        syncthreads()\n", "")
    d = only(bad, "CK308")
    assert d.span.start.line + 1 == line_of(bad, "store(sc, cast")
    assert run(fixed(bad, d)) == []


def test_cross_role_race_names_both_roles() -> None:
    bad = edit(EPILOGUE, "            barrier_sync(1, 8)\n", "")
    d = only(bad, "CK308")
    assert "role 'store'" in d.message and "role 'compute'" in d.message
    assert d.related and d.related[0].span.start.line + 1 == line_of(bad, "store(sc, y)")


def test_tma_data_read_before_its_barrier_is_waited() -> None:
    bad = edit(RAW, "            full[s].wait((k // STAGES) % 2)\n", "")
    d = only(bad, "CK308")
    assert "TMA copy into it" in d.message


# --- CK309 proxy fences ---
def test_tma_store_of_another_roles_unfenced_writes() -> None:
    bad = edit(EPILOGUE, "            fence_proxy_async()\n", "")
    d = only(bad, "CK309")
    assert d.span.start.line + 1 == line_of(bad, "tma_store(")
    assert "role 'compute'" in d.message


def test_wgmma_reading_cp_async_data_needs_a_fence() -> None:
    text = '''BM, BN, BK = 64, 64, 64
M, N, K = dim("M"), dim("N", multiple_of=8), dim("K", multiple_of=64)

@kernel(arch="sm_90a", grid=(cdiv(M, BM), cdiv(N, BN)), warps=4)
def g(A: Tensor[bf16, (M, K)], B: Tensor[bf16, (N, K)], C: Tensor[bf16, (M, N)]):
    sa = smem(bf16, (BM, BK), layout=swizzle(128))
    sb = smem(bf16, (BN, BK), layout=swizzle(128))
    acc = fragment(f32, (BM, BN), layout=wgmma_acc)
    for k in range(cdiv(K, BK)):
        cp_async(sa, A.tile((BM, BK), (block.x, k)))
        cp_async(sb, B.tile((BN, BK), (block.y, k)))
        cp_async_commit()
        cp_async_wait(0)
        fence_proxy_async()
        syncthreads()
        wgmma(acc, sa, sb.T)
        wgmma_wait(0)
        syncthreads()
    store(C.tile((BM, BN), (block.x, block.y)), cast(acc, bf16))
'''
    assert run(text) == []
    d = only(edit(text, "        fence_proxy_async()\n", ""), "CK309")
    assert d.fixes[0].applicability is Applicability.SAFE
    # the fence after the barrier covers each thread's own writes only: too late for the
    # other warps' copies the wgmma reads; the safe fix moves it back above the barrier
    late = edit(text, "        fence_proxy_async()\n        syncthreads()\n        wgmma(",
                "        syncthreads()\n        fence_proxy_async()\n        wgmma(")
    d = only(late, "CK309")
    assert d.span.start.line + 1 == line_of(late, "wgmma(acc")
    assert {r.span.start.line + 1 for r in d.related} >= {line_of(late, "fence_proxy_async()")}
    assert d.fixes[0].applicability is Applicability.SAFE and fixed(late, d) == text


# --- CK310 barrier initialisation ---
def test_missing_fence_and_sync_after_mbarrier_init() -> None:
    bad = edit(RAW, "    fence_barrier_init()\n    syncthreads()\n", "")
    d = only(bad, "CK310")
    # at the first use, where the uninitialised barrier is touched; the creation is related
    assert d.span.start.line + 1 == line_of(bad, "empty[s].wait(")
    assert [r.span.start.line + 1 for r in d.related] == [line_of(bad, "empty = mbarrier")]
    assert fixed(bad, d) == RAW


def test_fence_without_syncthreads_gets_only_the_sync() -> None:
    bad = edit(RAW, "    fence_barrier_init()\n    syncthreads()\n", "    fence_barrier_init()\n")
    d = only(bad, "CK310")
    assert fixed(bad, d) == RAW


# --- CK311 deadlocks ---
def test_syncthreads_inside_a_role_deadlocks_with_the_finished_roles() -> None:
    bad = edit(GEMM, "        store(C.tile", "        syncthreads()\n        store(C.tile")
    d = only(bad, "CK311")
    assert d.span.start.line + 1 == line_of(bad, "syncthreads()")
    assert "role 'load' has already finished" in d.message
    assert d.fixes == ()


def test_named_barrier_cycle_is_one_finding_naming_both_roles() -> None:
    bad = edit(EPILOGUE, "            if t > 0:\n                barrier_sync(2, 8)\n",
               "            barrier_sync(2, 8)\n")
    d = only(bad, "CK311")
    assert "role 'compute'" in d.message and "role 'store'" in d.message
    lines = {r.span.start.line + 1 for r in d.related} | {d.span.start.line + 1}
    assert lines == {line_of(bad, "barrier_sync(2, 8)"), line_of(bad, "barrier_sync(1, 8)")}


PINGPONG = '''BM, BN, BK, STAGES = 128, 128, 64, 4
M, N, K = dim("M", multiple_of=256), dim("N", multiple_of=128), dim("K", multiple_of=64)

@kernel(arch="sm_90a", grid=(cdiv(M, BM), cdiv(N, BN)), warps=12)
def gemm(A: Tensor[bf16, (M, K)], B: Tensor[bf16, (N, K)], C: Tensor[bf16, (M, N)]):
    sa = smem(bf16, (STAGES, BM, BK), layout=swizzle(128))
    sb = smem(bf16, (STAGES, BN, BK), layout=swizzle(128))
    ab = pipeline(stages=STAGES, producer="load", consumer=("mma0", "mma1"))
    with role("load", warps=range(0, 4), regs=40):
        for k in range(cdiv(K, BK)):
            s = ab.acquire()
            tma_load(sa[s], A.tile((BM, BK), (block.x, k)), ab)
            tma_load(sb[s], B.tile((BN, BK), (block.y, k)), ab)
            ab.commit()
    with role("mma0", warps=range(4, 8), regs=232):
        acc = fragment(f32, (64, BN), layout=wgmma_acc)
        for k in range(cdiv(K, BK)):
            s = ab.wait()
            barrier_sync(2, 8)
            wgmma(acc, sa[s].tile((64, BK), (0, 0)), sb[s].T)
            barrier_arrive(3, 8)
            wgmma_wait(0)
            ab.release()
        store(C.tile((64, BN), (2 * block.x, block.y)), cast(acc, bf16))
    with role("mma1", warps=range(8, 12), regs=232):
        acc = fragment(f32, (64, BN), layout=wgmma_acc)
        barrier_arrive(2, 8)
        for k in range(cdiv(K, BK)):
            s = ab.wait()
            barrier_sync(3, 8)
            wgmma(acc, sa[s].tile((64, BK), (1, 0)), sb[s].T)
            if k + 1 < cdiv(K, BK):
                barrier_arrive(2, 8)
            wgmma_wait(0)
            ab.release()
        store(C.tile((64, BN), (2 * block.x + 1, block.y)), cast(acc, bf16))
'''


def test_ping_pong_consumers_are_clean() -> None:
    assert run(PINGPONG) == []


def test_roles_blocked_behind_a_cycle_are_noted_not_reported() -> None:
    bad = edit(PINGPONG, "        barrier_arrive(2, 8)\n        for k", "        for k")
    d = only(bad, "CK311")
    assert "role 'mma0'" in d.message and "role 'mma1'" in d.message
    assert "role 'load'" not in d.message
    assert any("role 'load' is blocked as well" in n for n in d.notes)


def test_empty_barrier_first_wait_with_parity_zero() -> None:
    bad = edit(RAW, "(k // STAGES + 1) % 2", "(k // STAGES) % 2")
    d = only(bad, "CK311")
    assert "role 'load'" in d.message and "role 'mma'" in d.message


def test_consumer_running_longer_than_the_producer() -> None:
    bad = edit(GEMM, "        for k in range(cdiv(K, BK)):\n            s = ab.wait()",
               "        for k in range(cdiv(K, BK) + 1):\n            s = ab.wait()")
    d = only(bad, "CK311")
    assert "has already finished" in d.message


# --- CK312 parities ---
def test_ring_parity_from_the_loop_index_has_the_ring_fix() -> None:
    bad = edit(RAW, "full[s].wait((k // STAGES) % 2)", "full[s].wait(k % 2)")
    d = only(bad, "CK312")
    assert d.fixes[0].edits[0].new_text == "(k // STAGES) % 2"
    assert run(fixed(bad, d)) == []


def test_free_starting_ring_gets_the_plus_one_fix() -> None:
    bad = edit(RAW, "empty[s].wait((k // STAGES + 1) % 2)", "empty[s].wait((k + 1) % 2)")
    d = only(bad, "CK312")
    assert d.fixes[0].edits[0].new_text == "(k // STAGES + 1) % 2"
    assert run(fixed(bad, d)) == []


def test_barrier_completing_twice_per_wait_drifts() -> None:
    text = '''BM, BN, BK = 64, 64, 64
M, N, K = dim("M"), dim("N"), dim("K", multiple_of=64)

@kernel(arch="sm_90a", grid=(cdiv(M, BM), cdiv(N, BN)), warps=8)
def g(A: Tensor[bf16, (M, K)], B: Tensor[bf16, (N, K)], C: Tensor[bf16, (M, N)]):
    sa = smem(bf16, (BM, BK), layout=swizzle(128))
    sb = smem(bf16, (BN, BK), layout=swizzle(128))
    full = mbarrier(count=1)
    ea = mbarrier(count=1)
    eb = mbarrier(count=1)
    fence_barrier_init()
    syncthreads()
    with role("load", warps=range(0, 4)):
        for k in range(cdiv(K, BK)):
            ea.wait((k + 1) % 2)
            full.expect_tx(BM * BK * 2)
            tma_load(sa, A.tile((BM, BK), (block.x, k)), full)
            eb.wait((k + 1) % 2)
            full.expect_tx(BN * BK * 2)
            tma_load(sb, B.tile((BN, BK), (block.y, k)), full)
    with role("mma", warps=range(4, 8)):
        acc = fragment(f32, (BM, BN), layout=wgmma_acc)
        for k in range(cdiv(K, BK)):
            full.wait(k % 2)
            wgmma(acc, sa, sb.T)
            wgmma_wait(0)
            ea.arrive()
            eb.arrive()
        store(C.tile((BM, BN), (block.x, block.y)), cast(acc, bf16))
'''
    d = only(text, "CK312")
    assert "completes more often than it is waited on" in d.message
    assert d.span.start.line + 1 == line_of(text, "full.wait(k % 2)")


def test_a_tail_peeled_by_parity_is_checked_on_both_sides() -> None:
    """`if (K // BN) % 2 == 0:` takes one side under one K: the agents are walked again
    with K one multiple larger, so a bug in the side the first K skips is found too."""
    tail = "wgmma_wait(2)            # d0 (chunk K // BN - 2)"
    bad = edit(DBUF, tail, tail.replace("(2)", "(3)"))
    d = only(bad, "CK306")
    assert d.span.start.line + 1 == line_of(bad, "chunks.release()          # the stage of "
                                            "chunk K // BN - 2")
    assert run(fixed(bad, d)) == []


# --- CK319, CK320 named barrier counts ---
KMEANS_PINGPONG = (ROOT / "examples" / "kmeans_assign_sm90_pingpong.cake").read_text(
    encoding="utf-8")


def test_kmeans_ping_pong_is_clean() -> None:
    assert run(KMEANS_PINGPONG) == []


def test_ping_pong_turn_never_handed_over_deadlocks() -> None:
    """dist0 issues and never lets dist1 take its turn."""
    bad = edit(KMEANS_PINGPONG, "            barrier_arrive(WG1_TURN, 8)     # dist1 may issue "
               "chunk j\n", "")
    d = only(bad, "CK311")
    assert "role 'dist1' waits at `barrier_sync(WG1_TURN, 8)`" in d.message


def test_ping_pong_both_waiting_first_deadlocks() -> None:
    bad = edit(KMEANS_PINGPONG, "            if j > 0:\n                barrier_sync(WG0_TURN, 8)",
               "            if j >= 0:\n                barrier_sync(WG0_TURN, 8)")
    d = only(bad, "CK311")
    assert "role 'dist0'" in d.message and "role 'dist1'" in d.message


def test_arrival_counting_only_its_own_warps_orders_nothing() -> None:
    bad = KMEANS_PINGPONG.replace("WG1_TURN, 8)", "WG1_TURN, 4)")
    d = only(bad, "CK320")
    assert "`barrier_arrive(1, 4)` by role 'dist0' (4 warps)" in d.message
    assert d.span.start.line + 1 == line_of(bad, "barrier_arrive(WG1_TURN, 4)")


def test_arrivals_of_successive_turns_that_nobody_waits_for_order_nothing() -> None:
    """dist1 never syncs on its turn: two of dist0's 4-warp arrivals fill the 8-warp count,
    so nothing deadlocks and nothing races, yet the two roles no longer take turns."""
    sync = "            barrier_sync(WG1_TURN, 8)"
    assert KMEANS_PINGPONG.count(sync) == 1
    bad = KMEANS_PINGPONG.replace(sync, "            pass")
    d = only(bad, "CK320")
    assert "completes with 2 `barrier_arrive`s and no `barrier_sync`" in d.message
    assert d.span.start.line + 1 == line_of(bad, "barrier_arrive(WG1_TURN, 8)")


def test_sides_naming_different_counts() -> None:
    bad = edit(KMEANS_PINGPONG, "barrier_arrive(WG1_TURN, 8)", "barrier_arrive(WG1_TURN, 12)")
    d = only(bad, "CK319")
    assert "counted as 8 warps here by role 'dist1' but as 12 warps by role 'dist0'" \
        in d.message
    assert d.related[0].span.start.line + 1 == line_of(bad, "barrier_arrive(WG1_TURN, 12)")
