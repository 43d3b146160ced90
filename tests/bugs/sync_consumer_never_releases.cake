# expect: CK305 29
# bug: the second consumer warpgroup reads every stage but never releases it; a stage is
# empty again only when both consumers released it, so the producer hangs after 3 stages
BM, BN, BK, STAGES = 128, 256, 64, 3
M, N, K = dim("M"), dim("N"), dim("K", multiple_of=64)

@kernel(arch="sm_90a", grid=(cdiv(M, BM), cdiv(N, BN)), warps=12)
def gemm(A: Tensor[bf16, (M, K)], B: Tensor[bf16, (N, K)], C: Tensor[bf16, (M, N)]):
    sa = smem(bf16, (STAGES, BM, BK), layout=swizzle(128))
    sb = smem(bf16, (STAGES, BN, BK), layout=swizzle(128))
    ab = pipeline(stages=STAGES, producer="load", consumer=("mma0", "mma1"))
    with role("load", warps=range(0, 4), regs=40):
        for k in range(cdiv(K, BK)):
            s = ab.acquire()
            tma_load(sa[s], A.tile((BM, BK), (block.x, k)), ab)
            tma_load(sb[s], B.tile((BN, BK), (block.y, k)), ab)
            ab.commit()
    with role("mma0", warps=range(4, 8), regs=232):
        acc = fragment(f32, (64, BN), layout=wgmma_acc)
        for k in range(cdiv(K, BK)):
            s = ab.wait()
            wgmma(acc, sa[s].tile((64, BK), (0, 0)), sb[s].T)
            wgmma_wait(0)
            ab.release()
        store(C.tile((64, BN), (2 * block.x, block.y)), cast(acc, bf16))
    with role("mma1", warps=range(8, 12), regs=232):
        acc = fragment(f32, (64, BN), layout=wgmma_acc)
        for k in range(cdiv(K, BK)):
            s = ab.wait()
            wgmma(acc, sa[s].tile((64, BK), (1, 0)), sb[s].T)
            wgmma_wait(0)
        store(C.tile((64, BN), (2 * block.x + 1, block.y)), cast(acc, bf16))
