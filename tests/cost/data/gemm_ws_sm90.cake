"""gemm_mbarrier_sm90.cake, warp-specialised: a TMA producer warpgroup feeds the math warps.

The same 128x128x64 tiles as the serialized kernel, through a STAGES-deep pipeline: the
producer ("load") refills a stage as soon as the consumers ("mma") release it, so up to
STAGES - 1 copies are in flight while the tensor cores work.
"""

BM, BN, BK = 128, 128, 64

M = dim("M")
N = dim("N", multiple_of=8)   # TMA: 16-byte aligned global rows
K = dim("K", multiple_of=8)

STAGES = 2   # pipeline depth

@kernel(arch="sm_90a", grid=(cdiv(M, BM), cdiv(N, BN)), warps=12)
def gemm_ws_sm90(A: Tensor[bf16, (M, K)], B: Tensor[bf16, (N, K)],
                 C: Tensor[bf16, (M, N)]):
    sa = smem(bf16, (STAGES, BM, BK), layout=swizzle(128))
    sb = smem(bf16, (STAGES, BN, BK), layout=swizzle(128))
    ready = pipeline(stages=STAGES, producer="load", consumer="mma")
    with role("load", warps=range(0, 4), regs=40):
        for k in range(cdiv(K, BK)):
            s = ready.acquire()
            tma_load(sa[s], A.tile((BM, BK), (block.x, k)), ready)
            tma_load(sb[s], B.tile((BN, BK), (block.y, k)), ready)
            ready.commit()
    with role("mma", warps=range(4, 12), regs=232):
        acc = fragment(f32, (BM, BN), layout=wgmma_acc)
        for k in range(cdiv(K, BK)):
            s = ready.wait()
            wgmma(acc, sa[s], sb[s].T)
            wgmma_wait(0)
            ready.release()
        store(C.tile((BM, BN), (block.x, block.y)), cast(acc, bf16))
