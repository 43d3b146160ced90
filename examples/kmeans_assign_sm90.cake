"""Flash-KMeans assignment step on sm_90a: out[b, n] = argmin_k ||X[b, n] - C[b, k]||^2.

X (B, N, D) are the points, C (B, K, D) the centroids, Cn (B, K) the precomputed squared
centroid norms ||C[b, k]||^2; out (B, N) gets the index of the nearest centroid.
Headline shape: B = 32, N = 65536, K = 1024, D = 128.

||x - c||^2 = ||x||^2 + ||c||^2 - 2 x.c, and ||x||^2 is the same for every centroid of a
row, so the argmin only needs dist = Cn - 2 X @ C.T.  That is a GEMM with K = D fused
with a running argmin over centroid chunks: the N x K distance matrix never exists, each
block keeps one (value, index) pair per row in registers.

Design:
- Grid (cdiv(N, BM), B): block (i, b) owns BM = 128 points of batch b.  Its X tile is
  loaded once (one raw mbarrier) and stays in shared memory.
- D = 128 bf16 is 256 B per row, two swizzle(128) atoms: X and C tiles are stored as
  D // DK = 2 slabs of DK = 64 columns, and each chunk is 2 wgmma K-steps.
- A producer warpgroup streams centroid chunks (BN = 128 centroids plus their norms)
  through a 3-stage pipeline.  C of one batch is 256 KB and is read by every block of
  that batch, so it comes from L2: three stages cover L2 latency.
- Two consumer warpgroups share the 128x128 distance tile (64 rows each), so one can run
  its argmin on the CUDA cores while the other keeps the tensor cores busy.
- K is declared a multiple of BN: a ragged last chunk would read zero-filled centroids
  with distance 0, which could win the argmin.
"""

BM, BN = 128, 128
D, DK = 128, 64
STAGES = 3

B = dim("B")
N = dim("N")
K = dim("K", multiple_of=BN)

@kernel(arch="sm_90a", grid=(cdiv(N, BM), B), warps=12)
def kmeans_assign_sm90(X: Tensor[bf16, (B, N, D)], C: Tensor[bf16, (B, K, D)],
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
        for j in range(K // BN):
            s = chunks.wait()
            dot = fragment(f32, (BM, BN), layout=wgmma_acc)
            for h in range(D // DK):
                wgmma(dot, sx[h], sc[s, h].T)
            wgmma_wait(0)
            cn = load(scn[s])
            chunks.release()          # both wgmmas and the norm load are done with stage s

            dist = cn - 2.0 * dot                    # (BN,) broadcasts over the BM rows
            v, i = row_argmin(dist)                  # per row: best in this chunk
            # Strict `<`: on a tie the earlier chunk (smaller index) stays, as numpy's argmin.
            closer = lt(v, best_v)
            best_i = where(closer, i + j * BN, best_i)
            best_v = where(closer, v, best_v)

        # Rows past N (zero-filled points) are clipped by the store.
        store(out.tile((1, BM), (block.y, block.x)), best_i)
