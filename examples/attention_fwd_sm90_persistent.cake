"""attention_fwd_sm90_pingpong.cake as a persistent kernel: one block per SM walks the tiles.

Same problem, layouts, task and consumer schedule as the ping-pong kernel (read it first):
two consumer roles of 64 query rows each take turns on the tensor cores, 128-key tiles,
P @ V as two wgmmas on the column halves of P.  What changes is who owns a block:

- The launch holds one block per SM (`sm_count()`, asked of the driver at launch), or one
  per work item when there are fewer.  A work item is one 128-row query tile of one head;
  block b walks the items b, b + grid, ...  Items are numbered query tile fastest, so the
  blocks running at one time work on a few heads and share their K and V in L2.
- Q comes through a two-stage pipeline of its own (`qp`).  The block's first Q is loaded
  before the item loop; each later one is issued in the key loop of the item before it,
  right after its last K/V stage, into the other Q buffer, so it lands while the consumers
  still work on the current item.  A role gives its Q buffer back once its last
  S = Q @ K.T of the item retired.
- The K/V ring (two 64 KB stages) runs on across items: the producer has the first stages
  of the next item in flight while the consumers finish the current one.
- O leaves through shared memory: each role writes its 64 x 128 tile with stmatrix into
  its own staging buffer and one thread stores it with TMA (two 64-column boxes), which
  runs while the role starts the next item; the staging buffer is rewritten only after
  that store has read it (`tma_store_wait(0)`, then the role's own named barrier).
- The turn order of the two roles restarts with every item (wg0 first), so each named
  barrier sees as many arrivals as waits per item.

Shared memory: Q 2 x 32 KB + 2 stages x 64 KB + O 32 KB = 224 KB.
"""

BM, BN = 64, 128           # per warpgroup: 64 query rows, 128 keys per tile
D, DK, VK = 128, 64, 64    # Q and K tiles in 64-column halves of D; Vt in 64-key halves
STAGES = 2
SCALE_LOG2 = 0.12751743074602467   # log2(e) / sqrt(D)
WG1_TURN, WG0_TURN = 1, 2
WG0_EPI, WG1_EPI = 3, 4    # each role's own barrier around its O staging buffer

BH = dim("BH")
S = dim("S", multiple_of=BN)

QTILES = cdiv(S, 2 * BM)   # 128-row query tiles per head
ITEMS = QTILES * BH

