"""C = A @ B.T on sm_90a: persistent, 2x1 cluster multicast, TMA-store epilogue.

gemm_sm90 with the three schedules that close the gap to a vendor GEMM on Hopper:
- Persistent tiles: one cluster of two blocks per pair of SMs (`sm_count()` is asked of
  the driver at launch), each cluster walking the linear cluster-tile indices
  c, c + clusters, ...  A cluster tile is two M-tiles side by side and one N-tile;
  `tile_coords` orders them in bands of GROUP cluster rows so the clusters running at one
  time share a few B panels in L2.  The producer runs ahead into the next tile while the
  consumers write the epilogue of the current one.
- 2x1 cluster multicast: both blocks of a cluster need the same 256x64 B tile every
  k-step; each loads half of it, multicast to both (`multicast=0b11`), so B is read from
  L2 once per cluster.  Raw full/empty barriers as in gemm_sm90_cluster: a stage is
  refilled only once the consumers of both blocks released it (16 warp arrivals).
- Sub-tiled TMA-store epilogue: the accumulator leaves in 128x64 sub-tiles through
  stmatrix into two swizzled buffers in turn, one TMA store each (clipped at M and N).

Both roles count k-steps across tiles (`it`), so barrier phases carry over from one tile
to the next.  4 stages x 48 KB + 32 KB epilogue = 224 KB of shared memory.
"""

BM, BN, BK = 128, 256, 64
STAGES = 4
EN = 64          # epilogue sub-tile width: 64 bf16 = 128 B rows, one swizzle(128) atom
GROUP = 4        # cluster rows per raster band (8 M-tiles, as gemm_sm90_persistent)

M = dim("M")
N = dim("N", multiple_of=8)   # TMA: every global row stride is a multiple of 16 bytes
K = dim("K", multiple_of=8)

PAIRS_M, TILES_N = cdiv(M, 2 * BM), cdiv(N, BN)
PAIRS = PAIRS_M * TILES_N

@kernel(arch="sm_90a", grid=(min(sm_count() // 2, PAIRS) * 2,), warps=12, cluster=(2, 1))
def gemm_sm90_expert(A: Tensor[bf16, (M, K)], B: Tensor[bf16, (N, K)],
                     C: Tensor[bf16, (M, N)]):
    sa = smem(bf16, (STAGES, BM, BK), layout=swizzle(128))
    sb = smem(bf16, (STAGES, BN, BK), layout=swizzle(128))
    sc = smem(bf16, (2, BM, EN), layout=swizzle(128))
    full = mbarrier(count=1, n=STAGES)
    empty = mbarrier(count=16, n=STAGES)   # 8 consumer warps here + 8 in the peer
    fence_barrier_init()
    cluster_sync()                         # the peer's barriers exist before our copies
    ktiles = cdiv(K, BK)
    clusters = sm_count() // 2

    with role("load", warps=range(0, 4), regs=40):
        for pair in range(block.x // 2, PAIRS, clusters):
            pm, tn = tile_coords(pair, PAIRS_M, TILES_N, group=GROUP)
            base = (pair - block.x // 2) // clusters * ktiles
            for k in range(ktiles):
                it = base + k
                s = it % STAGES
                empty[s].wait((it // STAGES + 1) % 2)   # both blocks' consumers released s
                full[s].expect_tx((BM * BK + BN * BK) * 2)
                tma_load(sa[s], A.tile((BM, BK), (pm * 2 + cluster.rank, k)), full[s])
                tma_load(sb[s].tile((BN // 2, BK), (cluster.rank, 0)),
                         B.tile((BN // 2, BK), (tn * 2 + cluster.rank, k)), full[s],
                         multicast=0b11)

    with role("mma", warps=range(4, 12), regs=232):
        for pair in range(block.x // 2, PAIRS, clusters):
            pm, tn = tile_coords(pair, PAIRS_M, TILES_N, group=GROUP)
            tm = pm * 2 + cluster.rank
            base = (pair - block.x // 2) // clusters * ktiles
            acc = fragment(f32, (BM, BN), layout=wgmma_acc)
            # One wgmma group in flight: after issuing step k, wait(1) proves step k - 1
            # read its stage, which both blocks' producers may then refill.
            s = base % STAGES
            full[s].wait((base // STAGES) % 2)
            wgmma(acc, sa[s], sb[s].T)
            for k in range(1, ktiles):
                it = base + k
                s = it % STAGES
                full[s].wait((it // STAGES) % 2)
                wgmma(acc, sa[s], sb[s].T)
                wgmma_wait(1)
                p = (it - 1) % STAGES
                empty[p].arrive(per="warp")
                empty[p].arrive(per="warp", cta=1 - cluster.rank)
            wgmma_wait(0)
            last = (base + ktiles - 1) % STAGES
            empty[last].arrive(per="warp")
            empty[last].arrive(per="warp", cta=1 - cluster.rank)

            for j in range(BN // EN):
                stmatrix(sc[j % 2], cast(acc, bf16), j)
                fence_proxy_async()
                barrier_sync(1, 8)
                tma_store(C.tile((BM, EN), (tm, tn * (BN // EN) + j)), sc[j % 2])
                tma_store_wait(1)         # the store of j - 1 has read sc[(j + 1) % 2]
                barrier_sync(2, 8)        # ... and every warp knows it before writing there
        tma_store_wait(0)

    cluster_sync()                         # the peer's last arrivals land before we exit
