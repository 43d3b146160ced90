# Indexes a 2-stage buffer with the k-tile number instead of k % 2.
BM, BK, STAGES = 64, 32, 2
M, K = dim("M"), dim("K", multiple_of=8)

@kernel(arch="sm_80", grid=(cdiv(M, BM),), warps=4)
def stage_oob(A: Tensor[f16, (M, K)], C: Tensor[f16, (M, K)]):
    sa = smem(f16, (STAGES, BM, BK))
    for k in range(cdiv(K, BK)):
        cp_async(sa[k], A.tile((BM, BK), (block.x, k)))
        cp_async_commit()
        cp_async_wait(0)
        syncthreads()
        store(C.tile((BM, BK), (block.x, k)), load(sa[k]))
        syncthreads()
