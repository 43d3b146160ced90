# expect: CK316 14
# bug: only the issuing thread waited for the store; the other warps overwrite sc
BM, BN, TILES = 128, 64, 2
M, N = dim("M", multiple_of=256), dim("N", multiple_of=64)

@kernel(arch="sm_90a", grid=(cdiv(M, BM * TILES), cdiv(N, BN)), warps=4)
def double(X: Tensor[f16, (M, N)], Y: Tensor[f16, (M, N)]):
    sc = smem(f16, (BM, BN), layout=row_major)
    with role("io", warps=range(0, 4)):
        for t in range(TILES):
            x = load(X.tile((BM, BN), (block.x * TILES + t, block.y)))
            y = cast(cast(x, f32) * 2.0, f16)
            tma_store_wait(0)
            store(sc, y)
            fence_proxy_async()
            barrier_sync(1, 4)
            tma_store(Y.tile((BM, BN), (block.x * TILES + t, block.y)), sc)
        tma_store_wait(0)
