# expect: CK105 19:26-19:27
BM, BN, BK = 128, 128, 32
M, N, K = dim("M"), dim("N"), dim("K", multiple_of=32)

@kernel(arch="sm_80", grid=(cdiv(M, BM), cdiv(N, BN)), warps=4)
def gemm(A: Tensor[f16, (M, K)], B: Tensor[f16, (N, K)], C: Tensor[f16, (M, N)]):
    sa = smem(f16, (2, BM, BK), layout=swizzle(64))
    sb = smem(f16, (2, BN, BK), layout=swizzle(64))
    acc = fragment(f32, (BM, BN), layout=mma_acc)
    for k in range(cdiv(K, BK)):
        s = k % 2
        cp_async(sa[s], A.tile((BM, BK), (block.x, k)))
        cp_async(sb[s], B.tile((BN, BK), (block.y, k)))
        cp_async_commit()
        cp_async_wait(0)
        syncthreads()
        a = ldmatrix(sa[s])
        b = ldmatrix(sb[s])
        mma_sync(acc, a, b)
        syncthreads()
    store(C.tile((BM, BN), (block.x, block.y)), cast(acc, f16))
