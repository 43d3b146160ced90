"""MoE grouped GEMM, contiguous layout with routing read from memory: C[r] = A[r] @ B[g].T
for every row r of expert g.

The experts' tokens are stacked in one (MT, K) matrix A, expert g's at rows
Offsets[g] .. Offsets[g] + Counts[g] (DeepGEMM's contiguous layout: each segment starts on a
BM-row boundary, padded up to the next one).  The counts are data, not launch sizes: the
kernel reads them with `load_scalar`, so a block computes only the tiles its expert has
(none for an empty expert) and zeroes the padding rows of its last tile, which belong to no
token.  Compare grouped_gemm_sm90.cake, which computes every expert at full capacity.

Design: one block per (BN column block, expert), looping over the expert's row tiles; the
pipeline runs across tile boundaries, so the producer fetches the next tile's first stages
while the consumers finish the last one.  128x256x64 tiles and roles as gemm_sm90.cake.
"""

BM, BN, BK = 128, 256, 64
STAGES = 4

G = dim("G")                     # experts
MT = dim("MT")                   # rows of A and C: every expert's segment, padded
N = dim("N", multiple_of=8)      # TMA: every global row stride is a multiple of 16 bytes
K = dim("K", multiple_of=8)

@kernel(arch="sm_90a", grid=(cdiv(N, BN), G), warps=12)
def grouped_gemm_sm90_routed(A: Tensor[bf16, (MT, K)], B: Tensor[bf16, (G, N, K)],
                             Offsets: Tensor[i32, (G + 1,)], Counts: Tensor[i32, (G,)],
                             C: Tensor[bf16, (MT, N)]):
    sa = smem(bf16, (STAGES, BM, BK), layout=swizzle(128))
    sb = smem(bf16, (STAGES, BN, BK), layout=swizzle(128))
    ab = pipeline(stages=STAGES, producer="load", consumer="mma")
    ktiles = cdiv(K, BK)
    # The expert's segment, read once per block: every thread reads the same two words.
    first = load_scalar(Offsets, (block.y,)) // BM        # its first row tile
    rows = load_scalar(Counts, (block.y,), expect=MT // G)   # its tokens (0 for none)
    mtiles = cdiv(rows, BM)                                # row tiles it has

    with role("load", warps=range(0, 4), regs=40):
        for t in range(mtiles):
            for k in range(ktiles):
                s = ab.acquire()
                tma_load(sa[s], A.tile((BM, BK), (first + t, k)), ab)
                tma_load(sb[s], B.tile((1, BN, BK), (block.y, block.x, k)), ab)
                ab.commit()

    with role("mma", warps=range(4, 12), regs=232):
        for t in range(mtiles):
            acc = fragment(f32, (BM, BN), layout=wgmma_acc)
            # one wgmma group in flight, as gemm_sm90.cake: wait(1) retires tile k - 1
            s = ab.wait()
            wgmma(acc, sa[s], sb[s].T)
            for k in range(1, ktiles):
                s = ab.wait()
                wgmma(acc, sa[s], sb[s].T)
                wgmma_wait(1)
                ab.release()
            wgmma_wait(0)
            ab.release()
            # rows past the expert's count are its segment's padding: no token, so zero
            acc = where(lt(row_index(acc) + t * BM, rows), acc, 0.0)
            store(C.tile((BM, BN), (first + t, block.x)), cast(acc, bf16))
