"""Attention forward on sm_90a, FlashAttention-3 schedule: O = softmax(Q @ K.T * scale) @ V.

Same problem, layouts and task as attention_fwd_sm90.cake (Q, K, O (BH, S, D); V given
transposed, Vt (BH, D, S)); see it for the online softmax.  The schedule combines the two
overlaps of FlashAttention-3:

- inter-warpgroup ping-pong, as in attention_fwd_sm90_pingpong.cake: two consumer roles of
  64 query rows each take turns issuing S = Q @ K.T, ordered by two named barriers, so one
  warpgroup's softmax runs while the other's GEMMs occupy the tensor cores;
- intra-warpgroup pipelining: S is double-buffered in registers (`s0` holds the even key
  tiles, `s1` the odd ones).  While tile t is processed, S(t + 1) is already issued into
  the other buffer: `wgmma_wait(2)` leaves exactly the two wgmmas of S(t + 1) in flight
  (one per DK slab), which retires S(t) and P(t - 1) @ V(t - 1); the softmax of S(t) then
  runs on the CUDA cores while the tensor cores compute S(t + 1), and P(t) @ V(t) is issued
  last.  No `wgmma_wait(0)` is left in the steady loop.

Registers cannot be indexed at run time, so the loop body handles two key tiles, one per
buffer, and the tail (one tile or two, by the parity of S // BN) is peeled after it.  A
role holds up to three stages at once (tile t - 1 until its P @ V retires, t, and t + 1
issued ahead), so the pipeline has four: the producer still runs one tile ahead.
"""

BM, BN = 64, 64            # per warpgroup: 64 query rows, 64 keys per tile
D, DK = 128, 64
STAGES = 4
SCALE_LOG2 = 0.12751743074602467   # log2(e) / sqrt(D)
WG1_TURN, WG0_TURN = 1, 2

BH = dim("BH")
S = dim("S", multiple_of=BN)

