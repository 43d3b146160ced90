# fixed twin of sync_cp_async_loopback_race.cake: a barrier closes each iteration
BM, BN, BK = 128, 128, 32
WM, WN = 64, 64
M = dim("M")
N = dim("N", multiple_of=8)
K = dim("K", multiple_of=8)

@kernel(arch="sm_80", grid=(cdiv(M, BM), cdiv(N, BN)), warps=4)
def gemm_sm80(A: Tensor[f16, (M, K)], B: Tensor[f16, (N, K)], C: Tensor[f16, (M, N)]):
    sa = smem(f16, (2, BM, BK), layout=swizzle(64))
    sb = smem(f16, (2, BN, BK), layout=swizzle(64))
    acc = fragment(f32, (WM, WN), layout=mma_acc)
    wm, wn = warp.id // 2, warp.id % 2
    ktiles = cdiv(K, BK)
    cp_async(sa[0], A.tile((BM, BK), (block.x, 0)))
    cp_async(sb[0], B.tile((BN, BK), (block.y, 0)))
    cp_async_commit()
    for k in range(ktiles):
        if k + 1 < ktiles:
            cp_async(sa[(k + 1) % 2], A.tile((BM, BK), (block.x, k + 1)))
            cp_async(sb[(k + 1) % 2], B.tile((BN, BK), (block.y, k + 1)))
        cp_async_commit()
        cp_async_wait(1)
        syncthreads()
        s = k % 2
        for kk in range(BK // 16):
            a = ldmatrix(sa[s].tile((WM, 16), (wm, kk)))
            b = ldmatrix(sb[s].tile((WN, 16), (wn, kk)).T)
            mma_sync(acc, a, b)
        syncthreads()
    store(C.tile((WM, WN), (block.x * 2 + wm, block.y * 2 + wn)), cast(acc, f16))
