"""A 2x1 cluster GEMM whose blocks share their B tile by TMA multicast (tests/test_cluster.py).

Each block loads its own A tile and half of the shared B tile, multicast to both blocks;
`cluster_sync()` publishes the barriers, ends every iteration (the peers are done with
the tile before it is overwritten) and ends the kernel.
"""

BM, BN, BK = 64, 64, 64
M = dim("M")
N = dim("N", multiple_of=8)
K = dim("K", multiple_of=8)

@kernel(arch="sm_90a", grid=(cdiv(M, 2 * BM) * 2, cdiv(N, BN)), warps=4, cluster=(2, 1))
def mcgemm(A: Tensor[bf16, (M, K)], B: Tensor[bf16, (N, K)], C: Tensor[bf16, (M, N)]):
    sa = smem(bf16, (BM, BK), layout=swizzle(128))
    sb = smem(bf16, (BN, BK), layout=swizzle(128))
    full = mbarrier(count=1)
    fence_barrier_init()
    cluster_sync()
    acc = fragment(f32, (BM, BN), layout=wgmma_acc)
    for k in range(cdiv(K, BK)):
        full.expect_tx((BM * BK + BN * BK) * 2)
        tma_load(sa, A.tile((BM, BK), (block.x, k)), full)
        tma_load(sb.tile((BN // 2, BK), (cluster.rank, 0)),
                 B.tile((BN // 2, BK), (block.y * 2 + cluster.rank, k)), full, multicast=0b11)
        full.wait(k % 2)
        wgmma(acc, sa, sb.T)
        wgmma_wait(0)
        cluster_sync()
    store(C.tile((BM, BN), (block.x, block.y)), cast(acc, bf16))
    cluster_sync()
