"""The ping-pong attention schedule with 64-key tiles: the shape of the FlashAttention-3
data kernel (attention_fwd_sm90_fa3.cake), so that the cost model's two schedules are
compared at one tile size (examples/attention_fwd_sm90_pingpong.cake takes 128 keys).

Same problem, layouts and task as attention_fwd_sm90.cake (Q, K, O (BH, S, D); V given
transposed, Vt (BH, D, S)); see that file for the softmax.  What changes is the schedule:

- Each consumer warpgroup is its own role with its own 64 query rows (a block still owns
  BM = 128 rows).  The two roles take turns on the tensor cores, ordered by two named
  barriers as in kmeans_assign_sm90_pingpong.cake: in its turn a role issues
  S(j) = Q @ K(j).T, then lets the other role issue while it waits for S(j) (and for its
  own P(j-1) @ V(j-1), issued at the end of the previous iteration) and runs the softmax
  of S(j) on the CUDA cores (exp2 on the MUFU units).  One warpgroup's softmax thus hides
  behind the other's GEMMs, which is what FlashAttention-3 does.
- P(j) @ V(j) is issued at the bottom of iteration j and retires with S(j + 1): it runs
  while the role waits for the next stage and for its turn.
- The stage of key tile j - 1 goes back to the producer once P(j-1) @ V(j-1) retired.
"""

BM, BN = 64, 64            # per warpgroup: 64 query rows, 64 keys per tile
D, DK = 128, 64
STAGES = 3
SCALE_LOG2 = 0.12751743074602467   # log2(e) / sqrt(D)
WG1_TURN, WG0_TURN = 1, 2

BH = dim("BH")
S = dim("S", multiple_of=BN)

@kernel(arch="sm_90a", grid=(cdiv(S, 2 * BM), BH), warps=12)
def attention_fwd_sm90_pingpong(Q: Tensor[bf16, (BH, S, D)], K: Tensor[bf16, (BH, S, D)],
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
