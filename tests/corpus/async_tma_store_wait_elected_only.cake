# expect: CK316 15
# bug: the wait is put in elect_one() and the role's barrier dropped
BM, BN, TILES = 64, 256, 2
M, N = dim("M", multiple_of=128), dim("N", multiple_of=256)

@kernel(arch="sm_90a", grid=(cdiv(M, BM * TILES), cdiv(N, BN)), warps=4)
def scale_eighth(X: Tensor[bf16, (M, N)], Y: Tensor[bf16, (M, N)]):
    sc = smem(bf16, (BM, BN), layout=row_major)
    with role("io", warps=range(0, 4)):
        for t in range(TILES):
            x = load(X.tile((BM, BN), (block.x * TILES + t, block.y)))
            y = cast(cast(x, f32) * 0.125, bf16)
            with elect_one():
                tma_store_wait(0)
            store(sc, y)
            fence_proxy_async()
            barrier_sync(1, 4)
            tma_store(Y.tile((BM, BN), (block.x * TILES + t, block.y)), sc)
        tma_store_wait(0)
