# A de-tuned copy of examples/gemm_sm80.cake, the first starting point of
# bench/agent_search.py: a first draft that works but leaves every knob low.  32x32 block
# tiles (16x16 per warp: each byte loaded feeds few MMAs) and a 2-stage ring that hides no
# memory latency.  The warp tile follows the block tile, so each tile constant can be
# retuned on its own.  Getting close to the best kernel the tactics reach takes four moves
# that each matter on their own (more stages; BM and BN doubled, then one of them doubled
# again), and some tempting moves stop paying later (BK = 64 gains 40% here, and costs a
# third once the tiles have grown and the ring is 4 deep).
"""C = A @ B.T on sm_80 (A100): cp.async multistage pipeline + ldmatrix + mma.sync.

A (M, K) and B (N, K) are both K-major, as in a linear layer (y = x @ W.T); C is (M, N).
f16 inputs, f32 accumulation, f16 output.

Design:
- BM x BN x BK block tile, 4 warps in a 2x2 grid, each warp owns a (BM/2)x(BN/2) slab of C.
- A STAGES-deep cp.async ring: while the tensor cores work on tile k, the next
  STAGES - 1 tiles are in flight.
- 32 f16 = 64 B per smem row, so swizzle(64) spreads the 8 rows an ldmatrix phase
  reads over all 32 banks.
"""

BM, BN, BK = 32, 32, 32
WM, WN = BM // 2, BN // 2   # the 2x2 warp grid splits the block tile
STAGES = 2

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
    ktiles = cdiv(K, BK)

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

    # Epilogue: each warp writes its own WM x WN tile; edges of C are clipped.
    store(C.tile((WM, WN), (block.x * (BM // WM) + wm, block.y * (BN // WN) + wn)),
          cast(acc, f16))
