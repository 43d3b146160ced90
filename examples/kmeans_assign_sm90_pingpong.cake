"""Flash-KMeans assignment on sm_90a with two ping-ponged consumer warpgroups.

The algebra is that of kmeans_assign_sm90.cake: dist = Cn - 2 X @ C.T per centroid chunk,
with a running argmin per row.  There the two consumer warpgroups share each 128x128
distance tile (64 rows each) and wait on the same stage in lock-step, so both issue their
wgmmas together, both drain them, and both run the argmin together: the tensor cores idle
during the argmin and the CUDA cores during the MMA.

Here each consumer warpgroup is its own role and owns a whole BM = 64-row tile (one m64
wgmma slab; a block still covers 2 x BM = 128 points).  Both consume every centroid chunk
of one pipeline, and a pair of named barriers orders their wgmma issue: dist0 issues chunk j, lets dist1 issue chunk j, and waits for dist1 before issuing
chunk j + 1.  The tensor cores run the two warpgroups' MMAs back to back while each runs
its argmin in the other's MMA phase.

- WG1_TURN (named barrier 1, both warpgroups = 8 warps): dist0 arrives after issuing
  chunk j, dist1 syncs before issuing chunk j.
- WG0_TURN (named barrier 2): dist1 arrives after issuing chunk j (but the last, which
  nothing waits for), dist0 syncs before issuing chunk j + 1.

A missing arrival or a sync on the wrong barrier is a deadlock the checker reports
(CK311); a count of one side's warps only orders nothing (CK320), and sides naming
different counts are CK319.  K is a multiple of BN, as in the seed; a ragged N zero-fills the X rows past N
(a whole second tile when N % 128 <= 64) and the stores clip them.
"""

BM, BN = 64, 128
D, DK = 128, 64
STAGES = 3
WG1_TURN, WG0_TURN = 1, 2

B = dim("B")
N = dim("N")
K = dim("K", multiple_of=BN)

@kernel(arch="sm_90a", grid=(cdiv(N, 2 * BM), B), warps=12)
def kmeans_assign_sm90_pingpong(X: Tensor[bf16, (B, N, D)], C: Tensor[bf16, (B, K, D)],
                                Cn: Tensor[f32, (B, K)], out: Tensor[i32, (B, N)]):
    sx = smem(bf16, (2, D // DK, BM, DK), layout=swizzle(128))
    sc = smem(bf16, (STAGES, D // DK, BN, DK), layout=swizzle(128))
    scn = smem(f32, (STAGES, BN))
    xready = mbarrier(count=1)
    chunks = pipeline(stages=STAGES, producer="load", consumer=("dist0", "dist1"))
    fence_barrier_init()   # the raw mbarrier must be initialised before any role uses it
    syncthreads()

    with role("load", warps=range(0, 4), regs=40):
        # Both X tiles, once: one arrival that expects all of their bytes, then the copies.
        xready.expect_tx(2 * BM * D * 2)
        for r in range(2):
            for h in range(D // DK):
                tma_load(sx[r, h], X.tile((1, BM, DK), (block.y, 2 * block.x + r, h)), xready)
        for j in range(K // BN):
            s = chunks.acquire()
            for h in range(D // DK):
                tma_load(sc[s, h], C.tile((1, BN, DK), (block.y, j, h)), chunks)
            tma_load(scn[s], Cn.tile((1, BN), (block.y, j)), chunks)
            chunks.commit()

    with role("dist0", warps=range(4, 8), regs=232):
        best_v = fragment(f32, (BM,), fill=inf)
        best_i = fragment(i32, (BM,))
        xready.wait(0)
        for j in range(K // BN):
            s = chunks.wait()
            if j > 0:
                barrier_sync(WG0_TURN, 8)   # dist1 has issued chunk j - 1
            dot = fragment(f32, (BM, BN), layout=wgmma_acc)
            for h in range(D // DK):
                wgmma(dot, sx[0, h], sc[s, h].T)
            barrier_arrive(WG1_TURN, 8)     # dist1 may issue chunk j
            wgmma_wait(0)
            cn = load(scn[s])
            chunks.release()          # both wgmmas and the norm load are done with stage s

            dist = cn - 2.0 * dot
            v, i = row_argmin(dist)
            closer = lt(v, best_v)     # strict: on a tie the earlier chunk stays
            best_i = where(closer, i + j * BN, best_i)
            best_v = where(closer, v, best_v)

        # Rows past N (zero-filled points) are clipped by the store.
        store(out.tile((1, BM), (block.y, 2 * block.x + 0)), best_i)

    with role("dist1", warps=range(8, 12), regs=232):
        best_v = fragment(f32, (BM,), fill=inf)
        best_i = fragment(i32, (BM,))
        xready.wait(0)
        for j in range(K // BN):
            s = chunks.wait()
            barrier_sync(WG1_TURN, 8)       # dist0 has issued chunk j
            dot = fragment(f32, (BM, BN), layout=wgmma_acc)
            for h in range(D // DK):
                wgmma(dot, sx[1, h], sc[s, h].T)
            if j < K // BN - 1:
                barrier_arrive(WG0_TURN, 8) # dist0 may issue chunk j + 1
            wgmma_wait(0)
            cn = load(scn[s])
            chunks.release()          # both wgmmas and the norm load are done with stage s

            dist = cn - 2.0 * dot
            v, i = row_argmin(dist)
            closer = lt(v, best_v)     # strict: on a tie the earlier chunk stays
            best_i = where(closer, i + j * BN, best_i)
            best_v = where(closer, v, best_v)

        # Rows past N (zero-filled points) are clipped by the store.
        store(out.tile((1, BM), (block.y, 2 * block.x + 1)), best_i)
