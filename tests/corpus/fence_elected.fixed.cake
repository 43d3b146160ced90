# fixed twin of fence_elected.cake (fences)
BM, BN, BK = 64, 64, 64
STAGES = 8

M = dim("M", multiple_of=64)
N = dim("N", multiple_of=64)
K = dim("K", multiple_of=8)

@kernel(arch="sm_90a", grid=(cdiv(M, BM), cdiv(N, BN)), warps=8)
def gemm_small_tile(A: Tensor[f16, (M, K)], B: Tensor[f16, (N, K)], C: Tensor[f16, (M, N)]):
    sa = smem(f16, (STAGES, BM, BK), layout=swizzle(128))
    sb = smem(f16, (STAGES, BN, BK), layout=swizzle(128))
    sc = smem(f16, (BM, BN), layout=row_major)
    ab = pipeline(stages=STAGES, producer="load", consumer="mma")
    ktiles = cdiv(K, BK)

    with role("load", warps=range(0, 4)):
        for k in range(ktiles):
            s = ab.acquire()
            tma_load(sa[s], A.tile((BM, BK), (block.x, k)), ab)
            tma_load(sb[s], B.tile((BN, BK), (block.y, k)), ab)
            ab.commit()

    with role("mma", warps=range(4, 8)):
        acc = fragment(f32, (BM, BN), layout=wgmma_acc)
        for k in range(ktiles):
            s = ab.wait()
            wgmma(acc, sa[s], sb[s].T)
            wgmma_wait(0)
            ab.release()
        store(sc, cast(acc, f16))
        fence_proxy_async()
        barrier_sync(1, 4)
        tma_store(C.tile((BM, BN), (block.x, block.y)), sc)
        tma_store_wait(0)