@kernel(arch="sm_90a", grid=(min(sm_count(), ITEMS),), warps=12)
def attention_fwd_sm90_persistent(Q: Tensor[bf16, (BH, S, D)], K: Tensor[bf16, (BH, S, D)],
                                  Vt: Tensor[bf16, (BH, D, S)], O: Tensor[bf16, (BH, S, D)]):
    sq = smem(bf16, (2, 2, D // DK, BM, DK), layout=swizzle(128))   # (Q stage, role, ...)
    sk = smem(bf16, (STAGES, D // DK, BN, DK), layout=swizzle(128))
    sv = smem(bf16, (STAGES, BN // VK, D, VK), layout=swizzle(128))
    so = smem(bf16, (2, D // DK, BM, DK), layout=swizzle(128))      # O of each role
    qp = pipeline(stages=2, producer="load", consumer=("wg0", "wg1"))
    kv = pipeline(stages=STAGES, producer="load", consumer=("wg0", "wg1"))
    fence_barrier_init()
    syncthreads()

    with role("load", warps=range(0, 4), regs=40):
        qs = qp.acquire()                        # Q of the block's first item
        qh, q0 = block.x // QTILES, 2 * (block.x % QTILES)
        for r in range(2):
            for h in range(D // DK):
                tma_load(sq[qs, r, h], Q.tile((1, BM, DK), (qh, q0 + r, h)), qp)
        qp.commit()
        for item in range(block.x, ITEMS, sm_count()):
            bh = item // QTILES
            for j in range(S // BN):
                st = kv.acquire()
                for h in range(D // DK):
                    tma_load(sk[st, h], K.tile((1, BN, DK), (bh, j, h)), kv)
                for h in range(BN // VK):
                    tma_load(sv[st, h], Vt.tile((1, D, VK), (bh, 0, 2 * j + h)), kv)
                kv.commit()
                if j == S // BN - 1:
                    nxt = item + sm_count()      # Q of the next item, into the other buffer
                    if nxt < ITEMS:
                        qs = qp.acquire()
                        qh, q0 = nxt // QTILES, 2 * (nxt % QTILES)
                        for r in range(2):
                            for h in range(D // DK):
                                tma_load(sq[qs, r, h], Q.tile((1, BM, DK), (qh, q0 + r, h)), qp)
                        qp.commit()

    with role("wg0", warps=range(4, 8), regs=232):
        for item in range(block.x, ITEMS, sm_count()):
            bh = item // QTILES
            qt = item % QTILES
            m = fragment(f32, (BM,), fill=-inf)  # running row max, in exp2 units
            l = fragment(f32, (BM,))             # running row sum
            o = fragment(f32, (BM, D), layout=wgmma_acc)
            qs = qp.wait()
            for j in range(S // BN):
                st = kv.wait()
                if j > 0:
                    barrier_sync(WG0_TURN, 8)    # wg1 has issued tile j - 1
                s = fragment(f32, (BM, BN), layout=wgmma_acc)
                for h in range(D // DK):
                    wgmma(s, sq[qs, 0, h], sk[st, h].T)
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
                pb = cast(p, bf16)
                wgmma(o, pb[:, 0:VK], sv[st, 0].T)       # keys 0 .. 63 of the tile
                wgmma(o, pb[:, VK:BN], sv[st, 1].T)      # keys 64 .. 127
            wgmma_wait(0)
            kv.release()
            qp.release()                         # every S of this item has retired
            o = o * unsqueeze(1.0 / l, 1)       # one reciprocal per row, not per element
            ob = cast(o, bf16)
            tma_store_wait(0)                    # the last item's store has read so[0]
            barrier_sync(WG0_EPI, 4)               # ... and every warp knows it
            for h in range(D // DK):
                stmatrix(so[0, h], ob, h)
            fence_proxy_async()
            barrier_sync(WG0_EPI, 4)               # all of O is in so[0]
            for h in range(D // DK):
                tma_store(O.tile((1, BM, DK), (bh, 2 * qt + 0, h)), so[0, h])
        tma_store_wait(0)                        # the last store has read so[0]

    with role("wg1", warps=range(8, 12), regs=232):
        for item in range(block.x, ITEMS, sm_count()):
            bh = item // QTILES
            qt = item % QTILES
            m = fragment(f32, (BM,), fill=-inf)  # running row max, in exp2 units
            l = fragment(f32, (BM,))             # running row sum
            o = fragment(f32, (BM, D), layout=wgmma_acc)
            qs = qp.wait()
            for j in range(S // BN):
                st = kv.wait()
                barrier_sync(WG1_TURN, 8)        # wg0 has issued tile j
                s = fragment(f32, (BM, BN), layout=wgmma_acc)
                for h in range(D // DK):
                    wgmma(s, sq[qs, 1, h], sk[st, h].T)
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
                pb = cast(p, bf16)
                wgmma(o, pb[:, 0:VK], sv[st, 0].T)       # keys 0 .. 63 of the tile
                wgmma(o, pb[:, VK:BN], sv[st, 1].T)      # keys 64 .. 127
            wgmma_wait(0)
            kv.release()
            qp.release()                         # every S of this item has retired
            o = o * unsqueeze(1.0 / l, 1)       # one reciprocal per row, not per element
            ob = cast(o, bf16)
            tma_store_wait(0)                    # the last item's store has read so[1]
            barrier_sync(WG1_EPI, 4)               # ... and every warp knows it
            for h in range(D // DK):
                stmatrix(so[1, h], ob, h)
            fence_proxy_async()
            barrier_sync(WG1_EPI, 4)               # all of O is in so[1]
            for h in range(D // DK):
                tma_store(O.tile((1, BM, DK), (bh, 2 * qt + 1, h)), so[1, h])
        tma_store_wait(0)                        # the last store has read so[1]
