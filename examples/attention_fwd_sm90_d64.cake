"""Attention forward, head dim 64, sm_90a three-way ping-pong: O = softmax(Q @ K.T * scale) @ V.

Same layouts as attention_fwd_sm90.cake (Q, K, O (BH, S, D); V given transposed,
Vt (BH, D, S)), with D = 64 and scale = 1 / 8.  At D = 64 a key tile carries half the
tensor work of D = 128 while the softmax work per key stays the same, so the exp2 units,
not the tensor cores, are what the schedule must hide.  FlashAttention-3's answer, taken
here:

- Three consumer warpgroups of 64 query rows each (a block owns BM = 192 rows), taking
  turns on the tensor cores in a ring of three named barriers (wg0 -> wg1 -> wg2 -> wg0),
  generalising attention_fwd_sm90_pingpong.cake: while one warpgroup issues its two
  GEMMs, the other two run their softmax.
- A wider key tile, BN = 128: S is 64 x 128 f32 (64 registers per thread), P in bf16 is
  32 and O (64 x 64 f32) only 32, so the wider tile fits the 160 registers a consumer
  gets once the producer is capped at 24 (4 x 24 + 12 x 160 warps-worth fits 64 K).
  Twice the keys per tile halves the barrier and wgmma-wait overhead per key.
- Four stages: a stage is 16 KB of K plus 16 KB of Vt, so four stages and the 24 KB Q
  tile take 152 KB, and the short per-tile tensor work gets deep prefetch.
- A tile is held as two 64-key halves: a TMA box under swizzle(128) is at most 128 bytes
  wide, which is 64 keys of a Vt row, and fragments are not sliced, so S, P and the
  P @ V wgmma come in two (s0, s1 / p0, p1), sharing one row max and one rescale of O.
- S is a multiple of BN = 128 (no key mask); the last block's query rows may pass S,
  which the TMA load zero-fills and the store clips.
"""

BM, BN = 64, 128           # per warpgroup: 64 query rows; 128 keys per tile
BNH = 64                   # keys per half tile: one 128-byte swizzle span of Vt
D = 64
STAGES = 4
SCALE_LOG2 = 0.18033688011112042   # log2(e) / sqrt(D)
WG1_TURN, WG2_TURN, WG0_TURN = 1, 2, 3

BH = dim("BH")
S = dim("S", multiple_of=BN)

