# expect: CK207 14
# bug: a 512-row TMA box; the limit is 256 per dimension
BR, D = 512, 64
R = dim("R")

@kernel(arch="sm_90a", grid=(cdiv(R, BR),), warps=8)
def rowsum(X: Tensor[bf16, (R, D)], out: Tensor[f32, (R,)]):
    sx = smem(bf16, (BR, D), layout=swizzle(128))
    ready = mbarrier(count=1)
    fence_barrier_init()
    syncthreads()
    with role("load", warps=range(0, 4)):
        ready.expect_tx(BR * D * 2)
        tma_load(sx, X.tile((BR, D), (block.x, 0)), ready)
    with role("sum", warps=range(4, 8)):
        ready.wait(0)
        total = row_sum(cast(load(sx), f32))
        store(out.tile((BR,), (block.x,)), total)
