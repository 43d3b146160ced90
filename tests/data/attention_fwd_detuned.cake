"""A de-tuned attention seed: examples/attention_fwd_sm90.cake with a one-stage K/V ring.

The producer cannot load key tile j + 1 until the consumers release tile j, so TMA latency
and the tensor cores take turns.  `cake evolve attention_fwd --seed` on this file must
find its way back (tests/agents/test_evolve_attention.py).

The original docstring follows.

Attention forward on sm_90a (FlashAttention-3 style): O = softmax(Q @ K.T * scale) @ V.

Layouts (BH = batch * heads, one (seq, head_dim) problem per BH index):
- Q (BH, S, D), K (BH, S, D): row-major, K-major for both GEMMs' reads.
- Vt (BH, D, S): V stored transposed.  The second GEMM reads V as its B operand, and the
  lowering emits K-major B only (the `.T` of an (N, K) buffer): with the keys contiguous,
  a (D, BN) tile of Vt is exactly that.  Callers holding V as (BH, S, D) transpose it once.
- O (BH, S, D) bf16.  scale = 1 / sqrt(D).

Design:
- Grid (cdiv(S, BM), BH): block (i, b) owns BM = 128 queries of problem b.  Its Q tile is
  loaded once (one raw mbarrier) and stays in shared memory as D // DK = 2 slabs of DK = 64
  columns (one 128-byte swizzle span per row).
- A producer warpgroup streams K tiles (BN keys x D) and Vt tiles (D x BN keys) through a
  3-stage pipeline (two would leave the consumers waiting on TMA latency).
- Two consumer warpgroups own 64 query rows each.  Per key tile: S = Q @ K.T (wgmma from
  shared memory, f32), the online softmax in registers (running row max m and row sum l,
  one exp2 per element with log2(e) * scale folded into one fma), the O accumulator
  rescaled by exp2(m_old - m_new), then P = bf16(exp2(...)) stays in registers as the A
  operand of O += P @ V: the wgmma A fragment has the accumulator's layout, no shuffles.
- Ragged S: the key loop runs cdiv(S, BN) tiles; TMA zero-fills the keys of the last tile
  past S, which would score 0 and take part in the softmax, so that tile masks them to -inf
  (`col_index` gives each accumulator element its column).  S is a multiple of 8 only
  because a row of Vt (2 * S bytes) must be a 16-byte TMA stride.
"""

BM, BN = 128, 64
D, DK = 128, 64
STAGES = 1   # de-tuned: one stage, so no key tile loads while the last one is used
# log2(e) / sqrt(D): the softmax scale folded into the exp2 argument
SCALE_LOG2 = 0.12751743074602467

BH = dim("BH")
S = dim("S", multiple_of=8)    # Vt rows are 2 * S bytes apart: TMA needs 16-byte strides

@kernel(arch="sm_90a", grid=(cdiv(S, BM), BH), warps=12)
def attention_fwd_sm90(Q: Tensor[bf16, (BH, S, D)], K: Tensor[bf16, (BH, S, D)],
                       Vt: Tensor[bf16, (BH, D, S)], O: Tensor[bf16, (BH, S, D)]):
    sq = smem(bf16, (D // DK, BM, DK), layout=swizzle(128))
    sk = smem(bf16, (STAGES, D // DK, BN, DK), layout=swizzle(128))
    sv = smem(bf16, (STAGES, D, BN), layout=swizzle(128))
    qready = mbarrier(count=1)
    kv = pipeline(stages=STAGES, producer="load", consumer="softmax")
    fence_barrier_init()
    syncthreads()

    with role("load", warps=range(0, 4), regs=40):
        qready.expect_tx(BM * D * 2)
        for h in range(D // DK):
            tma_load(sq[h], Q.tile((1, BM, DK), (block.y, block.x, h)), qready)
        for j in range(cdiv(S, BN)):
            st = kv.acquire()
            for h in range(D // DK):
                tma_load(sk[st, h], K.tile((1, BN, DK), (block.y, j, h)), kv)
            tma_load(sv[st], Vt.tile((1, D, BN), (block.y, 0, j)), kv)
            kv.commit()

    with role("softmax", warps=range(4, 12), regs=232):
        m = fragment(f32, (BM,), fill=-inf)     # running row max, in exp2 units
        l = fragment(f32, (BM,))                # running row sum of exp2
        o = fragment(f32, (BM, D), layout=wgmma_acc)
        qready.wait(0)
        for j in range(cdiv(S, BN)):
            st = kv.wait()
            s = fragment(f32, (BM, BN), layout=wgmma_acc)
            for h in range(D // DK):
                wgmma(s, sq[h], sk[st, h].T)
            wgmma_wait(0)
            if j == cdiv(S, BN) - 1:
                s = where(lt(col_index(s) + j * BN, S), s, -inf)   # keys past S score -inf

            ms = maximum(m, row_max(s) * SCALE_LOG2)   # the new row max
            p = exp2(fma(s, SCALE_LOG2, -unsqueeze(ms, 1)))
            alpha = exp2(m - ms)                # 0 on the first tile (m = -inf)
            l = fma(l, alpha, row_sum(p))
            m = ms * 1.0                        # a new value (see docs/kernels/attention.md)
            o = o * unsqueeze(alpha, 1)         # the previous P @ V has been waited for
            wgmma(o, cast(p, bf16), sv[st].T)
            wgmma_wait(0)
            kv.release()

        o = o / unsqueeze(l, 1)
        store(O.tile((1, BM, D), (block.y, block.x, 0)), cast(o, bf16))
