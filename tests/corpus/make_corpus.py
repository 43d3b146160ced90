"""Write the planted-bug corpus: `NAME.cake` (one bug) and `NAME.fixed.cake` (its twin).

Each case starts from a correct kernel built from one of a few templates (warp-specialised
TMA + wgmma GEMMs with a pipeline or raw mbarriers, cp.async GEMMs on sm_80, TMA-store
epilogues, row-wise reductions), varied in tile sizes, stages, dtypes, roles and
epilogue, and plants one bug by a textual edit.  The expected line is the line the edit
puts the bug on (or the line a case names with `at=`), never what the checker says: the
corpus measures the checker, so it must not be derived from it.

The outputs are committed; rerun after editing a case:

    python tests/corpus/make_corpus.py
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent

SIZE = {"bf16": 2, "f16": 2, "f32": 4, "e4m3": 1}


@dataclass(frozen=True)
class Case:
    """One planted bug: the family it belongs to, and the edit that plants it."""

    name: str
    family: str
    code: str
    why: str
    fixed: str
    edits: tuple[tuple[str, str], ...]
    at: str | None = None  # a substring of the bad kernel on the expected line


# ---------------------------------------------------------------------------- templates


def swz(row_bytes: int) -> str:
    return f"swizzle({min(row_bytes, 128)})"


def ws_gemm(bm: int = 128, bn: int = 256, bk: int = 64, stages: int = 4, dt: str = "bf16",
            consumers: int = 8, name: str = "gemm", epilogue: str = "regs",
            in_flight: int = 0) -> str:
    """Warp-specialised TMA + wgmma GEMM over a `pipeline`."""
    regs = ', regs=40' if consumers == 8 else ""
    regs_c = ', regs=232' if consumers == 8 else ""
    warps = 4 + consumers
    n_mult = ', multiple_of=8' if epilogue == "regs" else f', multiple_of={bn}'
    m_decl = 'dim("M")' if epilogue == "regs" else f'dim("M", multiple_of={bm})'
    lines = [
        f"BM, BN, BK = {bm}, {bn}, {bk}",
        f"STAGES = {stages}",
        "",
        f"M = {m_decl}",
        f"N = dim(\"N\"{n_mult})",
        "K = dim(\"K\", multiple_of=8)",
        "",
        f"@kernel(arch=\"sm_90a\", grid=(cdiv(M, BM), cdiv(N, BN)), warps={warps})",
        f"def {name}(A: Tensor[{dt}, (M, K)], B: Tensor[{dt}, (N, K)], "
        f"C: Tensor[{dt}, (M, N)]):",
        f"    sa = smem({dt}, (STAGES, BM, BK), layout={swz(bk * SIZE[dt])})",
        f"    sb = smem({dt}, (STAGES, BN, BK), layout={swz(bk * SIZE[dt])})",
    ]
    if epilogue == "tma":
        lines.append(f"    sc = smem({dt}, (BM, BN), layout=row_major)")
    lines += [
        "    ab = pipeline(stages=STAGES, producer=\"load\", consumer=\"mma\")",
        "    ktiles = cdiv(K, BK)",
        "",
        f"    with role(\"load\", warps=range(0, 4){regs}):",
        "        for k in range(ktiles):",
        "            s = ab.acquire()",
        "            tma_load(sa[s], A.tile((BM, BK), (block.x, k)), ab)",
        "            tma_load(sb[s], B.tile((BN, BK), (block.y, k)), ab)",
        "            ab.commit()",
        "",
        f"    with role(\"mma\", warps=range(4, {warps}){regs_c}):",
        "        acc = fragment(f32, (BM, BN), layout=wgmma_acc)",
    ]
    if in_flight:
        lines += [
            "        s = ab.wait()",
            "        wgmma(acc, sa[s], sb[s].T)",
            "        for k in range(1, ktiles):",
            "            s = ab.wait()",
            "            wgmma(acc, sa[s], sb[s].T)",
            "            wgmma_wait(1)",
            "            ab.release()",
            "        wgmma_wait(0)",
            "        ab.release()",
        ]
    else:
        lines += [
            "        for k in range(ktiles):",
            "            s = ab.wait()",
            "            wgmma(acc, sa[s], sb[s].T)",
            "            wgmma_wait(0)",
            "            ab.release()",
        ]
    if epilogue == "regs":
        lines.append(f"        store(C.tile((BM, BN), (block.x, block.y)), cast(acc, {dt}))")
    else:
        lines += [
            f"        store(sc, cast(acc, {dt}))",
            "        fence_proxy_async()",
            f"        barrier_sync(1, {consumers})",
            "        tma_store(C.tile((BM, BN), (block.x, block.y)), sc)",
            "        tma_store_wait(0)",
        ]
    return "\n".join(lines) + "\n"


def raw_gemm(bm: int = 128, bn: int = 256, bk: int = 64, stages: int = 4, dt: str = "bf16",
             consumers: int = 8, per: str = "warp", name: str = "gemm") -> str:
    """The same GEMM on raw mbarriers: the kernel tracks phases itself."""
    warps = 4 + consumers
    count = {"warp": consumers, "thread": consumers * 32, "role": 1}[per]
    arrive = "arrive()" if per == "role" else f"arrive(per=\"{per}\")"
    regs = ', regs=40' if consumers == 8 else ""
    regs_c = ', regs=232' if consumers == 8 else ""
    sz = SIZE[dt]
    lines = [
        f"BM, BN, BK, STAGES = {bm}, {bn}, {bk}, {stages}",
        "M, N, K = dim(\"M\"), dim(\"N\", multiple_of=8), dim(\"K\", multiple_of=64)",
        "",
        f"@kernel(arch=\"sm_90a\", grid=(cdiv(M, BM), cdiv(N, BN)), warps={warps})",
        f"def {name}(A: Tensor[{dt}, (M, K)], B: Tensor[{dt}, (N, K)], "
        f"C: Tensor[{dt}, (M, N)]):",
        f"    sa = smem({dt}, (STAGES, BM, BK), layout={swz(bk * sz)})",
        f"    sb = smem({dt}, (STAGES, BN, BK), layout={swz(bk * sz)})",
        "    full = mbarrier(count=1, n=STAGES)",
        f"    empty = mbarrier(count={count}, n=STAGES)",
        "    fence_barrier_init()",
        "    syncthreads()",
        f"    with role(\"load\", warps=range(0, 4){regs}):",
        "        for k in range(cdiv(K, BK)):",
        "            s = k % STAGES",
        "            empty[s].wait((k // STAGES + 1) % 2)",
        f"            full[s].expect_tx(BM * BK * {sz} + BN * BK * {sz})",
        "            tma_load(sa[s], A.tile((BM, BK), (block.x, k)), full[s])",
        "            tma_load(sb[s], B.tile((BN, BK), (block.y, k)), full[s])",
        f"    with role(\"mma\", warps=range(4, {warps}){regs_c}):",
        "        acc = fragment(f32, (BM, BN), layout=wgmma_acc)",
        "        for k in range(cdiv(K, BK)):",
        "            s = k % STAGES",
        "            full[s].wait((k // STAGES) % 2)",
        "            wgmma(acc, sa[s], sb[s].T)",
        "            wgmma_wait(0)",
        f"            empty[s].{arrive}",
        f"        store(C.tile((BM, BN), (block.x, block.y)), cast(acc, {dt}))",
    ]
    return "\n".join(lines) + "\n"


def cp_gemm(bm: int = 128, bn: int = 128, bk: int = 32, wm: int = 64, wn: int = 64,
            stages: int = 3, dt: str = "f16", name: str = "gemm_sm80") -> str:
    """Multistage cp.async + ldmatrix + mma.sync GEMM on sm_80."""
    gn = bn // wn
    warps = (bm // wm) * gn
    lines = [
        f"BM, BN, BK = {bm}, {bn}, {bk}",
        f"WM, WN = {wm}, {wn}",
        f"STAGES = {stages}",
        "M = dim(\"M\")",
        "N = dim(\"N\", multiple_of=8)",
        "K = dim(\"K\", multiple_of=8)",
        "",
        f"@kernel(arch=\"sm_80\", grid=(cdiv(M, BM), cdiv(N, BN)), warps={warps})",
        f"def {name}(A: Tensor[{dt}, (M, K)], B: Tensor[{dt}, (N, K)], "
        f"C: Tensor[{dt}, (M, N)]):",
        f"    sa = smem({dt}, (STAGES, BM, BK), layout={swz(bk * SIZE[dt])})",
        f"    sb = smem({dt}, (STAGES, BN, BK), layout={swz(bk * SIZE[dt])})",
        "    acc = fragment(f32, (WM, WN), layout=mma_acc)",
        f"    wm, wn = warp.id // {gn}, warp.id % {gn}",
        "    ktiles = cdiv(K, BK)",
        "    for p in range(STAGES - 1):",
        "        cp_async(sa[p], A.tile((BM, BK), (block.x, p)))",
        "        cp_async(sb[p], B.tile((BN, BK), (block.y, p)))",
        "        cp_async_commit()",
        "    for k in range(ktiles):",
        "        cp_async_wait(STAGES - 2)",
        "        syncthreads()",
        "        nxt = k + STAGES - 1",
        "        cp_async(sa[nxt % STAGES], A.tile((BM, BK), (block.x, nxt)))",
        "        cp_async(sb[nxt % STAGES], B.tile((BN, BK), (block.y, nxt)))",
        "        cp_async_commit()",
        "        s = k % STAGES",
        "        for kk in range(BK // 16):",
        "            a = ldmatrix(sa[s].tile((WM, 16), (wm, kk)))",
        "            b = ldmatrix(sb[s].tile((WN, 16), (wn, kk)).T)",
        "            mma_sync(acc, a, b)",
        "    cp_async_wait(0)",
        f"    store(C.tile((WM, WN), (block.x * {bm // wm} + wm, block.y * {gn} + wn)), "
        f"cast(acc, {dt}))",
    ]
    return "\n".join(lines) + "\n"


def tma_epi(bm: int = 64, bn: int = 128, tiles: int = 4, dt: str = "bf16",
            scale: str = "0.5", name: str = "scale") -> str:
    """An elementwise pass that stages each output tile in smem and writes it by TMA."""
    lines = [
        f"BM, BN, TILES = {bm}, {bn}, {tiles}",
        f"M, N = dim(\"M\", multiple_of={bm * tiles}), dim(\"N\", multiple_of={bn})",
        "",
        "@kernel(arch=\"sm_90a\", grid=(cdiv(M, BM * TILES), cdiv(N, BN)), warps=4)",
        f"def {name}(X: Tensor[{dt}, (M, N)], Y: Tensor[{dt}, (M, N)]):",
        f"    sc = smem({dt}, (BM, BN), layout=row_major)",
        "    with role(\"io\", warps=range(0, 4)):",
        "        for t in range(TILES):",
        "            x = load(X.tile((BM, BN), (block.x * TILES + t, block.y)))",
        f"            y = cast(cast(x, f32) * {scale}, {dt})",
        "            tma_store_wait(0)",
        "            barrier_sync(2, 4)",
        "            store(sc, y)",
        "            fence_proxy_async()",
        "            barrier_sync(1, 4)",
        "            tma_store(Y.tile((BM, BN), (block.x * TILES + t, block.y)), sc)",
        "        tma_store_wait(0)",
    ]
    return "\n".join(lines) + "\n"


def handoff(bm: int = 64, bn: int = 128, dt: str = "bf16", name: str = "handoff") -> str:
    """Two tiles through one smem buffer on raw mbarriers: `ready` carries each TMA load to
    the consumer, `freed` hands the buffer back before the second load."""
    nbytes = bm * bn * SIZE[dt]
    lines = [
        f"BM, BN = {bm}, {bn}",
        f"M, N = dim(\"M\", multiple_of={2 * bm}), dim(\"N\", multiple_of={bn})",
        "",
        "@kernel(arch=\"sm_90a\", grid=(cdiv(M, 2 * BM), cdiv(N, BN)), warps=8)",
        f"def {name}(X: Tensor[{dt}, (M, N)], Y: Tensor[{dt}, (M, N)]):",
        f"    sx = smem({dt}, (BM, BN), layout=row_major)",
        "    ready = mbarrier(count=1)",
        "    freed = mbarrier(count=4)",
        "    fence_barrier_init()",
        "    syncthreads()",
        "    with role(\"load\", warps=range(0, 4)):",
        f"        ready.expect_tx({nbytes})",
        "        tma_load(sx, X.tile((BM, BN), (2 * block.x, block.y)), ready)",
        "        freed.wait(0)",
        f"        ready.expect_tx({nbytes})",
        "        tma_load(sx, X.tile((BM, BN), (2 * block.x + 1, block.y)), ready)",
        "    with role(\"use\", warps=range(4, 8)):",
        "        ready.wait(0)",
        "        x = load(sx)",
        "        freed.arrive(per=\"warp\")",
        "        store(Y.tile((BM, BN), (2 * block.x, block.y)), x)",
        "        ready.wait(1)",
        "        x = load(sx)",
        "        store(Y.tile((BM, BN), (2 * block.x + 1, block.y)), x)",
    ]
    return "\n".join(lines) + "\n"


def one_warpgroup_gemm(bm: int = 64, bn: int = 128, bk: int = 64, dt: str = "bf16",
                       name: str = "gemm_wg") -> str:
    """One warpgroup, no roles: an elected thread loads each tile on a raw mbarrier."""
    sz = SIZE[dt]
    lines = [
        f"BM, BN, BK = {bm}, {bn}, {bk}",
        "M, N, K = dim(\"M\"), dim(\"N\", multiple_of=8), dim(\"K\", multiple_of=64)",
        "",
        "@kernel(arch=\"sm_90a\", grid=(cdiv(M, BM), cdiv(N, BN)), warps=4)",
        f"def {name}(A: Tensor[{dt}, (M, K)], B: Tensor[{dt}, (N, K)], "
        f"C: Tensor[{dt}, (M, N)]):",
        f"    sa = smem({dt}, (BM, BK), layout={swz(bk * sz)})",
        f"    sb = smem({dt}, (BN, BK), layout={swz(bk * sz)})",
        "    bar = mbarrier(count=1)",
        "    fence_barrier_init()",
        "    syncthreads()",
        "    acc = fragment(f32, (BM, BN), layout=wgmma_acc)",
        "    for k in range(cdiv(K, BK)):",
        "        with elect_one():",
        f"            bar.expect_tx(BM * BK * {sz} + BN * BK * {sz})",
        "            tma_load(sa, A.tile((BM, BK), (block.x, k)), bar)",
        "            tma_load(sb, B.tile((BN, BK), (block.y, k)), bar)",
        "        bar.wait(k % 2)",
        "        wgmma(acc, sa, sb.T)",
        "        wgmma_wait(0)",
        "        syncthreads()",
        f"    store(C.tile((BM, BN), (block.x, block.y)), cast(acc, {dt}))",
    ]
    return "\n".join(lines) + "\n"


def placed(text: str, **offsets: int) -> str:
    """Place buffers by hand: `smem(...)` of each named buffer gets `offset=`."""
    out = []
    for line in text.split("\n"):
        for buf, off in offsets.items():
            if line.startswith(f"    {buf} = smem("):
                line = line[:-1] + f", offset={off})"
        out.append(line)
    return "\n".join(out)


# ------------------------------------------------------------------------------- cases


def cases() -> list[Case]:
    out: list[Case] = []

    def add(name: str, family: str, code: str, why: str, fixed: str,
            *edits: tuple[str, str], at: str | None = None) -> None:
        out.append(Case(name, family, code, why, fixed, tuple(edits), at))

    # -- pipelines ---------------------------------------------------------------------
    g1 = ws_gemm(128, 256, 64, 4)
    g2 = ws_gemm(64, 128, 64, 6, "f16", consumers=4, name="linear")
    g3 = ws_gemm(128, 128, 64, 5, "bf16", name="gemm_128")
    g4 = ws_gemm(64, 256, 64, 4, consumers=4, name="gemm_wide", in_flight=1)
    g5 = ws_gemm(128, 128, 32, 6, "f16", name="gemm_bk32")
    add("pipe_release_in_branch", "pipelines", "CK301",
        "the stage is released only on even tiles: the producer runs out of stages",
        g2, ("            ab.release()\n",
             "            if k % 2 == 0:\n                ab.release()\n"),
        at="s = ab.wait()")
    add("pipe_two_acquires", "pipelines", "CK301",
        "a second acquire for the B tile before the first stage is committed",
        g3, ("            tma_load(sb[s], B.tile((BN, BK), (block.y, k)), ab)\n",
             "            s2 = ab.acquire()\n"
             "            tma_load(sb[s2], B.tile((BN, BK), (block.y, k)), ab)\n"),
        at="s2 = ab.acquire()")
    add("pipe_read_after_release", "pipelines", "CK304",
        "the stage is handed back before the wgmma reads it",
        g1, ("            wgmma(acc, sa[s], sb[s].T)\n            wgmma_wait(0)\n"
             "            ab.release()\n",
             "            ab.release()\n            wgmma(acc, sa[s], sb[s].T)\n"
             "            wgmma_wait(0)\n"),
        at="wgmma(acc, sa[s], sb[s].T)\n            wgmma_wait(0)\n        store")
    add("pipe_never_released", "pipelines", "CK305",
        "the consumer waits for every stage and never releases one",
        g5, ("            wgmma_wait(0)\n            ab.release()\n",
             "            wgmma_wait(0)\n"),
        at="s = ab.wait()")
    add("pipe_release_before_wgmma_wait", "pipelines", "CK306",
        "the stage is released while its wgmma may still read it",
        g2, ("            wgmma_wait(0)\n            ab.release()\n",
             "            ab.release()\n            wgmma_wait(0)\n"),
        at="ab.release()")
    add("pipe_epilogue_no_wgmma_wait", "pipelines", "CK306",
        "the last wgmma is still in flight when the accumulator is stored",
        g4, ("        wgmma_wait(0)\n        ab.release()\n        store",
             "        ab.release()\n        store"),
        at="        ab.release()\n        store")
    add("pipe_in_flight_released_early", "pipelines", "CK306",
        "with one wgmma in flight the previous stage is released before wgmma_wait(1)",
        ws_gemm(128, 256, 64, 3, name="gemm_3stage", in_flight=1),
        ("            wgmma_wait(1)\n            ab.release()\n",
         "            ab.release()\n            wgmma_wait(1)\n"),
        at="            ab.release()\n            wgmma_wait(1)")
    add("pipe_commit_skipped", "pipelines", "CK301",
        "the producer commits only when the B tile is in range: the consumer waits forever",
        g3, ("            ab.commit()\n",
             "            if k < ktiles - 1:\n                ab.commit()\n"),
        at="s = ab.acquire()")
    add("pipe_release_twice", "pipelines", "CK301",
        "the stage is released twice per wait: the ring hands out stages still in use",
        g1, ("            ab.release()\n", "            ab.release()\n            ab.release()\n"),
        at="            ab.release()\n        store")

    # -- raw mbarriers -----------------------------------------------------------------
    r1 = raw_gemm(128, 256, 64, 4, per="warp")
    r2 = raw_gemm(64, 256, 64, 4, consumers=4, per="thread", name="gemm_thread")
    r3 = raw_gemm(128, 128, 64, 6, "f16", per="warp", name="gemm_f16")
    r4 = raw_gemm(64, 128, 64, 3, consumers=4, per="warp", name="gemm_small")
    r5 = raw_gemm(128, 256, 64, 3, per="thread", name="gemm_pt")
    add("mbar_leader_arrive_per_thread_port", "raw mbarriers", "CK313",
        "a per-thread release rewritten as one elected arrival for two warpgroups",
        r5, ("count=256, n=STAGES", "count=1, n=STAGES"),
        ("empty[s].arrive(per=\"thread\")", "empty[s].arrive()"), at="empty[s].arrive()")
    add("mbar_leader_arrive_gemm", "raw mbarriers", "CK313",
        "the consumers of two warpgroups release a stage through one elected thread",
        r3, ("count=8, n=STAGES", "count=1, n=STAGES"),
        ("empty[s].arrive(per=\"warp\")", "empty[s].arrive(per=\"role\")"),
        at="empty[s].arrive(per=\"role\")")
    add("mbar_count_per_warp_short", "raw mbarriers", "CK303",
        "eight warps arrive per phase but the barrier counts four",
        r1, ("count=8, n=STAGES", "count=4, n=STAGES"), at="empty = mbarrier")
    add("mbar_count_per_thread_as_warps", "raw mbarriers", "CK303",
        "every thread arrives but the barrier counts warps",
        r2, ("count=128, n=STAGES", "count=4, n=STAGES"), at="empty = mbarrier")
    add("mbar_count_per_thread_too_high", "raw mbarriers", "CK303",
        "the barrier waits for 512 arrivals, the role has 256 threads: a hang",
        r5, ("count=256, n=STAGES", "count=512, n=STAGES"), at="empty = mbarrier")
    # lane, warp and thread guards on arrivals: the guard says who arrives
    pt_arrive = '            empty[s].arrive(per="thread")\n'
    meet = "            barrier_sync(1, 8)\n"
    lane0 = r5.replace("count=256, n=STAGES", "count=8, n=STAGES").replace(
        pt_arrive, "            if lane.id == 0:\n    " + pt_arrive)
    r6 = raw_gemm(128, 128, 64, 6, "f16", per="thread", name="gemm_w0")
    warp0 = r6.replace("count=256, n=STAGES", "count=32, n=STAGES").replace(
        pt_arrive, meet + "            if warp.rank == 0:\n    " + pt_arrive)
    elect = r3.replace("count=8, n=STAGES", "count=1, n=STAGES").replace(
        '            empty[s].arrive(per="warp")\n',
        meet + "            with elect_one():\n                empty[s].arrive()\n")
    add("mbar_lane0_count_every_thread", "raw mbarriers", "CK303",
        "lane 0 of each warp arrives per thread, but the barrier counts every thread",
        lane0, ("count=8, n=STAGES", "count=256, n=STAGES"), at='empty[s].arrive(per="thread")')
    add("mbar_warp0_count_every_thread", "raw mbarriers", "CK303",
        "only warp 0's threads arrive, but the barrier counts the role's 256 threads",
        warp0, ("count=32, n=STAGES", "count=256, n=STAGES"), at='empty[s].arrive(per="thread")')
    first = r6.replace("count=256, n=STAGES", "count=1, n=STAGES").replace(
        pt_arrive, meet + "            if thread.id == 128:\n    " + pt_arrive)
    add("mbar_first_thread_arrive_unmet", "raw mbarriers", "CK313",
        "the role's first thread arrives for it before the other warps met it: they may "
        "still read the stage", first, (meet, ""), at='empty[s].arrive(per="thread")')
    add("mbar_per_warp_under_lane_guard", "raw mbarriers", "CK314",
        "a per-warp arrival (which meets the warp's lanes) runs on lane 0 only",
        r3, ('            empty[s].arrive(per="warp")\n',
             '            if lane.id == 0:\n                empty[s].arrive(per="warp")\n'),
        at='empty[s].arrive(per="warp")')
    add("mbar_hand_elected_arrive", "raw mbarriers", "CK314",
        "a hand-written elected thread makes an arrival that meets its warp's lanes",
        elect, ("            with elect_one():\n",
                "            if warp.rank == 0 and lane.id == 0:\n"), at="empty[s].arrive()")
    add("mbar_expect_tx_under_lane", "raw mbarriers", "CK303",
        "expect_tx under lane 1: its elected thread (thread 0) never arms the phase",
        r1, ("            full[s].expect_tx(",
             "            if lane.id == 1:\n                full[s].expect_tx("),
        at="full[s].expect_tx(")
    add("mbar_expect_tx_short", "raw mbarriers", "CK302",
        "expect_tx announces only the A tile",
        r3, ("expect_tx(BM * BK * 2 + BN * BK * 2)", "expect_tx(BM * BK * 2)"),
        at="expect_tx(")
    add("mbar_expect_tx_fp32_size", "raw mbarriers", "CK302",
        "expect_tx counts 4-byte elements for 2-byte tiles",
        r4, ("expect_tx(BM * BK * 2 + BN * BK * 2)", "expect_tx(BM * BK * 4 + BN * BK * 4)"),
        at="expect_tx(")
    add("mbar_init_not_fenced", "raw mbarriers", "CK310",
        "no fence_barrier_init() + syncthreads() between init and first use",
        r2, ("    fence_barrier_init()\n    syncthreads()\n", ""),
        at="empty[s].wait(")
    add("mbar_init_no_syncthreads", "raw mbarriers", "CK310",
        "the init is fenced but the other threads never meet the initialising one",
        r3, ("    fence_barrier_init()\n    syncthreads()\n", "    fence_barrier_init()\n"),
        at="empty[s].wait(")
    add("mbar_empty_parity_zero", "raw mbarriers", "CK311",
        "the producer's first wait on an empty barrier looks for phase 0, which never completes",
        r4, ("empty[s].wait((k // STAGES + 1) % 2)", "empty[s].wait((k // STAGES) % 2)"),
        at="empty[s].wait(")
    add("mbar_full_parity_constant", "raw mbarriers", "CK312",
        "the consumer always waits for parity 0: from the second lap on it does not wait",
        r1, ("full[s].wait((k // STAGES) % 2)", "full[s].wait(0)"), at="full[s].wait(")
    add("mbar_full_parity_from_k", "raw mbarriers", "CK312",
        "the parity comes from k, not from the lap k // STAGES",
        r5, ("full[s].wait((k // STAGES) % 2)", "full[s].wait(k % 2)"), at="full[s].wait(")
    add("mbar_stage_index_from_lap", "raw mbarriers", "CK312",
        "the producer's empty parity uses k instead of the lap",
        r2, ("empty[s].wait((k // STAGES + 1) % 2)", "empty[s].wait((k + 1) % 2)"),
        at="empty[s].wait(")

    add("mbar_full_parity_one_lap_ahead", "raw mbarriers", "CK312",
        "the consumer waits with the producer's parity: its first wait passes at once",
        r1, ("full[s].wait((k // STAGES) % 2)", "full[s].wait((k // STAGES + 1) % 2)"),
        at="full[s].wait(")
    add("mbar_expect_tx_over", "raw mbarriers", "CK302",
        "expect_tx announces 128 bytes more than the two copies bring: the phase never ends",
        r3, ("expect_tx(BM * BK * 2 + BN * BK * 2)",
             "expect_tx(BM * BK * 2 + BN * BK * 2 + 128)"), at="expect_tx(")

    # -- async groups ------------------------------------------------------------------
    c1 = cp_gemm()
    c2 = cp_gemm(128, 64, 32, 64, 32, 4, "bf16", name="gemm_narrow")
    c3 = cp_gemm(64, 128, 64, 32, 64, 3, "f16", name="gemm_bk64")
    c4 = cp_gemm(128, 128, 32, 32, 64, 4, "f16", name="gemm_8warps")
    add("async_wait_too_loose", "async groups", "CK307",
        "STAGES - 1 groups left pending: tile k may still be in flight",
        c1, ("cp_async_wait(STAGES - 2)", "cp_async_wait(STAGES - 1)"), at="ldmatrix(sa")
    add("async_no_syncthreads_after_wait", "async groups", "CK307",
        "each thread waited for its own copies only",
        c2, ("        cp_async_wait(STAGES - 2)\n        syncthreads()\n",
             "        cp_async_wait(STAGES - 2)\n"), at="ldmatrix(sa")
    add("async_no_wait_in_loop", "async groups", "CK307",
        "the main loop never waits for its copies",
        c3, ("        cp_async_wait(STAGES - 2)\n        syncthreads()\n",
             "        syncthreads()\n"),
        at="ldmatrix(sa")
    add("async_commit_missing", "async groups", "CK307",
        "the prologue never commits its copies: the wait count is off by the prologue",
        c4, ("        cp_async(sb[p], B.tile((BN, BK), (block.y, p)))\n        cp_async_commit()\n",
             "        cp_async(sb[p], B.tile((BN, BK), (block.y, p)))\n"), at="ldmatrix(sa")
    add("async_tma_store_no_wait", "async groups", "CK308",
        "the staging tile is overwritten while the previous TMA store may read it",
        tma_epi(64, 128, 4),
        ("            tma_store_wait(0)\n            barrier_sync(2, 4)\n", ""),
        at="store(sc, y)")
    add("async_tma_store_wait_no_barrier", "async groups", "CK316",
        "only the issuing thread waited for the store; the other warps overwrite sc",
        tma_epi(128, 64, 2, "f16", "2.0", name="double"),
        ("            barrier_sync(2, 4)\n", ""), at="store(sc, y)")
    add("async_tma_store_wait_after_write", "async groups", "CK308",
        "the wait for the previous store comes after the tile is overwritten",
        tma_epi(64, 64, 8, "bf16", "0.25", name="quarter"),
        ("            tma_store_wait(0)\n            barrier_sync(2, 4)\n"
         "            store(sc, y)\n",
         "            store(sc, y)\n"
         "            tma_store_wait(0)\n            barrier_sync(2, 4)\n"),
        at="store(sc, y)")
    add("async_tma_store_wait_too_loose", "async groups", "CK308",
        "tma_store_wait(1) leaves the previous store of the same buffer in flight",
        tma_epi(64, 128, 4, "f16", "3.0", name="triple"),
        ("            tma_store_wait(0)\n            barrier_sync(2, 4)",
         "            tma_store_wait(1)\n            barrier_sync(2, 4)"), at="store(sc, y)")
    add("async_tma_store_barrier_before_wait", "async groups", "CK316",
        "the role meets before the wait: the barrier orders nothing",
        tma_epi(32, 128, 8, "bf16", "1.5", name="scale_rows"),
        ("            tma_store_wait(0)\n            barrier_sync(2, 4)\n",
         "            barrier_sync(2, 4)\n            tma_store_wait(0)\n"), at="store(sc, y)")
    add("async_loopback_race", "async groups", "CK308",
        "with two stages the refill of the previous stage races the slow warps' ldmatrix",
        cp_gemm(128, 128, 32, 64, 64, 2, "f16", name="gemm_double"),
        ("        cp_async_wait(STAGES - 2)\n        syncthreads()\n"
         "        nxt = k + STAGES - 1\n"
         "        cp_async(sa[nxt % STAGES], A.tile((BM, BK), (block.x, nxt)))\n"
         "        cp_async(sb[nxt % STAGES], B.tile((BN, BK), (block.y, nxt)))\n"
         "        cp_async_commit()\n",
         "        nxt = k + STAGES - 1\n"
         "        cp_async(sa[nxt % STAGES], A.tile((BM, BK), (block.x, nxt)))\n"
         "        cp_async(sb[nxt % STAGES], B.tile((BN, BK), (block.y, nxt)))\n"
         "        cp_async_commit()\n"
         "        cp_async_wait(STAGES - 1)\n        syncthreads()\n"), at="cp_async(sa[nxt")

    add("async_tma_store_wait_elected_only", "async groups", "CK316",
        "the wait is put in elect_one() and the role's barrier dropped",
        tma_epi(64, 256, 2, "bf16", "0.125", name="scale_eighth"),
        ("            tma_store_wait(0)\n            barrier_sync(2, 4)\n",
         "            with elect_one():\n                tma_store_wait(0)\n"),
        at="store(sc, y)")
    add("async_wait_skipped_first_tile", "async groups", "CK307",
        "the wait is skipped on the first tile, which the prologue is still loading",
        cp_gemm(128, 128, 32, 64, 64, 4, "bf16", name="gemm_bf16"),
        ("        cp_async_wait(STAGES - 2)\n",
         "        if k > 0:\n            cp_async_wait(STAGES - 2)\n"), at="ldmatrix(sa")

    # -- fences ------------------------------------------------------------------------
    e1 = ws_gemm(64, 128, 64, 4, consumers=4, name="gemm_tma_epi", epilogue="tma")
    e2 = ws_gemm(128, 128, 64, 4, name="gemm_tma_epi2", epilogue="tma")
    e3 = ws_gemm(64, 256, 64, 3, "f16", consumers=4, name="linear_tma", epilogue="tma")
    add("fence_missing_before_tma_store", "fences", "CK309",
        "generic-proxy stores to sc are not fenced before the TMA store reads them",
        e1, ("        fence_proxy_async()\n", ""), at="tma_store(")
    add("fence_missing_two_warpgroups", "fences", "CK309",
        "the fence is gone from a two-warpgroup epilogue",
        e2, ("        fence_proxy_async()\n", ""), at="tma_store(")
    add("fence_after_barrier", "fences", "CK309",
        "the fence comes after the barrier: the TMA issuer fences only its own writes",
        e3, ("        fence_proxy_async()\n        barrier_sync(1, 4)\n",
             "        barrier_sync(1, 4)\n        fence_proxy_async()\n"), at="tma_store(")
    add("fence_by_lane0", "fences", "CK315",
        "the fence runs on lane 0 of each warp only",
        e1, ("        fence_proxy_async()\n",
             "        if lane.id == 0:\n            fence_proxy_async()\n"),
        at="            fence_proxy_async()")
    add("fence_by_warp0", "fences", "CK315",
        "the fence runs in warp 0 of the role only",
        e2, ("        fence_proxy_async()\n",
             "        if warp.rank == 0:\n            fence_proxy_async()\n"),
        at="            fence_proxy_async()")
    add("fence_by_thread0_var", "fences", "CK315",
        "the fence runs on the role's first thread, through a named flag",
        e3, ("        fence_proxy_async()\n",
             "        leader = thread.id == 128\n        if leader:\n"
             "            fence_proxy_async()\n"),
        at="            fence_proxy_async()")
    add("fence_by_first_warpgroup", "fences", "CK315",
        "only the first consumer warpgroup fences; the second one's stores are unordered",
        ws_gemm(128, 256, 64, 3, name="gemm_tma_epi3", epilogue="tma"),
        ("        fence_proxy_async()\n",
         "        if warpgroup.rank == 0:\n            fence_proxy_async()\n"),
        at="            fence_proxy_async()")
    add("fence_elected", "fences", "CK315",
        "the fence is put inside elect_one() with the store",
        ws_gemm(64, 64, 64, 8, "f16", consumers=4, name="gemm_small_tile", epilogue="tma"),
        ("        fence_proxy_async()\n",
         "        with elect_one():\n            fence_proxy_async()\n"),
        at="            fence_proxy_async()")

    # -- collectives under divergence --------------------------------------------------
    add("coll_wgmma_warp0", "collectives", "CK314",
        "one warp per warpgroup issues the wgmma",
        g2, ("            wgmma(acc, sa[s], sb[s].T)\n",
             "            if warp.rank == 0:\n                wgmma(acc, sa[s], sb[s].T)\n"),
        at="                wgmma(")
    add("coll_wgmma_lane0", "collectives", "CK314",
        "the wgmma is issued by one lane, as a tcgen05 MMA would be",
        g1, ("            wgmma(acc, sa[s], sb[s].T)\n",
             "            if lane.id == 0:\n                wgmma(acc, sa[s], sb[s].T)\n"),
        at="                wgmma(")
    add("coll_wgmma_wait_half", "collectives", "CK314",
        "only the first two warps of each warpgroup wait for the wgmma",
        g3, ("            wgmma_wait(0)\n",
             "            if warp.rank % 4 < 2:\n                wgmma_wait(0)\n"),
        at="                wgmma_wait(0)")
    add("coll_wgmma_via_var", "collectives", "CK314",
        "the condition is a thread-derived flag computed before the loop",
        g5, ("        for k in range(ktiles):\n            s = ab.wait()\n"
             "            wgmma(acc, sa[s], sb[s].T)\n",
             "        issuer = thread.id % 128 == 0\n"
             "        for k in range(ktiles):\n            s = ab.wait()\n"
             "            if issuer:\n                wgmma(acc, sa[s], sb[s].T)\n"),
        at="                wgmma(")
    add("coll_ldmatrix_lane_half", "collectives", "CK314",
        "half the lanes of each warp run the ldmatrix",
        c1, ("            a = ldmatrix(sa[s].tile((WM, 16), (wm, kk)))\n",
             "            if lane.id < 16:\n"
             "                a = ldmatrix(sa[s].tile((WM, 16), (wm, kk)))\n"
             "            else:\n"
             "                a = ldmatrix(sa[s].tile((WM, 16), (wm, kk)))\n"),
        at="                a = ldmatrix(")
    add("coll_mma_sync_lane", "collectives", "CK314",
        "the mma.sync runs only on even lanes",
        c3, ("            mma_sync(acc, a, b)\n",
             "            if lane.id % 2 == 0:\n                mma_sync(acc, a, b)\n"),
        at="                mma_sync(")
    add("coll_row_max_lane", "collectives", "CK314",
        "the row reduction (shuffles) runs in the first lanes only",
        ROWS_OK, ("        m = row_max(x)\n",
                  "        m = fragment(f32, (BR,), fill=-inf)\n        if lane.id < 8:\n"
                  "            m = row_max(x)\n"),
        at="            m = row_max(x)")
    add("coll_row_sum_thread_loop", "collectives", "CK314",
        "the reduction loop has a per-thread trip count",
        ROWS_OK, ("        s = row_sum(e)\n",
                  "        s = fragment(f32, (BR,))\n        for i in range(lane.id % 2 + 1):\n"
                  "            s = s + row_sum(e)\n"),
        at="            s = s + row_sum(e)")

    add("coll_wgmma_splits_warpgroup", "collectives", "CK314",
        "the condition on warp.id cuts the second warpgroup in half",
        ws_gemm(128, 128, 64, 6, name="gemm_split"),
        ("            wgmma(acc, sa[s], sb[s].T)\n",
         "            if warp.id < 6:\n                wgmma(acc, sa[s], sb[s].T)\n"),
        at="                wgmma(")

    # -- registers ---------------------------------------------------------------------
    add("regs_oversubscribed", "registers", "CK202",
        "40 x 128 + 248 x 256 > 64K registers: setmaxnreg.inc hangs",
        g1, ("regs=232", "regs=248"), at="regs=248")
    add("regs_not_multiple_of_8", "registers", "CK203",
        "setmaxnreg takes a multiple of 8",
        g3, ("regs=40", "regs=44"), at="regs=44")
    add("regs_below_minimum", "registers", "CK203",
        "setmaxnreg cannot go below 24",
        g5, ("regs=40", "regs=16"), at="regs=16")
    add("regs_partial_warpgroup", "registers", "CK204",
        "a 2-warp producer cannot run the warpgroup-wide setmaxnreg",
        g1, ("warps=range(0, 4), regs=40", "warps=range(0, 2), regs=40"), at="range(0, 2)")
    add("regs_on_sm80", "registers", "CK205",
        "regs= (setmaxnreg) on sm_80",
        SM80_ROLES, ("warps=range(0, 4)):", "warps=range(0, 4), regs=64):"), at="regs=64")
    add("regs_consumer_above_max", "registers", "CK203",
        "setmaxnreg stops at 256",
        r3, ("regs=232", "regs=264"), at="regs=264")

    # -- layouts -----------------------------------------------------------------------
    add("layout_swizzle128_64B_rows", "layouts", "CK401",
        "swizzle(128) on 64-byte rows",
        c1, ("sa = smem(f16, (STAGES, BM, BK), layout=swizzle(64))",
             "sa = smem(f16, (STAGES, BM, BK), layout=swizzle(128))"), at="sa = smem(")
    add("layout_tma_into_padded", "layouts", "CK402",
        "TMA cannot write padded rows",
        g2, ("sb = smem(f16, (STAGES, BN, BK), layout=swizzle(128))",
             "sb = smem(f16, (STAGES, BN, BK), layout=padded(8))"), at="tma_load(sb")
    add("layout_swizzle64_tma_128B", "layouts", "CK402",
        "a swizzle(64) buffer fed by a 128-byte TMA box",
        g3, ("sa = smem(bf16, (STAGES, BM, BK), layout=swizzle(128))",
             "sa = smem(bf16, (STAGES, BM, BK), layout=swizzle(64))"), at="tma_load(sa")
    add("layout_wgmma_row_major", "layouts", "CK403",
        "wgmma cannot read a plain row-major operand",
        g1, ("sb = smem(bf16, (STAGES, BN, BK), layout=swizzle(128))",
             "sb = smem(bf16, (STAGES, BN, BK), layout=row_major)"), at="wgmma(")
    add("layout_ldmatrix_unswizzled", "layouts", "CK404",
        "ldmatrix on 64-byte unswizzled rows: 4-way conflicts",
        c4, ("sa = smem(f16, (STAGES, BM, BK), layout=swizzle(64))",
             "sa = smem(f16, (STAGES, BM, BK), layout=row_major)"), at="ldmatrix(sa")
    add("layout_view_past_stage", "layouts", "CK405",
        "the ldmatrix reads K slice kk + 1, past the stage on the last kk",
        c2, ("a = ldmatrix(sa[s].tile((WM, 16), (wm, kk)))",
             "a = ldmatrix(sa[s].tile((WM, 16), (wm, kk + 1)))"), at="ldmatrix(sa")
    add("layout_swizzle128_f16_bk32", "layouts", "CK401",
        "BK = 32 f16 is 64 B a row; swizzle(128) needs 128",
        g5, ("sa = smem(f16, (STAGES, BM, BK), layout=swizzle(64))",
             "sa = smem(f16, (STAGES, BM, BK), layout=swizzle(128))"), at="sa = smem(")
    add("layout_wgmma_acc_rows", "layouts", "CK211",
        "a 2-warpgroup consumer with a 64-row accumulator",
        ws_gemm(128, 256, 64, 4, name="gemm_acc"),
        ("BM, BN, BK = 128, 256, 64", "BM, BN, BK = 64, 256, 64"), at="wgmma(")

    # -- resources ---------------------------------------------------------------------
    add("res_smem_stages", "resources", "CK201",
        "five 48 KB stages need 240 KB",
        g1, ("STAGES = 4", "STAGES = 5"), at="sb = smem(")
    add("res_smem_epilogue", "resources", "CK201",
        "a staged C tile on top of a 192 KB ring",
        ws_gemm(128, 256, 64, 4, name="gemm_tma_big", epilogue="tma").replace(
            "STAGES = 4", "STAGES = 3"), ("STAGES = 3", "STAGES = 4"), at="sc = smem(")
    add("res_smem_sm80", "resources", "CK201",
        "eight 16 KB stages plus the ring go past 163 KB on sm_80",
        c3, ("STAGES = 3", "STAGES = 12"), at="sb = smem(")
    add("res_tma_box_512", "resources", "CK207",
        "a 512-column TMA store box; the limit is 256 per dimension",
        tma_epi(32, 256, 4, "bf16", "0.5", name="scale_wide"),
        ("BM, BN, TILES = 32, 256", "BM, BN, TILES = 32, 512"), at="tma_store(")
    add("res_tma_stride_undeclared", "resources", "CK209",
        "K has no declared divisibility: TMA strides may be misaligned",
        g2, ("K = dim(\"K\", multiple_of=8)", "K = dim(\"K\")"), at="tma_load(sa")
    add("res_fp8_on_sm80", "resources", "CK212",
        "e4m3 on sm_80",
        DEQUANT, ("X: Tensor[bf16, (R, C)]", "X: Tensor[e4m3, (R, C)]"), at="def dequant")
    add("res_cluster_on_sm80", "resources", "CK206",
        "clusters need sm_90",
        c2, ("warps=4)", "warps=4, cluster=(2, 1))"), at="@kernel")
    add("res_cluster_too_big", "resources", "CK206",
        "a 16-block cluster; the portable limit is 8",
        g3, ("warps=12)", "warps=12, cluster=(16, 1))"), at="@kernel")

    # -- one bug, one finding, on its line --------------------------------------------
    h1 = handoff()
    h2 = handoff(64, 64, "f16", name="handoff_f16")
    add("mbar_wait_orphan", "raw mbarriers", "CK303",
        "the consumer never hands the buffer back: nothing arrives on `freed`",
        h1, ("        freed.arrive(per=\"warp\")\n", ""), at="freed.wait(0)")
    add("mbar_wait_wrong_barrier", "raw mbarriers", "CK311",
        "the consumer waits on the hand-back barrier instead of the load's",
        h2, ("    with role(\"use\", warps=range(4, 8)):\n        ready.wait(0)\n",
             "    with role(\"use\", warps=range(4, 8)):\n        freed.wait(0)\n"),
        at="        freed.wait(0)\n        x = load")
    add("mbar_wait_phase_never_completes", "raw mbarriers", "CK311",
        "the second tile is never loaded: the consumer's wait for phase 1 never returns",
        h1, ("        ready.expect_tx(16384)\n"
             "        tma_load(sx, X.tile((BM, BN), (2 * block.x + 1, block.y)), ready)\n", ""),
        at="ready.wait(1)")
    w1 = one_warpgroup_gemm()
    add("mbar_armed_before_init", "raw mbarriers", "CK310",
        "the barrier's initialisation is published inside the loop, after the first arm",
        w1, ("    fence_barrier_init()\n    syncthreads()\n", ""),
        ("            tma_load(sb, B.tile((BN, BK), (block.y, k)), bar)\n",
         "            tma_load(sb, B.tile((BN, BK), (block.y, k)), bar)\n"
         "        fence_barrier_init()\n        syncthreads()\n"), at="bar.expect_tx(")
    add("mma_acc_bf16", "contracts", "CK106",
        "the wgmma accumulator is declared bf16; wgmma accumulates in f32",
        g4, ("acc = fragment(f32,", "acc = fragment(bf16,"), at="acc = fragment(")
    add("mma_acc_bf16_one_warpgroup", "contracts", "CK106",
        "a bf16 accumulator for a one-warpgroup wgmma loop",
        w1, ("acc = fragment(f32,", "acc = fragment(bf16,"), at="acc = fragment(")
    add("mma_sync_acc_f16", "contracts", "CK106",
        "the mma.sync accumulator is declared f16",
        c2, ("acc = fragment(f32,", "acc = fragment(f16,"), at="acc = fragment(")

    # -- buffers placed by hand -------------------------------------------------------
    p1 = placed(cp_gemm(name="gemm_reuse"), sa=0, sb=24576)
    p1 = p1.replace("    acc = fragment(", "    sc = smem(f16, (BM, BN), layout=padded(8), "
                    "offset=0)\n    acc = fragment(", 1)
    p1 = p1.replace("    cp_async_wait(0)\n    store(C.tile((WM, WN), (block.x * 2 + wm, "
                    "block.y * 2 + wn)), cast(acc, f16))\n",
                    "    cp_async_wait(0)\n    syncthreads()\n"
                    "    store(sc.tile((WM, WN), (wm, wn)), cast(acc, f16))\n    syncthreads()\n"
                    "    store(C.tile((BM, BN), (block.x, block.y)), load(sc))\n")
    assert "load(sc)" in p1
    add("smem_reuse_without_barrier", "placement", "CK317",
        "the epilogue tile reuses the ring's bytes with no block barrier after the main loop",
        p1, ("    cp_async_wait(0)\n    syncthreads()\n    store(sc",
             "    cp_async_wait(0)\n    store(sc"), at="sc = smem(")
    e4 = tma_epi(64, 128, 2, name="scale_placed")
    e4 = e4.replace("    sc = smem(", "    sx = smem(bf16, (BM, BN), layout=row_major)\n"
                    "    sc = smem(", 1)
    e4 = e4.replace("            store(sc, y)\n",
                    "            store(sx, y)\n            store(sc, y)\n", 1)
    e4 = placed(e4, sx=0, sc=16384)
    add("smem_placed_overlap", "placement", "CK317",
        "two buffers of one role placed on overlapping bytes",
        e4, ("sc = smem(bf16, (BM, BN), layout=row_major, offset=16384)",
             "sc = smem(bf16, (BM, BN), layout=row_major, offset=8192)"), at="sc = smem(")
    g6 = placed(ws_gemm(128, 256, 64, 4, name="gemm_placed"), sa=0, sb=65536)
    add("smem_offset_swizzle_misaligned", "placement", "CK318",
        "a swizzle(128) ring placed 512 bytes past a 1024-byte boundary",
        g6, ("layout=swizzle(128), offset=65536)", "layout=swizzle(128), offset=66048)"),
        at="66048")
    add("smem_offset_tma_misaligned", "placement", "CK318",
        "a TMA store source placed at a 16-byte offset",
        e4, ("offset=16384)", "offset=16400)"), at="16400")
    return [c for c in out if c is not None]


ROWS_OK = """BR, W = 64, 128
R = dim("R")

