# fixed twin of coll_mma_sync_lane.cake (collectives)
BM, BN, BK = 64, 128, 64
WM, WN = 32, 64
STAGES = 3
M = dim("M")
N = dim("N", multiple_of=8)
K = dim("K", multiple_of=8)

@kernel(arch="sm_80", grid=(cdiv(M, BM), cdiv(N, BN)), warps=4)
def gemm_bk64(A: Tensor[f16, (M, K)], B: Tensor[f16, (N, K)], C: Tensor[f16, (M, N)]):
    sa = smem(f16, (STAGES, BM, BK), layout=swizzle(128))
    sb = smem(f16, (STAGES, BN, BK), layout=swizzle(128))
    acc = fragment(f32, (WM, WN), layout=mma_acc)
    wm, wn = warp.id // 2, warp.id % 2
    ktiles = cdiv(K, BK)
    for p in range(STAGES - 1):
        cp_async(sa[p], A.tile((BM, BK), (block.x, p)))
        cp_async(sb[p], B.tile((BN, BK), (block.y, p)))
        cp_async_commit()
    for k in range(ktiles):
        cp_async_wait(STAGES - 2)
        syncthreads()
        nxt = k + STAGES - 1
        cp_async(sa[nxt % STAGES], A.tile((BM, BK), (block.x, nxt)))
        cp_async(sb[nxt % STAGES], B.tile((BN, BK), (block.y, nxt)))
        cp_async_commit()
        s = k % STAGES
        for kk in range(BK // 16):
            a = ldmatrix(sa[s].tile((WM, 16), (wm, kk)))
            b = ldmatrix(sb[s].tile((WN, 16), (wn, kk)).T)
            mma_sync(acc, a, b)
    cp_async_wait(0)
    store(C.tile((WM, WN), (block.x * 2 + wm, block.y * 2 + wn)), cast(acc, f16))
