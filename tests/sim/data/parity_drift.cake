# A hand-rolled single-buffer handshake whose consumer always waits with parity 0:
# from the second tile on, the wait passes on the phase it already consumed.
BM, BK = 64, 64
M, K = dim("M"), dim("K", multiple_of=8)

@kernel(arch="sm_90a", grid=(cdiv(M, BM),), warps=8)
def copy_rows(A: Tensor[bf16, (M, K)], C: Tensor[bf16, (M, K)]):
    buf = smem(bf16, (BM, BK), layout=swizzle(128))
    full = mbarrier(count=1)
    empty = mbarrier(count=4)
    fence_barrier_init()
    syncthreads()
    with role("load", warps=range(0, 4)):
        for k in range(cdiv(K, BK)):
            empty.wait((k + 1) % 2)
            full.expect_tx(BM * BK * 2)
            tma_load(buf, A.tile((BM, BK), (block.x, k)), full)
    with role("copy", warps=range(4, 8)):
        for k in range(cdiv(K, BK)):
            full.wait(0)
            x = load(buf)
            store(C.tile((BM, BK), (block.x, k)), x)
            empty.arrive(per="warp")
