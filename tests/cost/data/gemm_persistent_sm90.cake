"""examples/gemm_sm90.cake made persistent: one block per SM loops over the output tiles.

Both roles walk the tiles tile_id = block.x, block.x + NSM, ... and derive the tile
coordinates from tile_id (x fastest, as the hardware launches a grid), so the SMs work
on NSM consecutive tiles at a time, as a wave of the one-block-per-tile launch does.
The pipeline runs across tiles: the producer starts the next tile's copies while the
consumers finish the current one.
"""

BM, BN, BK = 128, 256, 64
STAGES = 4

M = dim("M")
N = dim("N", multiple_of=8)   # TMA: every global row stride is a multiple of 16 bytes
K = dim("K", multiple_of=8)

NSM = 132   # SMs of the H100-SXM5: one persistent block each

@kernel(arch="sm_90a", grid=(NSM,), warps=12)
def gemm_sm90(A: Tensor[bf16, (M, K)], B: Tensor[bf16, (N, K)], C: Tensor[bf16, (M, N)]):
    sa = smem(bf16, (STAGES, BM, BK), layout=swizzle(128))
    sb = smem(bf16, (STAGES, BN, BK), layout=swizzle(128))
    # The pipeline owns a full and an empty mbarrier per stage and tracks their phases.
    ab = pipeline(stages=STAGES, producer="load", consumer="mma")
    ktiles = cdiv(K, BK)
    ntiles = cdiv(M, BM) * cdiv(N, BN)   # output tiles, visited by NSM persistent blocks

    with role("load", warps=range(0, 4), regs=40):
        for tile_id in range(block.x, ntiles, NSM):
            tile_x = tile_id % cdiv(M, BM)
            tile_y = tile_id // cdiv(M, BM)
            for k in range(ktiles):
                s = ab.acquire()          # wait until the consumers released stage s
                tma_load(sa[s], A.tile((BM, BK), (tile_x, k)), ab)
                tma_load(sb[s], B.tile((BN, BK), (tile_y, k)), ab)
                ab.commit()               # arrive on full[s], expecting 48 KB of TMA bytes

    with role("mma", warps=range(4, 12), regs=232):
        for tile_id in range(block.x, ntiles, NSM):
            tile_x = tile_id % cdiv(M, BM)
            tile_y = tile_id // cdiv(M, BM)
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

            # Epilogue straight from registers: the 192 KB ring leaves no room to stage a
            # 64 KB C tile in shared memory.  Rows and columns past M and N are clipped.
            store(C.tile((BM, BN), (tile_x, tile_y)), cast(acc, bf16))
