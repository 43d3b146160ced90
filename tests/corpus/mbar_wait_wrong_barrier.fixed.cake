# fixed twin of mbar_wait_wrong_barrier.cake (raw mbarriers)
BM, BN = 64, 64
M, N = dim("M", multiple_of=128), dim("N", multiple_of=64)

@kernel(arch="sm_90a", grid=(cdiv(M, 2 * BM), cdiv(N, BN)), warps=8)
def handoff_f16(X: Tensor[f16, (M, N)], Y: Tensor[f16, (M, N)]):
    sx = smem(f16, (BM, BN), layout=row_major)
    ready = mbarrier(count=1)
    freed = mbarrier(count=4)
    fence_barrier_init()
    syncthreads()
    with role("load", warps=range(0, 4)):
        ready.expect_tx(8192)
        tma_load(sx, X.tile((BM, BN), (2 * block.x, block.y)), ready)
        freed.wait(0)
        ready.expect_tx(8192)
        tma_load(sx, X.tile((BM, BN), (2 * block.x + 1, block.y)), ready)
    with role("use", warps=range(4, 8)):
        ready.wait(0)
        x = load(sx)
        freed.arrive(per="warp")
        store(Y.tile((BM, BN), (2 * block.x, block.y)), x)
        ready.wait(1)
        x = load(sx)
        store(Y.tile((BM, BN), (2 * block.x + 1, block.y)), x)
