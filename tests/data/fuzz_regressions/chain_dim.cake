"""C = A @ B.T on sm_80 (A100): cp.async multistage pipeline + ldmatrix + mma.sync.

A (M, K) and B (N, K) are both K-major, as in a linear layer (y = x @ W.T); C is (M, N).
f16 inputs, f32 accumulation, f16 output.

Design:
- 128x128x32 block tile, 4 warps in a 2x2 grid, each warp owns a 64x64 slab of C
  (128 f32 accumulator registers per thread: the usual Ampere sweet spot).
- A 3-stage cp.async ring: while the tensor cores work on tile k, tiles k+1 and k+2 are
  in flight.  3 x (128x32 + 128x32) x 2 B = 48 KB of shared memory.
- 32 f16 = 64 B per smem row, so swizzle(64) spreads the 8 rows an ldmatrix phase
  reads over all 32 banks.
"""

BM, BN, BK = 128, 128, 32
WM, WN = 64, 64
STAGES = 3

M = dim("M")
N = dim("N", multiple_of=8)   # 16-byte aligned rows of B and C for cp.async / vector stores
K = dim("K", multiple_of=8)   # 16-byte aligned rows of A and B

@kernel(arch="sm_80", grid=(cdiv(M, BM), cdiv(N, BN)), warps=4)
def gemm_sm80(A: Tensor[f16, (M, K)], B: Tensor[f16, (N, K)], C: Tensor[f16, (M, N)]):
    sa = smem(f16, (STAGES, BM, BK), layout=swizzle(64))
    sb = smem(f16, (STAGES, BN, BK), layout=swizzle(64))
    acc = fragment(f32, (WM, WN), layout=mma_acc)

    # warp (wm, wn) of the 2x2 warp grid
    wm = warp.id // (BN // WN)
    wn = warp.id % (BN // WN)
    ktiles = cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK) + cdiv(K, BK)

    # Prologue: put STAGES - 1 tiles in flight, one cp.async group per tile.  Tiles past
    # the end of K are zero-filled, so a short K needs no special case.
    for p in range(STAGES - 1):
        cp_async(sa[p], A.tile((BM, BK), (block.x, p)))
        cp_async(sb[p], B.tile((BN, BK), (block.y, p)))
        cp_async_commit()

    for k in range(ktiles):
        # Groups committed so far: STAGES - 1 + k.  Leaving STAGES - 2 pending means group
        # k (tile k) has landed -- for this thread; syncthreads makes it so for all threads
        # and also proves every warp finished reading the stage refilled below (k - 1).
        cp_async_wait(STAGES - 2)
        syncthreads()

        # Refill the stage consumed in iteration k - 1 with tile k + STAGES - 1.  The group
        # is committed even when the tile is past the end, so the wait count above holds.
        nxt = k + STAGES - 1
        cp_async(sa[nxt % STAGES], A.tile((BM, BK), (block.x, nxt)))
        cp_async(sb[nxt % STAGES], B.tile((BN, BK), (block.y, nxt)))
        cp_async_commit()

        s = k % STAGES
        for kk in range(BK // 16):
            # a: (WM, 16) rows of A.  b: the (WN, 16) K-major slab of B seen as (16, WN).
            a = ldmatrix(sa[s].tile((WM, 16), (wm, kk)))
            b = ldmatrix(sb[s].tile((WN, 16), (wn, kk)).T)
            mma_sync(acc, a, b)

    # Nothing may be left writing shared memory when the block exits.
    cp_async_wait(0)

    # Epilogue: each warp writes its own 64x64 tile; edges of C are clipped.
    store(C.tile((WM, WN), (block.x * (BM // WM) + wm, block.y * (BN // WN) + wn)),
          cast(acc, f16))
