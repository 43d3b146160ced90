# fixed twin of sync_parity_never_flips.cake: the n-th wait looks for phase n, parity k % 2
BM, BN, BK = 64, 64, 64
M, N, K = dim("M"), dim("N"), dim("K", multiple_of=64)

@kernel(arch="sm_90a", grid=(cdiv(M, BM), cdiv(N, BN)), warps=8)
def tinygemm(A: Tensor[bf16, (M, K)], B: Tensor[bf16, (N, K)], C: Tensor[bf16, (M, N)]):
    sa = smem(bf16, (BM, BK), layout=swizzle(128))
    sb = smem(bf16, (BN, BK), layout=swizzle(128))
    full = mbarrier(count=1)
    empty = mbarrier(count=4)
    fence_barrier_init()
    syncthreads()
    with role("load", warps=range(0, 4)):
        for k in range(cdiv(K, BK)):
            empty.wait((k + 1) % 2)
            full.expect_tx(BM * BK * 2 + BN * BK * 2)
            tma_load(sa, A.tile((BM, BK), (block.x, k)), full)
            tma_load(sb, B.tile((BN, BK), (block.y, k)), full)
    with role("mma", warps=range(4, 8)):
        acc = fragment(f32, (BM, BN), layout=wgmma_acc)
        for k in range(cdiv(K, BK)):
            full.wait(k % 2)
            wgmma(acc, sa, sb.T)
            wgmma_wait(0)
            empty.arrive(per="warp")
        store(C.tile((BM, BN), (block.x, block.y)), cast(acc, bf16))