@kernel(arch="sm_90a", grid=(cdiv(S, 2 * BM), BH), warps=12)
def attention_fwd_sm90_fa3(Q: Tensor[bf16, (BH, S, D)], K: Tensor[bf16, (BH, S, D)],
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
        # S(0) into s0; from here on the next tile's S is always in flight
        st0 = kv.wait()
        s0 = fragment(f32, (BM, BN), layout=wgmma_acc)
        for h in range(D // DK):
            wgmma(s0, sq[0, h], sk[st0, h].T)
        barrier_arrive(WG1_TURN, 8)           # the other role may issue its S
        for i in range((S // BN - 1) // 2):
            # tile 2i is in flight in s0: issue 2i + 1 into s1, then retire 2i
            st1 = kv.wait()
            barrier_sync(WG0_TURN, 8)        # the other role has issued its S
            s1 = fragment(f32, (BM, BN), layout=wgmma_acc)
            for h in range(D // DK):
                wgmma(s1, sq[0, h], sk[st1, h].T)
            barrier_arrive(WG1_TURN, 8)           # the other role may issue its S
            wgmma_wait(2)                        # S(2i) and P(2i-1) @ V(2i-1) retired
            if i > 0:
                kv.release()                     # the stage of tile 2i - 1
            ms = maximum(m, row_max(s0) * SCALE_LOG2)
            pr = exp2(fma(s0, SCALE_LOG2, -unsqueeze(ms, 1)))
            alpha = exp2(m - ms)                 # 0 on the first tile (m = -inf)
            l = fma(l, alpha, row_sum(pr))
            m = ms * 1.0                         # a new value (see docs/kernels/attention.md)
            o = o * unsqueeze(alpha, 1)          # P @ V of the previous tile has retired
            wgmma(o, cast(pr, bf16), sv[st0].T)
            # tile 2i + 1 is in flight in s1: issue 2i + 2 into s0, then retire 2i + 1
            st0 = kv.wait()
            barrier_sync(WG0_TURN, 8)        # the other role has issued its S
            s0 = fragment(f32, (BM, BN), layout=wgmma_acc)
            for h in range(D // DK):
                wgmma(s0, sq[0, h], sk[st0, h].T)
            barrier_arrive(WG1_TURN, 8)           # the other role may issue its S
            wgmma_wait(2)                        # S(2i+1) and P(2i) @ V(2i) retired
            kv.release()                         # the stage of tile 2i
            ms = maximum(m, row_max(s1) * SCALE_LOG2)
            pr = exp2(fma(s1, SCALE_LOG2, -unsqueeze(ms, 1)))
            alpha = exp2(m - ms)                 # 0 on the first tile (m = -inf)
            l = fma(l, alpha, row_sum(pr))
            m = ms * 1.0                         # a new value (see docs/kernels/attention.md)
            o = o * unsqueeze(alpha, 1)          # P @ V of the previous tile has retired
            wgmma(o, cast(pr, bf16), sv[st1].T)
        # the tail: tile S // BN - 2 (two left) or S // BN - 1 (one left) is in s0
        if (S // BN) % 2 == 0:
            st1 = kv.wait()
            barrier_sync(WG0_TURN, 8)        # the other role has issued its S
            s1 = fragment(f32, (BM, BN), layout=wgmma_acc)
            for h in range(D // DK):
                wgmma(s1, sq[0, h], sk[st1, h].T)
            barrier_arrive(WG1_TURN, 8)           # the other role may issue its S
            wgmma_wait(2)                        # S(S/BN - 2) retired
            if S // BN > 2:
                kv.release()                     # the stage of tile S // BN - 3
            ms = maximum(m, row_max(s0) * SCALE_LOG2)
            pr = exp2(fma(s0, SCALE_LOG2, -unsqueeze(ms, 1)))
            alpha = exp2(m - ms)                 # 0 on the first tile (m = -inf)
            l = fma(l, alpha, row_sum(pr))
            m = ms * 1.0                         # a new value (see docs/kernels/attention.md)
            o = o * unsqueeze(alpha, 1)          # P @ V of the previous tile has retired
            wgmma(o, cast(pr, bf16), sv[st0].T)
            wgmma_wait(0)                        # S(S/BN - 1) and P(S/BN - 2) @ V retired
            kv.release()                         # the stage of tile S // BN - 2
            ms = maximum(m, row_max(s1) * SCALE_LOG2)
            pr = exp2(fma(s1, SCALE_LOG2, -unsqueeze(ms, 1)))
            alpha = exp2(m - ms)                 # 0 on the first tile (m = -inf)
            l = fma(l, alpha, row_sum(pr))
            m = ms * 1.0                         # a new value (see docs/kernels/attention.md)
            o = o * unsqueeze(alpha, 1)          # P @ V of the previous tile has retired
            wgmma(o, cast(pr, bf16), sv[st1].T)
        else:
            wgmma_wait(0)                        # S(S/BN - 1) retired
            if S // BN > 1:
                kv.release()                     # the stage of tile S // BN - 2
            ms = maximum(m, row_max(s0) * SCALE_LOG2)
            pr = exp2(fma(s0, SCALE_LOG2, -unsqueeze(ms, 1)))
            alpha = exp2(m - ms)                 # 0 on the first tile (m = -inf)
            l = fma(l, alpha, row_sum(pr))
            m = ms * 1.0                         # a new value (see docs/kernels/attention.md)
            o = o * unsqueeze(alpha, 1)          # P @ V of the previous tile has retired
            wgmma(o, cast(pr, bf16), sv[st0].T)
        wgmma_wait(0)
        kv.release()                             # the stage of the last tile
        o = o / unsqueeze(l, 1)
        store(O.tile((1, BM, D), (block.y, 2 * block.x + 0, 0)), cast(o, bf16))

    with role("wg1", warps=range(8, 12), regs=232):
        m = fragment(f32, (BM,), fill=-inf)  # running row max, in exp2 units
        l = fragment(f32, (BM,))             # running row sum
        o = fragment(f32, (BM, D), layout=wgmma_acc)
        qready.wait(0)
        # S(0) into s0; from here on the next tile's S is always in flight
        st0 = kv.wait()
        barrier_sync(WG1_TURN, 8)        # the other role has issued its S
        s0 = fragment(f32, (BM, BN), layout=wgmma_acc)
        for h in range(D // DK):
            wgmma(s0, sq[1, h], sk[st0, h].T)
        if 0 < S // BN - 1:
            barrier_arrive(WG0_TURN, 8)       # the other role may issue its S
        for i in range((S // BN - 1) // 2):
            # tile 2i is in flight in s0: issue 2i + 1 into s1, then retire 2i
            st1 = kv.wait()
            barrier_sync(WG1_TURN, 8)        # the other role has issued its S
            s1 = fragment(f32, (BM, BN), layout=wgmma_acc)
            for h in range(D // DK):
                wgmma(s1, sq[1, h], sk[st1, h].T)
            barrier_arrive(WG0_TURN, 8)           # the other role may issue its S
            wgmma_wait(2)                        # S(2i) and P(2i-1) @ V(2i-1) retired
            if i > 0:
                kv.release()                     # the stage of tile 2i - 1
            ms = maximum(m, row_max(s0) * SCALE_LOG2)
            pr = exp2(fma(s0, SCALE_LOG2, -unsqueeze(ms, 1)))
            alpha = exp2(m - ms)                 # 0 on the first tile (m = -inf)
            l = fma(l, alpha, row_sum(pr))
            m = ms * 1.0                         # a new value (see docs/kernels/attention.md)
            o = o * unsqueeze(alpha, 1)          # P @ V of the previous tile has retired
            wgmma(o, cast(pr, bf16), sv[st0].T)
            # tile 2i + 1 is in flight in s1: issue 2i + 2 into s0, then retire 2i + 1
            st0 = kv.wait()
            barrier_sync(WG1_TURN, 8)        # the other role has issued its S
            s0 = fragment(f32, (BM, BN), layout=wgmma_acc)
            for h in range(D // DK):
                wgmma(s0, sq[1, h], sk[st0, h].T)
            if 2 * i + 2 < S // BN - 1:
                barrier_arrive(WG0_TURN, 8)       # the other role may issue its S
            wgmma_wait(2)                        # S(2i+1) and P(2i) @ V(2i) retired
            kv.release()                         # the stage of tile 2i
            ms = maximum(m, row_max(s1) * SCALE_LOG2)
            pr = exp2(fma(s1, SCALE_LOG2, -unsqueeze(ms, 1)))
            alpha = exp2(m - ms)                 # 0 on the first tile (m = -inf)
            l = fma(l, alpha, row_sum(pr))
            m = ms * 1.0                         # a new value (see docs/kernels/attention.md)
            o = o * unsqueeze(alpha, 1)          # P @ V of the previous tile has retired
            wgmma(o, cast(pr, bf16), sv[st1].T)
        # the tail: tile S // BN - 2 (two left) or S // BN - 1 (one left) is in s0
        if (S // BN) % 2 == 0:
            st1 = kv.wait()
            barrier_sync(WG1_TURN, 8)        # the other role has issued its S
            s1 = fragment(f32, (BM, BN), layout=wgmma_acc)
            for h in range(D // DK):
                wgmma(s1, sq[1, h], sk[st1, h].T)
            wgmma_wait(2)                        # S(S/BN - 2) retired
            if S // BN > 2:
                kv.release()                     # the stage of tile S // BN - 3
            ms = maximum(m, row_max(s0) * SCALE_LOG2)
            pr = exp2(fma(s0, SCALE_LOG2, -unsqueeze(ms, 1)))
            alpha = exp2(m - ms)                 # 0 on the first tile (m = -inf)
            l = fma(l, alpha, row_sum(pr))
            m = ms * 1.0                         # a new value (see docs/kernels/attention.md)
            o = o * unsqueeze(alpha, 1)          # P @ V of the previous tile has retired
            wgmma(o, cast(pr, bf16), sv[st0].T)
            wgmma_wait(0)                        # S(S/BN - 1) and P(S/BN - 2) @ V retired
            kv.release()                         # the stage of tile S // BN - 2
            ms = maximum(m, row_max(s1) * SCALE_LOG2)
            pr = exp2(fma(s1, SCALE_LOG2, -unsqueeze(ms, 1)))
            alpha = exp2(m - ms)                 # 0 on the first tile (m = -inf)
            l = fma(l, alpha, row_sum(pr))
            m = ms * 1.0                         # a new value (see docs/kernels/attention.md)
            o = o * unsqueeze(alpha, 1)          # P @ V of the previous tile has retired
            wgmma(o, cast(pr, bf16), sv[st1].T)
        else:
            wgmma_wait(0)                        # S(S/BN - 1) retired
            if S // BN > 1:
                kv.release()                     # the stage of tile S // BN - 2
            ms = maximum(m, row_max(s0) * SCALE_LOG2)
            pr = exp2(fma(s0, SCALE_LOG2, -unsqueeze(ms, 1)))
            alpha = exp2(m - ms)                 # 0 on the first tile (m = -inf)
            l = fma(l, alpha, row_sum(pr))
            m = ms * 1.0                         # a new value (see docs/kernels/attention.md)
            o = o * unsqueeze(alpha, 1)          # P @ V of the previous tile has retired
            wgmma(o, cast(pr, bf16), sv[st0].T)
        wgmma_wait(0)
        kv.release()                             # the stage of the last tile
        o = o / unsqueeze(l, 1)
        store(O.tile((1, BM, D), (block.y, 2 * block.x + 1, 0)), cast(o, bf16))
