"""Template of the sm_90a warp-specialised GEMM, C = A @ B.T, for tile-configuration sweeps.

bench/gemm_variants.py rewrites the two constant lines (tile sizes, stages, warps,
setmaxnreg values, swizzle span) to make each variant; the rest is the kernel as written.
"""

BM, BN, BK, STAGES = 128, 256, 64, 4
WARPS, LOAD_REGS, MMA_REGS, SWIZZLE = 12, 40, 232, 128
M, N, K = dim("M"), dim("N", multiple_of=8), dim("K", multiple_of=8)

@kernel(arch="sm_90a", grid=(cdiv(M, BM), cdiv(N, BN)), warps=WARPS)
def gemm(A: Tensor[bf16, (M, K)], B: Tensor[bf16, (N, K)], C: Tensor[bf16, (M, N)]):
    sa = smem(bf16, (STAGES, BM, BK), layout=swizzle(SWIZZLE))
    sb = smem(bf16, (STAGES, BN, BK), layout=swizzle(SWIZZLE))
    ab = pipeline(stages=STAGES, producer="load", consumer="mma")
    with role("load", warps=range(0, 4), regs=LOAD_REGS):
        for k in range(cdiv(K, BK)):
            s = ab.acquire()
            tma_load(sa[s], A.tile((BM, BK), (block.x, k)), ab)
            tma_load(sb[s], B.tile((BN, BK), (block.y, k)), ab)
            ab.commit()
    with role("mma", warps=range(4, WARPS), regs=MMA_REGS):
        acc = fragment(f32, (BM, BN), layout=wgmma_acc)
        for k in range(cdiv(K, BK)):
            s = ab.wait()
            wgmma(acc, sa[s], sb[s].T)
            wgmma_wait(0)
            ab.release()
        store(C.tile((BM, BN), (block.x, block.y)), cast(acc, bf16))
