# expect: CK106 25
# bug: the wgmma accumulator is declared bf16; wgmma accumulates in f32
BM, BN, BK = 64, 256, 64
STAGES = 4

M = dim("M")
N = dim("N", multiple_of=8)
K = dim("K", multiple_of=8)

@kernel(arch="sm_90a", grid=(cdiv(M, BM), cdiv(N, BN)), warps=8)
def gemm_wide(A: Tensor[bf16, (M, K)], B: Tensor[bf16, (N, K)], C: Tensor[bf16, (M, N)]):
    sa = smem(bf16, (STAGES, BM, BK), layout=swizzle(128))
    sb = smem(bf16, (STAGES, BN, BK), layout=swizzle(128))
    ab = pipeline(stages=STAGES, producer="load", consumer="mma")
    ktiles = cdiv(K, BK)

    with role("load", warps=range(0, 4)):
        for k in range(ktiles):
            s = ab.acquire()
            tma_load(sa[s], A.tile((BM, BK), (block.x, k)), ab)
            tma_load(sb[s], B.tile((BN, BK), (block.y, k)), ab)
            ab.commit()

    with role("mma", warps=range(4, 8)):
        acc = fragment(bf16, (BM, BN), layout=wgmma_acc)
        s = ab.wait()
        wgmma(acc, sa[s], sb[s].T)
        for k in range(1, ktiles):
            s = ab.wait()
            wgmma(acc, sa[s], sb[s].T)
            wgmma_wait(1)
            ab.release()
        wgmma_wait(0)
        ab.release()
        store(C.tile((BM, BN), (block.x, block.y)), cast(acc, bf16))
