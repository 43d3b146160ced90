# expect: CK106 13
# bug: a bf16 accumulator for a one-warpgroup wgmma loop
BM, BN, BK = 64, 128, 64
M, N, K = dim("M"), dim("N", multiple_of=8), dim("K", multiple_of=64)

@kernel(arch="sm_90a", grid=(cdiv(M, BM), cdiv(N, BN)), warps=4)
def gemm_wg(A: Tensor[bf16, (M, K)], B: Tensor[bf16, (N, K)], C: Tensor[bf16, (M, N)]):
    sa = smem(bf16, (BM, BK), layout=swizzle(128))
    sb = smem(bf16, (BN, BK), layout=swizzle(128))
    bar = mbarrier(count=1)
    fence_barrier_init()
    syncthreads()
    acc = fragment(bf16, (BM, BN), layout=wgmma_acc)
    for k in range(cdiv(K, BK)):
        with elect_one():
            bar.expect_tx(BM * BK * 2 + BN * BK * 2)
            tma_load(sa, A.tile((BM, BK), (block.x, k)), bar)
            tma_load(sb, B.tile((BN, BK), (block.y, k)), bar)
        bar.wait(k % 2)
        wgmma(acc, sa, sb.T)
        wgmma_wait(0)
        syncthreads()
    store(C.tile((BM, BN), (block.x, block.y)), cast(acc, bf16))
