"""C = A @ B.T with two buffers on a raw mbarrier array: tile k + 1 is copied while tile k
computes, so one copy is in flight at a time (no warp specialisation, no pipeline object).
"""

BM, BN, BK = 128, 128, 64

M = dim("M")
N = dim("N", multiple_of=8)
K = dim("K", multiple_of=8)

@kernel(arch="sm_90a", grid=(cdiv(M, BM), cdiv(N, BN)), warps=8)
def gemm_prefetch(A: Tensor[bf16, (M, K)], B: Tensor[bf16, (N, K)], C: Tensor[bf16, (M, N)]):
    sa = smem(bf16, (2, BM, BK), layout=swizzle(128))
    sb = smem(bf16, (2, BN, BK), layout=swizzle(128))
    ready = mbarrier(count=1, n=2)
    fence_barrier_init()
    syncthreads()
    acc = fragment(f32, (BM, BN), layout=wgmma_acc)
    ktiles = cdiv(K, BK)
    ready[0].expect_tx((BM + BN) * BK * 2)
    tma_load(sa[0], A.tile((BM, BK), (block.x, 0)), ready[0])
    tma_load(sb[0], B.tile((BN, BK), (block.y, 0)), ready[0])
    for k in range(ktiles):
        if k + 1 < ktiles:
            ready[(k + 1) % 2].expect_tx((BM + BN) * BK * 2)
            tma_load(sa[(k + 1) % 2], A.tile((BM, BK), (block.x, k + 1)), ready[(k + 1) % 2])
            tma_load(sb[(k + 1) % 2], B.tile((BN, BK), (block.y, k + 1)), ready[(k + 1) % 2])
        ready[k % 2].wait((k // 2) % 2)
        wgmma(acc, sa[k % 2], sb[k % 2].T)
        wgmma_wait(0)
        syncthreads()
    store(C.tile((BM, BN), (block.x, block.y)), cast(acc, bf16))
