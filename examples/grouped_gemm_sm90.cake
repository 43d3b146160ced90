"""MoE grouped GEMM, masked layout: C[g] = (A[g] * sa[g]) @ (B[g] * sb[g]).T per expert g.

The fp8 GEMM of gemm_fp8_sm90.cake over G experts at once.  Expert g's tokens sit in
rows 0 .. count[g] of A[g], a (MX, K) slab of fixed capacity MX (DeepGEMM's "masked"
grouped layout); each expert has its own weight B[g] (N, K) and scales.  block.z is the
expert, so every tile's coordinates are launch-time: the schedule is static.

What this kernel does not do: read count[g] and skip the tiles past it, so every
expert is computed at its full capacity.  grouped_gemm_sm90_routed.cake reads the counts
and offsets with `load_scalar` and computes only the tiles each expert has (contiguous
layout, bf16).  See docs/kernels/fp8_gemm.md.
"""

BM, BN, BK = 128, 128, 128
STAGES = 6

G = dim("G")                    # experts
MX = dim("MX", multiple_of=4)   # rows per expert (capacity); TMA: SA's rows are MX f32
N = dim("N", multiple_of=16)
K = dim("K", multiple_of=16)

@kernel(arch="sm_90a", grid=(cdiv(MX, BM), cdiv(N, BN), G), warps=12)
def grouped_gemm_sm90(A: Tensor[e4m3, (G, MX, K)], B: Tensor[e4m3, (G, N, K)],
                      SA: Tensor[f32, (G, cdiv(K, BK), MX)],
                      SB: Tensor[f32, (G * cdiv(N, BN), cdiv(K, BK))],
                      C: Tensor[bf16, (G, MX, N)]):
    sa = smem(e4m3, (STAGES, BM, BK), layout=swizzle(128))
    sb = smem(e4m3, (STAGES, BN, BK), layout=swizzle(128))
    ss = smem(f32, (STAGES, BM))
    ab = pipeline(stages=STAGES, producer="load", consumer="mma")
    ktiles = cdiv(K, BK)

    with role("load", warps=range(0, 4), regs=40):
        for k in range(ktiles):
            s = ab.acquire()
            tma_load(sa[s], A.tile((1, BM, BK), (block.z, block.x, k)), ab)
            tma_load(sb[s], B.tile((1, BN, BK), (block.z, block.y, k)), ab)
            tma_load(ss[s], SA.tile((1, 1, BM), (block.z, k, block.x)), ab)
            ab.commit()

    with role("mma", warps=range(4, 12), regs=232):
        acc = fragment(f32, (BM, BN), layout=wgmma_acc)
        for k in range(ktiles):
            s = ab.wait()
            blk = fragment(f32, (BM, BN), layout=wgmma_acc)
            wgmma(blk, sa[s], sb[s].T)
            # SB is (G, N / 128, K / 128) in memory, declared flat: expert g's block row n
            # is row g * cdiv(N, BN) + n.
            scale = unsqueeze(load(ss[s]), 1) * \
                load(SB.tile((1, 1), (block.z * cdiv(N, BN) + block.y, k)))
            wgmma_wait(0)
            ab.release()
            acc = fma(blk, scale, acc)

        store(C.tile((1, BM, BN), (block.z, block.x, block.y)), cast(acc, bf16))