@kernel(arch="sm_90a", grid=(cdiv(R, BR),), warps=4)
def softmax_rows(X: Tensor[f32, (R, W)], Y: Tensor[f32, (R, W)]):
    with role("rows", warps=range(0, 4)):
        x = load(X.tile((BR, W), (block.x, 0)))
        m = row_max(x)
        e = exp(x - unsqueeze(m, 1))
        s = row_sum(e)
        store(Y.tile((BR, W), (block.x, 0)), e / unsqueeze(s, 1))
"""

DEQUANT = """BR, BC = 64, 128
R, C = dim("R"), dim("C", multiple_of=16)

@kernel(arch="sm_80", grid=(cdiv(R, BR), cdiv(C, BC)), warps=4)
def dequant(X: Tensor[bf16, (R, C)], scale: Tensor[f32, (R,)], Y: Tensor[f16, (R, C)]):
    x = cast(load(X.tile((BR, BC), (block.x, block.y))), f32)
    s = load(scale.tile((BR,), (block.x,)))
    store(Y.tile((BR, BC), (block.x, block.y)), cast(x * unsqueeze(s, 1), f16))
"""

SM80_ROLES = """BM, BN = 64, 64
M, N = dim("M", multiple_of=8), dim("N", multiple_of=8)

@kernel(arch="sm_80", grid=(cdiv(M, BM), cdiv(N, BN)), warps=4)
def copy_tiles(X: Tensor[f16, (M, N)], Y: Tensor[f16, (M, N)]):
    with role("io", warps=range(0, 4)):
        x = load(X.tile((BM, BN), (block.x, block.y)))
        store(Y.tile((BM, BN), (block.x, block.y)), x)
