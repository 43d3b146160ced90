# Stores the wgmma accumulator without waiting for the wgmma.
BM, BN, BK = 64, 64, 64
M, N = dim("M"), dim("N", multiple_of=8)

@kernel(arch="sm_90a", grid=(cdiv(M, BM), cdiv(N, BN)), warps=4)
def no_wait(A: Tensor[bf16, (M, BK)], B: Tensor[bf16, (N, BK)], C: Tensor[bf16, (M, N)]):
    sa = smem(bf16, (BM, BK), layout=swizzle(128))
    sb = smem(bf16, (BN, BK), layout=swizzle(128))
    bar = mbarrier(count=1)
    fence_barrier_init()
    syncthreads()
    acc = fragment(f32, (BM, BN), layout=wgmma_acc)
    bar.expect_tx((BM + BN) * BK * 2)
    tma_load(sa, A.tile((BM, BK), (block.x, 0)), bar)
    tma_load(sb, B.tile((BN, BK), (block.y, 0)), bar)
    bar.wait(0)
    wgmma(acc, sa, sb.T)
    store(C.tile((BM, BN), (block.x, block.y)), cast(acc, bf16))
