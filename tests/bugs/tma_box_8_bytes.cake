# expect: CK208 15
# bug: a TMA box with 8-byte rows
BM, G = 128, 2
M = dim("M")
KB = dim("KB", multiple_of=4)

@kernel(arch="sm_90a", grid=(cdiv(M, BM),), warps=8)
def scale_sums(S: Tensor[f32, (M, KB)], out: Tensor[f32, (M,)]):
    ss = smem(f32, (BM, G))
    ready = mbarrier(count=1)
    fence_barrier_init()
    syncthreads()
    with role("load", warps=range(0, 4)):
        ready.expect_tx(BM * G * 4)
        tma_load(ss, S.tile((BM, G), (block.x, 0)), ready)
    with role("sum", warps=range(4, 8)):
        ready.wait(0)
        store(out.tile((BM,), (block.x,)), row_sum(load(ss)))
