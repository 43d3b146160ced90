"""Decode attention, split step (flash-decoding) on sm_90a: one query token per sequence.

For each sequence b, KV head kh and split sp, over the keys n of that split:
  Opart[sp, b, kh, g] = sum_n softmax_n(q . k_n / sqrt(D)) v_n         (normalised, f32)
  LSE[sp, b, kh, g]   = log(sum_n exp(q . k_n / sqrt(D)))               (natural log, f32)
for the G = H / HKV query heads g sharing KV head kh (GQA).  The combine kernel merges the
splits.  H = 32 query heads, HKV = 8 KV heads, D = 128.

Layouts:
- Q (B, HKV, G, D): the (B, H, D) query, reshaped (free: same bytes), so that the G heads of
  one KV head are one TMA box.
- K (B, HKV, S, D): the KV cache, contiguous per (sequence, KV head), S a launch dim.
- Vt (B, HKV, D, S): V transposed, so P @ V reads it K-major as the lowering requires (see
  examples/attention_fwd_sm90.cake).  A decode cache written in this layout costs nothing.
- Opart (NSPLIT, B, HKV, G, D), LSE (NSPLIT, B, HKV, G): reshapes of (NSPLIT, B, H, D) and
  (NSPLIT, B, H).

Design (memory-bound: every K/V byte is read once, by the block of its KV head):
- Grid (NSPLIT, HKV, B).  Block (sp, kh, b) owns TPS = cdiv(cdiv(S, BN), NSPLIT) key tiles
  of BN = 64 keys starting at tile sp * TPS.  NSPLIT is a launch dim: a caller picks it so
  that NSPLIT * B * HKV blocks (one per SM: 144 KB of shared memory) fill the 132 SMs about
  once: 16 at B = 1, 4 at B = 4, 1 from B = 16 on (docs/kernels/decode_attention.md).
- The G = 4 query rows are loaded as a (64, D) box: TMA zero-fills rows 4..63 (past G), so
  wgmma runs at its minimum M = 64 with 60 rows of zeros.  The wasted math is free: the
  kernel waits on DRAM, not on the tensor cores, and it keeps the attention kernel's
  register-resident online softmax (no shuffles, P stays in registers as wgmma's A).
- A producer warpgroup streams K tiles (BN x D) and Vt tiles (D x BN) through a 4-stage
  TMA pipeline: up to 128 KB in flight per block.
- Keys at or past S (the ragged last tile, and whole tiles of a split past the end) get
  the raw score MASKED = -1e6 before the softmax: 2^-88000 next to any real key, so they
  weigh 0.  It is finite on purpose: a split with no key left then gets the finite
  LSE = MASKED / sqrt(D) + log(TPS * BN) (weight 0 in the combine) where -inf would give
  -inf - -inf = NaN.  It is small enough that m and the fma's exact product agree to well
  under 1 (at -1e30 the f32 rounding of m alone is 2^70 and exp2 overflows).
- Rows past G are computed and dropped by the clipped stores.
"""

BN = 64
D, DK = 128, 64
G, HKV = 4, 8
GM = 64                           # G padded to wgmma's M
STAGES = 4
SCALE_LOG2 = 0.12751743074602467  # log2(e) / sqrt(D)
LN2 = 0.6931471805599453
MASKED = -1e6                     # a masked key's raw score (see above)

B = dim("B")
S = dim("S", multiple_of=8)        # Vt rows of 2 * S bytes: TMA needs 16-byte strides
NSPLIT = dim("NSPLIT")

@kernel(arch="sm_90a", grid=(NSPLIT, HKV, B), warps=8)
def attention_decode_split_sm90(Q: Tensor[bf16, (B, HKV, G, D)],
                                K: Tensor[bf16, (B, HKV, S, D)],
                                Vt: Tensor[bf16, (B, HKV, D, S)],
                                Opart: Tensor[f32, (NSPLIT, B, HKV, G, D)],
                                LSE: Tensor[f32, (NSPLIT, B, HKV, G)]):
    sq = smem(bf16, (D // DK, GM, DK), layout=swizzle(128))
    sk = smem(bf16, (STAGES, D // DK, BN, DK), layout=swizzle(128))
    sv = smem(bf16, (STAGES, D, BN), layout=swizzle(128))
    qready = mbarrier(count=1)
    kv = pipeline(stages=STAGES, producer="load", consumer="softmax")
    fence_barrier_init()
    syncthreads()

    with role("load", warps=range(0, 4), regs=40):
        qready.expect_tx(GM * D * 2)
        for h in range(D // DK):
            tma_load(sq[h], Q.tile((1, 1, GM, DK), (block.z, block.y, 0, h)), qready)
        for j in range(cdiv(cdiv(S, BN), NSPLIT)):
            t = block.x * cdiv(cdiv(S, BN), NSPLIT) + j
            st = kv.acquire()
            for h in range(D // DK):
                tma_load(sk[st, h], K.tile((1, 1, BN, DK), (block.z, block.y, t, h)), kv)
            tma_load(sv[st], Vt.tile((1, 1, D, BN), (block.z, block.y, 0, t)), kv)
            kv.commit()

    with role("softmax", warps=range(4, 8), regs=232):
        m = fragment(f32, (GM,), fill=-inf)     # running row max, in exp2 units
        l = fragment(f32, (GM,))                # running row sum of exp2
        o = fragment(f32, (GM, D), layout=wgmma_acc)
        qready.wait(0)
        for j in range(cdiv(cdiv(S, BN), NSPLIT)):
            t = block.x * cdiv(cdiv(S, BN), NSPLIT) + j
            st = kv.wait()
            s = fragment(f32, (GM, BN), layout=wgmma_acc)
            for h in range(D // DK):
                wgmma(s, sq[h], sk[st, h].T)
            wgmma_wait(0)
            s = where(lt(col_index(s) + t * BN, S), s, MASKED)   # keys past S

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
        store(Opart.tile((1, 1, 1, GM, D), (block.x, block.z, block.y, 0, 0)), o)
        store(LSE.tile((1, 1, 1, GM), (block.x, block.z, block.y, 0)), (m + log2(l)) * LN2)
