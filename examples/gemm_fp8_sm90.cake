"""C = (A * sa) @ (B * sb).T on sm_90a: fp8 (e4m3) GEMM with fine-grained scaling.

A (M, K) and B (N, K) are e4m3, K-major; C is (M, N) bf16.  The scales follow the
DeepGEMM convention: one f32 per token per 128 values of K for A (SA), one f32 per
128x128 block of B (SB).  SA is stored transposed, (cdiv(K, 128), M), so that the BM
scales a block needs for one K block are contiguous and one TMA box moves them.

Design:
- 128x128x128 block tile.  128 e4m3 = 128 B per smem row: one swizzle(128) atom, and
  one K tile is exactly one scale block, so each K tile is promoted once.
- One producer warpgroup ("load") TMA-loads the A and B tiles and the BM scales of A
  into a 6-stage ring: 6 x (16 + 16 + 0.5) KB = 195 KB of shared memory.
- Two consumer warpgroups ("mma") each own 64 rows.  Per K tile: four fp8 wgmma K steps
  of 32 into a block accumulator `blk` (the first step overwrites it: `accumulate=False`,
  so it is never cleared), then the promotion
  `acc = fma(blk, sa * sb, acc)` in f32.  The fp8 tensor cores accumulate with limited
  precision; promoting every 128 values of K keeps the long sum in true f32.
- SB is read from global memory by the consumers (one scalar per K tile): a TMA box
  needs at least 16 bytes, and the L2 serves the same scalar to every block of a row.
"""

BM, BN, BK = 128, 128, 128
STAGES = 6

M = dim("M", multiple_of=4)   # TMA: SA's rows (M f32) must be a multiple of 16 bytes
N = dim("N", multiple_of=16)  # TMA: every global row stride is a multiple of 16 bytes
K = dim("K", multiple_of=16)

@kernel(arch="sm_90a", grid=(cdiv(M, BM), cdiv(N, BN)), warps=12)
def gemm_fp8_sm90(A: Tensor[e4m3, (M, K)], B: Tensor[e4m3, (N, K)],
                  SA: Tensor[f32, (cdiv(K, BK), M)], SB: Tensor[f32, (cdiv(N, BN), cdiv(K, BK))],
                  C: Tensor[bf16, (M, N)]):
    sa = smem(e4m3, (STAGES, BM, BK), layout=swizzle(128))
    sb = smem(e4m3, (STAGES, BN, BK), layout=swizzle(128))
    ss = smem(f32, (STAGES, BM))
    ab = pipeline(stages=STAGES, producer="load", consumer="mma")
    ktiles = cdiv(K, BK)

    with role("load", warps=range(0, 4), regs=40):
        for k in range(ktiles):
            s = ab.acquire()
            tma_load(sa[s], A.tile((BM, BK), (block.x, k)), ab)
            tma_load(sb[s], B.tile((BN, BK), (block.y, k)), ab)
            tma_load(ss[s], SA.tile((1, BM), (k, block.x)), ab)
            ab.commit()

    with role("mma", warps=range(4, 12), regs=232):
        acc = fragment(f32, (BM, BN), layout=wgmma_acc)
        for k in range(ktiles):
            s = ab.wait()
            blk = fragment(f32, (BM, BN), layout=wgmma_acc, fill=None)
            wgmma(blk, sa[s], sb[s].T, accumulate=False)   # blk = A @ B: no clearing
            # The scales are read while the tensor cores run: the row scales from the
            # stage, B's block scale from global memory (L2).
            scale = unsqueeze(load(ss[s]), 1) * load(SB.tile((1, 1), (block.y, k)))
            wgmma_wait(0)
            ab.release()
            acc = fma(blk, scale, acc)

        store(C.tile((BM, BN), (block.x, block.y)), cast(acc, bf16))
