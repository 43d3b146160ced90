# expect: CK108 16:9-16:29
BM, BN, BK = 128, 128, 64
M, N, K = dim("M"), dim("N"), dim("K", multiple_of=64)

@kernel(arch="sm_80", grid=(cdiv(M, BM), cdiv(N, BN)), warps=4)
def gemm(A: Tensor[bf16, (M, K)], B: Tensor[bf16, (N, K)], C: Tensor[bf16, (M, N)]):
    sa = smem(bf16, (BM, BK), layout=swizzle(128))
    sb = smem(bf16, (BN, BK), layout=swizzle(128))
    acc = fragment(f32, (BM, BN), layout=wgmma_acc)
    for k in range(cdiv(K, BK)):
        cp_async(sa, A.tile((BM, BK), (block.x, k)))
        cp_async(sb, B.tile((BN, BK), (block.y, k)))
        cp_async_commit()
        cp_async_wait(0)
        syncthreads()
        wgmma(acc, sa, sb.T)
        syncthreads()
    store(C.tile((BM, BN), (block.x, block.y)), cast(acc, bf16))
