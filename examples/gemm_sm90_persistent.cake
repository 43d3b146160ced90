"""examples/gemm_sm90.cake as a persistent kernel with a tile scheduler.

The launch holds one block per SM of the device it runs on (`sm_count()`: the launcher
asks the driver; no SM count is written here), or one per tile when there are fewer
tiles.  Each block walks the linear tile indices block.x, block.x + grid, ...; both roles
walk the same ones, so the pipeline keeps running across tiles.  `tile_coords` maps an
index to its (M, N) tile in a grouped raster: bands of 8 M-tiles, M fastest, so the
blocks working at one time share a few B panels in L2 instead of each reading its own.
"""

BM, BN, BK = 128, 256, 64
STAGES = 4
GROUP = 8

M = dim("M")
N = dim("N", multiple_of=8)   # TMA: every global row stride is a multiple of 16 bytes
K = dim("K", multiple_of=8)

TILES_M, TILES_N = cdiv(M, BM), cdiv(N, BN)
TILES = TILES_M * TILES_N

@kernel(arch="sm_90a", grid=(min(sm_count(), TILES),), warps=12)
def gemm_sm90_persistent(A: Tensor[bf16, (M, K)], B: Tensor[bf16, (N, K)],
                         C: Tensor[bf16, (M, N)]):
    sa = smem(bf16, (STAGES, BM, BK), layout=swizzle(128))
    sb = smem(bf16, (STAGES, BN, BK), layout=swizzle(128))
    ab = pipeline(stages=STAGES, producer="load", consumer="mma")
    ktiles = cdiv(K, BK)

    with role("load", warps=range(0, 4), regs=40):
        for tile_id in range(block.x, TILES, sm_count()):
            tm, tn = tile_coords(tile_id, TILES_M, TILES_N, group=GROUP)
            for k in range(ktiles):
                s = ab.acquire()
                tma_load(sa[s], A.tile((BM, BK), (tm, k)), ab)
                tma_load(sb[s], B.tile((BN, BK), (tn, k)), ab)
                ab.commit()

    with role("mma", warps=range(4, 12), regs=232):
        for tile_id in range(block.x, TILES, sm_count()):
            tm, tn = tile_coords(tile_id, TILES_M, TILES_N, group=GROUP)
            acc = fragment(f32, (BM, BN), layout=wgmma_acc)
            s = ab.wait()
            wgmma(acc, sa[s], sb[s].T)
            for k in range(1, ktiles):
                s = ab.wait()
                wgmma(acc, sa[s], sb[s].T)
                wgmma_wait(1)
                ab.release()              # stage of tile k - 1
            wgmma_wait(0)
            ab.release()                  # stage of the last tile
            store(C.tile((BM, BN), (tm, tn)), cast(acc, bf16))