@kernel(arch="sm_90a", grid=(cdiv(S, 3 * BM), BH), warps=16)
def attention_fwd_sm90_d64(Q: Tensor[bf16, (BH, S, D)], K: Tensor[bf16, (BH, S, D)],
                           Vt: Tensor[bf16, (BH, D, S)], O: Tensor[bf16, (BH, S, D)]):
    sq = smem(bf16, (3, BM, D), layout=swizzle(128))
    sk = smem(bf16, (STAGES, BN // BNH, BNH, D), layout=swizzle(128))
    sv = smem(bf16, (STAGES, BN // BNH, D, BNH), layout=swizzle(128))
    qready = mbarrier(count=1)
    kv = pipeline(stages=STAGES, producer="load", consumer=("wg0", "wg1", "wg2"))
    fence_barrier_init()
    syncthreads()

    with role("load", warps=range(0, 4), regs=24):
        qready.expect_tx(3 * BM * D * 2)
        for r in range(3):
            tma_load(sq[r], Q.tile((1, BM, D), (block.y, 3 * block.x + r, 0)), qready)
        for j in range(S // BN):
            st = kv.acquire()
            for h in range(BN // BNH):
                tma_load(sk[st, h], K.tile((1, BNH, D), (block.y, 2 * j + h, 0)), kv)
                tma_load(sv[st, h], Vt.tile((1, D, BNH), (block.y, 0, 2 * j + h)), kv)
            kv.commit()

    with role("wg0", warps=range(4, 8), regs=160):
        m = fragment(f32, (BM,), fill=-inf)  # running row max, in exp2 units
        l = fragment(f32, (BM,))             # running row sum
        o = fragment(f32, (BM, D), layout=wgmma_acc)
        qready.wait(0)
        for j in range(S // BN):
            st = kv.wait()
            if j > 0:
                barrier_sync(WG0_TURN, 8)    # wg2 has issued tile j - 1
            s0 = fragment(f32, (BM, BNH), layout=wgmma_acc)   # keys 0..63 of the tile
            s1 = fragment(f32, (BM, BNH), layout=wgmma_acc)   # keys 64..127
            wgmma(s0, sq[0], sk[st, 0].T)
            wgmma(s1, sq[0], sk[st, 1].T)
            barrier_arrive(WG1_TURN, 8)      # wg1 may issue tile j
            wgmma_wait(0)                    # S(j), and P(j-1) @ V(j-1)
            if j > 0:
                kv.release()                 # stage of tile j - 1
            ms = maximum(m, maximum(row_max(s0), row_max(s1)) * SCALE_LOG2)
            p0 = exp2(fma(s0, SCALE_LOG2, -unsqueeze(ms, 1)))
            p1 = exp2(fma(s1, SCALE_LOG2, -unsqueeze(ms, 1)))
            alpha = exp2(m - ms)             # 0 on the first tile (m = -inf)
            l = fma(l, alpha, row_sum(p0) + row_sum(p1))
            m = ms * 1.0                     # a new value (see docs/kernels/attention.md)
            o = o * unsqueeze(alpha, 1)
            wgmma(o, cast(p0, bf16), sv[st, 0].T)
            wgmma(o, cast(p1, bf16), sv[st, 1].T)
        wgmma_wait(0)
        kv.release()
        o = o / unsqueeze(l, 1)
        store(O.tile((1, BM, D), (block.y, 3 * block.x + 0, 0)), cast(o, bf16))

    with role("wg1", warps=range(8, 12), regs=160):
        m = fragment(f32, (BM,), fill=-inf)  # running row max, in exp2 units
        l = fragment(f32, (BM,))             # running row sum
        o = fragment(f32, (BM, D), layout=wgmma_acc)
        qready.wait(0)
        for j in range(S // BN):
            st = kv.wait()
            barrier_sync(WG1_TURN, 8)        # wg0 has issued tile j
            s0 = fragment(f32, (BM, BNH), layout=wgmma_acc)   # keys 0..63 of the tile
            s1 = fragment(f32, (BM, BNH), layout=wgmma_acc)   # keys 64..127
            wgmma(s0, sq[1], sk[st, 0].T)
            wgmma(s1, sq[1], sk[st, 1].T)
            barrier_arrive(WG2_TURN, 8)      # wg2 may issue tile j
            wgmma_wait(0)                    # S(j), and P(j-1) @ V(j-1)
            if j > 0:
                kv.release()                 # stage of tile j - 1
            ms = maximum(m, maximum(row_max(s0), row_max(s1)) * SCALE_LOG2)
            p0 = exp2(fma(s0, SCALE_LOG2, -unsqueeze(ms, 1)))
            p1 = exp2(fma(s1, SCALE_LOG2, -unsqueeze(ms, 1)))
            alpha = exp2(m - ms)             # 0 on the first tile (m = -inf)
            l = fma(l, alpha, row_sum(p0) + row_sum(p1))
            m = ms * 1.0                     # a new value (see docs/kernels/attention.md)
            o = o * unsqueeze(alpha, 1)
            wgmma(o, cast(p0, bf16), sv[st, 0].T)
            wgmma(o, cast(p1, bf16), sv[st, 1].T)
        wgmma_wait(0)
        kv.release()
        o = o / unsqueeze(l, 1)
        store(O.tile((1, BM, D), (block.y, 3 * block.x + 1, 0)), cast(o, bf16))

    with role("wg2", warps=range(12, 16), regs=160):
        m = fragment(f32, (BM,), fill=-inf)  # running row max, in exp2 units
        l = fragment(f32, (BM,))             # running row sum
        o = fragment(f32, (BM, D), layout=wgmma_acc)
        qready.wait(0)
        for j in range(S // BN):
            st = kv.wait()
            barrier_sync(WG2_TURN, 8)        # wg1 has issued tile j
            s0 = fragment(f32, (BM, BNH), layout=wgmma_acc)   # keys 0..63 of the tile
            s1 = fragment(f32, (BM, BNH), layout=wgmma_acc)   # keys 64..127
            wgmma(s0, sq[2], sk[st, 0].T)
            wgmma(s1, sq[2], sk[st, 1].T)
            if j < S // BN - 1:
                barrier_arrive(WG0_TURN, 8)  # wg0 may issue tile j + 1
            wgmma_wait(0)                    # S(j), and P(j-1) @ V(j-1)
            if j > 0:
                kv.release()                 # stage of tile j - 1
            ms = maximum(m, maximum(row_max(s0), row_max(s1)) * SCALE_LOG2)
            p0 = exp2(fma(s0, SCALE_LOG2, -unsqueeze(ms, 1)))
            p1 = exp2(fma(s1, SCALE_LOG2, -unsqueeze(ms, 1)))
            alpha = exp2(m - ms)             # 0 on the first tile (m = -inf)
            l = fma(l, alpha, row_sum(p0) + row_sum(p1))
            m = ms * 1.0                     # a new value (see docs/kernels/attention.md)
            o = o * unsqueeze(alpha, 1)
            wgmma(o, cast(p0, bf16), sv[st, 0].T)
            wgmma(o, cast(p1, bf16), sv[st, 1].T)
        wgmma_wait(0)
        kv.release()
        o = o / unsqueeze(l, 1)
        store(O.tile((1, BM, D), (block.y, 3 * block.x + 2, 0)), cast(o, bf16))
