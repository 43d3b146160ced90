# fixed twin of mbar_first_thread_arrive_unmet.cake (raw mbarriers)
BM, BN, BK, STAGES = 128, 128, 64, 6
M, N, K = dim("M"), dim("N", multiple_of=8), dim("K", multiple_of=64)

@kernel(arch="sm_90a", grid=(cdiv(M, BM), cdiv(N, BN)), warps=12)
def gemm_w0(A: Tensor[f16, (M, K)], B: Tensor[f16, (N, K)], C: Tensor[f16, (M, N)]):
    sa = smem(f16, (STAGES, BM, BK), layout=swizzle(128))
    sb = smem(f16, (STAGES, BN, BK), layout=swizzle(128))
    full = mbarrier(count=1, n=STAGES)
    empty = mbarrier(count=1, n=STAGES)
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
            barrier_sync(1, 8)
            if thread.id == 128:
                empty[s].arrive(per="thread")
        store(C.tile((BM, BN), (block.x, block.y)), cast(acc, f16))
