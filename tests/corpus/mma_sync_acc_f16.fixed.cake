# fixed twin of mma_sync_acc_f16.cake (contracts)
BM, BN, BK = 128, 64, 32
WM, WN = 64, 32
STAGES = 4
M = dim("M")
N = dim("N", multiple_of=8)
K = dim("K", multiple_of=8)

@kernel(arch="sm_80", grid=(cdiv(M, BM), cdiv(N, BN)), warps=4)
def gemm_narrow(A: Tensor[bf16, (M, K)], B: Tensor[bf16, (N, K)], C: Tensor[bf16, (M, N)]):
    sa = smem(bf16, (STAGES, BM, BK), layout=swizzle(64))
    sb = smem(bf16, (STAGES, BN, BK), layout=swizzle(64))
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
    store(C.tile((WM, WN), (block.x * 2 + wm, block.y * 2 + wn)), cast(acc, bf16))