"""


def render(case: Case) -> tuple[str, str]:
    """The bad kernel (with its `# expect:` header) and the fixed twin."""
    bad = case.fixed
    for old, new in case.edits:
        if old:
            assert bad.count(old) >= 1, f"{case.name}: {old!r} not in the template"
            bad = bad.replace(old, new, 1)
    assert bad != case.fixed or not any(o for o, _ in case.edits), case.name
    head = [f"# bug: {case.why}"]
    anchor = case.at if case.at is not None else case.edits[0][1].strip().splitlines()[0]
    pos = bad.find(anchor)
    assert pos >= 0, f"{case.name}: anchor {anchor!r} not in the bad kernel"
    line = bad[:pos].count("\n") + 1
    if anchor.startswith("\n"):
        line += 1
    line += 1 + len(head)
    text = f"# expect: {case.code} {line}\n" + "\n".join(head) + "\n" + bad
    fixed = f"# fixed twin of {case.name}.cake ({case.family})\n" + case.fixed
    return text, fixed


def main() -> None:
    all_cases = cases()
    names = [c.name for c in all_cases]
    assert len(names) == len(set(names)), "duplicate case names"
    for old in HERE.glob("*.cake"):
        old.unlink()
    for c in all_cases:
        bad, fixed = render(c)
        (HERE / f"{c.name}.cake").write_text(bad, encoding="utf-8")
        (HERE / f"{c.name}.fixed.cake").write_text(fixed, encoding="utf-8")
    print(f"wrote {len(all_cases)} pairs to {HERE}", file=sys.stderr)


if __name__ == "__main__":
    main()
