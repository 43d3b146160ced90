# expect: CK303 16
# bug: the consumer never hands the buffer back: nothing arrives on `freed`
BM, BN = 64, 128
M, N = dim("M", multiple_of=128), dim("N", multiple_of=128)

@kernel(arch="sm_90a", grid=(cdiv(M, 2 * BM), cdiv(N, BN)), warps=8)
def handoff(X: Tensor[bf16, (M, N)], Y: Tensor[bf16, (M, N)]):
    sx = smem(bf16, (BM, BN), layout=row_major)
    ready = mbarrier(count=1)
    freed = mbarrier(count=4)
    fence_barrier_init()
    syncthreads()
    with role("load", warps=range(0, 4)):
        ready.expect_tx(16384)
        tma_load(sx, X.tile((BM, BN), (2 * block.x, block.y)), ready)
        freed.wait(0)
        ready.expect_tx(16384)
        tma_load(sx, X.tile((BM, BN), (2 * block.x + 1, block.y)), ready)
    with role("use", warps=range(4, 8)):
        ready.wait(0)
        x = load(sx)
        store(Y.tile((BM, BN), (2 * block.x, block.y)), x)
        ready.wait(1)
        x = load(sx)
        store(Y.tile((BM, BN), (2 * block.x + 1, block.y)), x)
