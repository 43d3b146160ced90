# expect: CK303 29
# bug: lane 0 of each warp arrives per thread, but the barrier counts every thread
BM, BN, BK, STAGES = 128, 256, 64, 3
M, N, K = dim("M"), dim("N", multiple_of=8), dim("K", multiple_of=64)

@kernel(arch="sm_90a", grid=(cdiv(M, BM), cdiv(N, BN)), warps=12)
def gemm_pt(A: Tensor[bf16, (M, K)], B: Tensor[bf16, (N, K)], C: Tensor[bf16, (M, N)]):
    sa = smem(bf16, (STAGES, BM, BK), layout=swizzle(128))
    sb = smem(bf16, (STAGES, BN, BK), layout=swizzle(128))
    full = mbarrier(count=1, n=STAGES)
    empty = mbarrier(count=256, n=STAGES)
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
            if lane.id == 0:
                empty[s].arrive(per="thread")
        store(C.tile((BM, BN), (block.x, block.y)), cast(acc, bf16))
