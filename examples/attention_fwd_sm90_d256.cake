"""Attention forward, head dim 256, sm_90a ping-pong: O = softmax(Q @ K.T * scale) @ V.

Same layouts as attention_fwd_sm90.cake (Q, K, O (BH, S, D); V given transposed,
Vt (BH, D, S)), with D = 256 and scale = 1 / 16; the schedule is the one of
attention_fwd_sm90_pingpong.cake (two consumer warpgroups of 64 query rows each, taking
turns on the tensor cores through two named barriers, so one's softmax hides behind the
other's GEMMs).  What D = 256 changes is the budget:

- Registers: each consumer thread holds a 64 x 256 f32 slice of O (128 registers), S for
  a 64 x 64 key tile (32), P in bf16 (16) and the row statistics.  BN stays at 64: a
  128-key tile would add 48 registers and spill.  The producer is capped at 40, which
  leaves 232 for each consumer (4 warps x 40 + 8 warps x 232 fits 64 K registers).
- Shared memory: Q for the block's 128 rows is 64 KB (four 64-column slabs per
  warpgroup), one key stage is 32 KB of K plus 32 KB of Vt.  Two stages make 192 KB, a
  third would pass the 227 KB a block may use.  Each key tile now carries 4x the tensor
  work of a D = 64 tile, so two stages already cover the TMA latency.
- S = Q @ K.T runs as four k = 64 wgmmas (one per Q / K slab); O += P @ V is one wgmma
  with N = 256, the widest the instruction takes.
"""

BM, BN = 64, 64            # per warpgroup: 64 query rows, 64 keys per tile
D, DK = 256, 64
STAGES = 2
SCALE_LOG2 = 0.09016844005556021   # log2(e) / sqrt(D)
WG1_TURN, WG0_TURN = 1, 2

BH = dim("BH")
S = dim("S", multiple_of=BN)

@kernel(arch="sm_90a", grid=(cdiv(S, 2 * BM), BH), warps=12)
def attention_fwd_sm90_d256(Q: Tensor[bf16, (BH, S, D)], K: Tensor[bf16, (BH, S, D)],
                            Vt: Tensor[bf16, (BH, D, S)], O: Tensor[bf16, (BH, S, D)]):
    sq = smem(bf16, (2, D // DK, BM, DK), layout=swizzle(128))
    sk = smem(bf16, (STAGES, D // DK, BN, DK), layout=swizzle(128))
    sv = smem(bf16, (STAGES, D, BN), layout=swizzle(128))
    qready = mbarrier(count=1)
    kv = pipeline(stages=STAGES, producer="load", consumer=("wg0", "wg1"))
    fence_barrier_init()
    syncthreads()

    with role("load", warps=range(0, 4), regs=40):
        qready.expect_tx(2 * BM * D * 2)
        for r in range(2):
            for h in range(D // DK):
                tma_load(sq[r, h], Q.tile((1, BM, DK), (block.y, 2 * block.x + r, h)), qready)
        for j in range(S // BN):
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
        for j in range(S // BN):
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
        store(O.tile((1, BM, D), (block.y, 2 * block.x + 0, 0)), cast(o, bf16))

    with role("wg1", warps=range(8, 12), regs=232):
        m = fragment(f32, (BM,), fill=-inf)  # running row max, in exp2 units
        l = fragment(f32, (BM,))             # running row sum
        o = fragment(f32, (BM, D), layout=wgmma_acc)
        qready.wait(0)
        for j in range(S // BN):
            st = kv.wait()
            barrier_sync(WG1_TURN, 8)        # wg0 has issued tile j
            s = fragment(f32, (BM, BN), layout=wgmma_acc)
            for h in range(D // DK):
                wgmma(s, sq[1, h], sk[st, h].T)
            if j < S // BN - 1:
                barrier_arrive(WG0_TURN, 8)  # wg0 may issue tile j + 1
            wgmma_wait(0)                    # S(j), and P(j-1) @ V(j-1)
            if j > 0:
                kv.release()                 # stage of tile j - 1
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
        store(O.tile((1, BM, D), (block.y, 2 * block.x + 1, 0)), cast(o, bf16))
