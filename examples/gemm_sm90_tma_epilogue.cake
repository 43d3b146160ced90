"""C = A @ B.T on sm_90a (H100/H200): gemm_sm90 with a sub-tiled TMA-store epilogue.

A (M, K) and B (N, K) are K-major (a linear layer: y = x @ W.T); C is (M, N).
bf16 inputs, f32 accumulation, bf16 output.

Design:
- 128x256x64 block tile.  64 bf16 = 128 B per smem row: exactly one swizzle(128) atom,
  the layout both TMA and wgmma read without bank conflicts.
- One producer warpgroup ("load") issues TMA copies into a 4-stage ring:
  4 x (128x64 + 256x64) x 2 B = 192 KB of shared memory (the opt-in limit is 227 KB).
- Two consumer warpgroups ("mma") each own a 64x256 slab of the 128x256 accumulator
  (128 f32 registers per thread).
- Epilogue: the accumulator leaves in 128x64 sub-tiles, stmatrix into two swizzled 16 KB
  buffers in turn, each written to C by one TMA store: 192 + 32 = 224 KB of shared memory.
- setmaxnreg through `regs=`: the producer only computes addresses, so it gives registers
  back (40) and the consumers take them (232): 128 x 40 + 256 x 232 = 64512 <= 65536.
"""

BM, BN, BK = 128, 256, 64
STAGES = 4
EN = 64          # epilogue sub-tile width: 64 bf16 = 128 B rows, one swizzle(128) atom

M = dim("M")
N = dim("N", multiple_of=8)   # TMA: every global row stride is a multiple of 16 bytes
K = dim("K", multiple_of=8)

@kernel(arch="sm_90a", grid=(cdiv(M, BM), cdiv(N, BN)), warps=12)
def gemm_sm90_tma_epilogue(A: Tensor[bf16, (M, K)], B: Tensor[bf16, (N, K)], C: Tensor[bf16, (M, N)]):
    sa = smem(bf16, (STAGES, BM, BK), layout=swizzle(128))
    sb = smem(bf16, (STAGES, BN, BK), layout=swizzle(128))
    sc = smem(bf16, (2, BM, EN), layout=swizzle(128))   # epilogue: two C sub-tiles, 32 KB
    # The pipeline owns a full and an empty mbarrier per stage and tracks their phases.
    ab = pipeline(stages=STAGES, producer="load", consumer="mma")
    ktiles = cdiv(K, BK)

    with role("load", warps=range(0, 4), regs=40):
        for k in range(ktiles):
            s = ab.acquire()          # wait until the consumers released stage s
            tma_load(sa[s], A.tile((BM, BK), (block.x, k)), ab)
            tma_load(sb[s], B.tile((BN, BK), (block.y, k)), ab)
            ab.commit()               # arrive on full[s], expecting 48 KB of TMA bytes

    with role("mma", warps=range(4, 12), regs=232):
        acc = fragment(f32, (BM, BN), layout=wgmma_acc)
        # Keep one wgmma group in flight: issue tile k, then wait until only that group is
        # pending, which proves tile k - 1 was read and its stage can go back.  release()
        # hands back stages in the order wait() took them.
        s = ab.wait()
        wgmma(acc, sa[s], sb[s].T)
        for k in range(1, ktiles):
            s = ab.wait()
            wgmma(acc, sa[s], sb[s].T)
            wgmma_wait(1)
            ab.release()              # stage of tile k - 1
        wgmma_wait(0)
        ab.release()                  # stage of the last tile

        # Epilogue through shared memory in (BM, EN) sub-tiles: each warp stmatrix-es its
        # rows of the sub-tile (16-byte rows at swizzled addresses, no bank conflicts),
        # fences its generic writes for the async proxy, the eight warps meet, and the
        # role's thread 0 issues one TMA store per sub-tile (clipped at M and N).  Two
        # sub-tile buffers: the store of sub-tile j - 1 drains while j is written.  The cast
        # sits inside the loop so that each iteration converts only the columns it stores.
        for j in range(BN // EN):
            stmatrix(sc[j % 2], cast(acc, bf16), j)
            fence_proxy_async()
            barrier_sync(1, 8)
            tma_store(C.tile((BM, EN), (block.x, block.y * (BN // EN) + j)), sc[j % 2])
            tma_store_wait(1)         # the store of j - 1 has read sc[(j + 1) % 2]
            barrier_sync(2, 8)        # ... and every warp knows it before writing there
        tma_store_wait(0)
