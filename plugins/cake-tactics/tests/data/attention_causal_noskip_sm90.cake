"""Causal attention forward on sm_90a with warpgroup ping-pong:
O = softmax(mask(Q @ K.T * scale)) @ V, where query q attends to keys k <= q only.

Same layouts and schedule as attention_fwd_sm90_pingpong.cake (Q, K, O (BH, S, D); V given
transposed, Vt (BH, D, S); one producer and two consumer roles taking turns on the tensor
cores); see that file and attention_fwd_sm90.cake for the softmax.  What changes:

- Tile skipping: a block owns the 2 * BM = 128 queries of tile qt, the last of which is
  (qt + 1) * 2 * BM - 1, so no key at or past (qt + 1) * 2 * BM takes part.  The producer
  and both consumers walk NT = min(cdiv(S, BN), cdiv((qt + 1) * 2 * BM, BN)) key tiles
  instead of cdiv(S, BN): the key tiles above the diagonal are neither loaded nor
  multiplied, which halves the work for long sequences.
- The causal mask: scores with key > query become -inf before the row max, on the key
  tiles that reach the diagonal only (j >= 2 * qt; the tiles before it are all below).  It
  also masks the keys past S of a ragged last key tile for every query that is stored
  (key <= query < S); the rows of queries past S are computed on zero-filled Q rows and
  clipped by the store.
- Heavy blocks first: block.x = 0 takes the last query tile (the most key tiles), so the
  longest blocks start in the first wave and the short ones fill the tail.
"""

BM, BN = 64, 64            # per warpgroup: 64 query rows, 64 keys per tile
D, DK = 128, 64
STAGES = 3
SCALE_LOG2 = 0.12751743074602467   # log2(e) / sqrt(D)
WG1_TURN, WG0_TURN = 1, 2

BH = dim("BH")
S = dim("S", multiple_of=8)    # Vt rows are 2 * S bytes apart: TMA needs 16-byte strides

@kernel(arch="sm_90a", grid=(cdiv(S, 2 * BM), BH), warps=12)
def attention_fwd_sm90_causal(Q: Tensor[bf16, (BH, S, D)], K: Tensor[bf16, (BH, S, D)],
                              Vt: Tensor[bf16, (BH, D, S)], O: Tensor[bf16, (BH, S, D)]):
    sq = smem(bf16, (2, D // DK, BM, DK), layout=swizzle(128))
    sk = smem(bf16, (STAGES, D // DK, BN, DK), layout=swizzle(128))
    sv = smem(bf16, (STAGES, D, BN), layout=swizzle(128))
    qready = mbarrier(count=1)
    kv = pipeline(stages=STAGES, producer="load", consumer=("wg0", "wg1"))
    fence_barrier_init()
    syncthreads()
    qt = cdiv(S, 2 * BM) - 1 - block.x                         # heavy query tiles first
    NT = cdiv(S, BN)                                          # every key tile (no skipping)

    with role("load", warps=range(0, 4), regs=40):
        qready.expect_tx(2 * BM * D * 2)
        for r in range(2):
            for h in range(D // DK):
                tma_load(sq[r, h], Q.tile((1, BM, DK), (block.y, 2 * qt + r, h)), qready)
        for j in range(NT):
            st = kv.acquire()
            for h in range(D // DK):
                tma_load(sk[st, h], K.tile((1, BN, DK), (block.y, j, h)), kv)
            tma_load(sv[st], Vt.tile((1, D, BN), (block.y, 0, j)), kv)
            kv.commit()

    with role("wg0", warps=range(4, 8), regs=232):
        m = fragment(f32, (BM,), fill=-inf)  # running row max, in exp2 units
        l = fragment(f32, (BM,))             # running row sum
        o = fragment(f32, (BM, D), layout=wgmma_acc)
        qready.wait(0)
        for j in range(NT):
            st = kv.wait()
            if j > 0:
                barrier_sync(WG0_TURN, 8)    # wg1 has issued tile j - 1
            s = fragment(f32, (BM, BN), layout=wgmma_acc)
            for h in range(D // DK):
                wgmma(s, sq[0, h], sk[st, h].T)
            barrier_arrive(WG1_TURN, 8)      # wg1 may issue tile j
            wgmma_wait(0)                    # S(j), and P(j-1) @ V(j-1)
            if j > 0:
                kv.release()                 # stage of tile j - 1
            if j >= 2 * qt:                  # a tile on the diagonal
                # causal: key <= query (which also drops the keys past S of stored queries)
                s = where(le(col_index(s) + j * BN, row_index(s) + 2 * qt * BM), s, -inf)
            ms = maximum(m, row_max(s) * SCALE_LOG2)
            p = exp2(fma(s, SCALE_LOG2, -unsqueeze(ms, 1)))
            alpha = exp2(m - ms)             # 0 on the first tile (m = -inf)
            l = fma(l, alpha, row_sum(p))
            m = ms * 1.0                     # a new value (see docs/kernels/attention.md)
            o = o * unsqueeze(alpha, 1)
            wgmma(o, cast(p, bf16), sv[st].T)
        wgmma_wait(0)
        kv.release()
        o = o / unsqueeze(l, 1)
        store(O.tile((1, BM, D), (block.y, 2 * qt + 0, 0)), cast(o, bf16))

    with role("wg1", warps=range(8, 12), regs=232):
        m = fragment(f32, (BM,), fill=-inf)  # running row max, in exp2 units
        l = fragment(f32, (BM,))             # running row sum
        o = fragment(f32, (BM, D), layout=wgmma_acc)
        qready.wait(0)
        for j in range(NT):
            st = kv.wait()
            barrier_sync(WG1_TURN, 8)        # wg0 has issued tile j
            s = fragment(f32, (BM, BN), layout=wgmma_acc)
            for h in range(D // DK):
                wgmma(s, sq[1, h], sk[st, h].T)
            if j < NT - 1:
                barrier_arrive(WG0_TURN, 8)  # wg0 may issue tile j + 1
            wgmma_wait(0)                    # S(j), and P(j-1) @ V(j-1)
            if j > 0:
                kv.release()                 # stage of tile j - 1
            if j >= 2 * qt:                  # a tile on the diagonal
                s = where(le(col_index(s) + j * BN, row_index(s) + (2 * qt + 1) * BM), s, -inf)
            ms = maximum(m, row_max(s) * SCALE_LOG2)
            p = exp2(fma(s, SCALE_LOG2, -unsqueeze(ms, 1)))
            alpha = exp2(m - ms)             # 0 on the first tile (m = -inf)
            l = fma(l, alpha, row_sum(p))
            m = ms * 1.0                     # a new value (see docs/kernels/attention.md)
            o = o * unsqueeze(alpha, 1)
            wgmma(o, cast(p, bf16), sv[st].T)
        wgmma_wait(0)
        kv.release()
        o = o / unsqueeze(l, 1)
        store(O.tile((1, BM, D), (block.y, 2 * qt + 1, 0)), cast(o, bf16))
