"""Flash-KMeans assignment on sm_90a with a double-buffered distance accumulator.

The same kernel as kmeans_assign_sm90.cake (see it for the algebra and the tiling), with
one change in the consumer: the seed waits for its wgmmas (`wgmma_wait(0)`) at every
centroid chunk, so the tensor cores idle while the ~500-instruction argmin runs, and the
argmin idles while the tensor cores run.  Here two accumulators alternate:

- chunk j + 1's wgmmas are issued into the other accumulator, then `wgmma_wait(1)` leaves
  only that group in flight, which proves chunk j's accumulator complete and its stage read;
- the stage of chunk j is released and the argmin runs on chunk j while the tensor cores
  compute chunk j + 1.

Registers can not be indexed at run time, so the loop body handles two chunks, one per
accumulator (`d0` even chunks, `d1` odd ones), and the tail (one chunk or two, by the
parity of K // BN) is peeled after the loop.  Two (128, 128) f32 accumulators over two
warpgroups are 2 x 64 registers per thread, within `regs=232`.
"""

BM, BN = 128, 128
D, DK = 128, 64
STAGES = 3

B = dim("B")
N = dim("N")
K = dim("K", multiple_of=BN)

@kernel(arch="sm_90a", grid=(cdiv(N, BM), B), warps=12)
def kmeans_assign_sm90_dbuf(X: Tensor[bf16, (B, N, D)], C: Tensor[bf16, (B, K, D)],
                       Cn: Tensor[f32, (B, K)], out: Tensor[i32, (B, N)]):
    sx = smem(bf16, (D // DK, BM, DK), layout=swizzle(128))
    sc = smem(bf16, (STAGES, D // DK, BN, DK), layout=swizzle(128))
    scn = smem(f32, (STAGES, BN))
    xready = mbarrier(count=1)
    chunks = pipeline(stages=STAGES, producer="load", consumer="dist")
    fence_barrier_init()   # the raw mbarrier must be initialised before any role uses it
    syncthreads()

    with role("load", warps=range(0, 4), regs=40):
        # The X tile, once: one arrival that expects all of its bytes, then the copies.
        # A tile (1, BM, DK) of the rank-3 tensor fills a (BM, DK) slab: leading 1s drop.
        xready.expect_tx(BM * D * 2)
        for h in range(D // DK):
            tma_load(sx[h], X.tile((1, BM, DK), (block.y, block.x, h)), xready)
        for j in range(K // BN):
            s = chunks.acquire()
            for h in range(D // DK):
                tma_load(sc[s, h], C.tile((1, BN, DK), (block.y, j, h)), chunks)
            tma_load(scn[s], Cn.tile((1, BN), (block.y, j)), chunks)
            chunks.commit()

    with role("dist", warps=range(4, 12), regs=232):
        best_v = fragment(f32, (BM,), fill=inf)
        best_i = fragment(i32, (BM,))
        xready.wait(0)
        # chunk 0 into d0; from here on one chunk's wgmmas are always in flight
        s0 = chunks.wait()
        d0 = fragment(f32, (BM, BN), layout=wgmma_acc)
        for h in range(D // DK):
            wgmma(d0, sx[h], sc[s0, h].T)
        for p in range((K // BN - 1) // 2):
            # chunk 2p is in flight in d0: issue 2p + 1 into d1, then retire 2p
            s1 = chunks.wait()
            d1 = fragment(f32, (BM, BN), layout=wgmma_acc)
            for h in range(D // DK):
                wgmma(d1, sx[h], sc[s1, h].T)
            wgmma_wait(2)            # d0 (chunk 2 * p) is complete
            cn = load(scn[s0])
            chunks.release()          # the stage of chunk 2 * p
            dist = cn - 2.0 * d0
            v, i = row_argmin(dist)
            closer = lt(v, best_v)      # strict: on a tie the earlier chunk stays
            best_i = where(closer, i + (2 * p) * BN, best_i)
            best_v = where(closer, v, best_v)
            # chunk 2p + 1 is in flight in d1: issue 2p + 2 into d0, then retire 2p + 1
            s0 = chunks.wait()
            d0 = fragment(f32, (BM, BN), layout=wgmma_acc)
            for h in range(D // DK):
                wgmma(d0, sx[h], sc[s0, h].T)
            wgmma_wait(2)            # d1 (chunk 2 * p + 1) is complete
            cn = load(scn[s1])
            chunks.release()          # the stage of chunk 2 * p + 1
            dist = cn - 2.0 * d1
            v, i = row_argmin(dist)
            closer = lt(v, best_v)      # strict: on a tie the earlier chunk stays
            best_i = where(closer, i + (2 * p + 1) * BN, best_i)
            best_v = where(closer, v, best_v)
        # the tail: chunk K // BN - 1 (odd count) or K // BN - 2 is in flight in d0
        if (K // BN) % 2 == 0:
            s1 = chunks.wait()
            d1 = fragment(f32, (BM, BN), layout=wgmma_acc)
            for h in range(D // DK):
                wgmma(d1, sx[h], sc[s1, h].T)
            wgmma_wait(2)            # d0 (chunk K // BN - 2) is complete
            cn = load(scn[s0])
            chunks.release()          # the stage of chunk K // BN - 2
            dist = cn - 2.0 * d0
            v, i = row_argmin(dist)
            closer = lt(v, best_v)      # strict: on a tie the earlier chunk stays
            best_i = where(closer, i + (K // BN - 2) * BN, best_i)
            best_v = where(closer, v, best_v)
            wgmma_wait(0)            # d1 (chunk K // BN - 1) is complete
            cn = load(scn[s1])
            chunks.release()          # the stage of chunk K // BN - 1
            dist = cn - 2.0 * d1
            v, i = row_argmin(dist)
            closer = lt(v, best_v)      # strict: on a tie the earlier chunk stays
            best_i = where(closer, i + (K // BN - 1) * BN, best_i)
            best_v = where(closer, v, best_v)
        else:
            wgmma_wait(0)            # d0 (chunk K // BN - 1) is complete
            cn = load(scn[s0])
            chunks.release()          # the stage of chunk K // BN - 1
            dist = cn - 2.0 * d0
            v, i = row_argmin(dist)
            closer = lt(v, best_v)      # strict: on a tie the earlier chunk stays
            best_i = where(closer, i + (K // BN - 1) * BN, best_i)
            best_v = where(closer, v, best_v)

        # Rows past N (zero-filled points) are clipped by the store.
        store(out.tile((1, BM), (block.y, block.x)), best_i)
