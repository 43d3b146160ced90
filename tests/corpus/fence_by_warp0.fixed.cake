# fixed twin of fence_by_warp0.cake (fences)
BM, BN, BK = 128, 128, 64
STAGES = 4

M = dim("M", multiple_of=128)
N = dim("N", multiple_of=128)
K = dim("K", multiple_of=8)

@kernel(arch="sm_90a", grid=(cdiv(M, BM), cdiv(N, BN)), warps=12)
def gemm_tma_epi2(A: Tensor[bf16, (M, K)], B: Tensor[bf16, (N, K)], C: Tensor[bf16, (M, N)]):
    sa = smem(bf16, (STAGES, BM, BK), layout=swizzle(128))
    sb = smem(bf16, (STAGES, BN, BK), layout=swizzle(128))
    sc = smem(bf16, (BM, BN), layout=row_major)
    ab = pipeline(stages=STAGES, producer="load", consumer="mma")
    ktiles = cdiv(K, BK)

    with role("load", warps=range(0, 4), regs=40):
        for k in range(ktiles):
            s = ab.acquire()
            tma_load(sa[s], A.tile((BM, BK), (block.x, k)), ab)
            tma_load(sb[s], B.tile((BN, BK), (block.y, k)), ab)
            ab.commit()

    with role("mma", warps=range(4, 12), regs=232):
        acc = fragment(f32, (BM, BN), layout=wgmma_acc)
        for k in range(ktiles):
            s = ab.wait()
            wgmma(acc, sa[s], sb[s].T)
            wgmma_wait(0)
            ab.release()
        store(sc, cast(acc, bf16))
        fence_proxy_async()
        barrier_sync(1, 8)
        tma_store(C.tile((BM, BN), (block.x, block.y)), sc)
        tma_store_wait(0)
