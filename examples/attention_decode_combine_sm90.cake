"""Decode attention, combine step on sm_90a: merge the NSPLIT partial outputs of the split
kernel (examples/attention_decode_split_sm90.cake) into O.

  M = max_sp LSE[sp],  w_sp = exp(LSE[sp] - M),  O = sum_sp w_sp * Opart[sp] / sum_sp w_sp

per sequence b and query head h.  H = 32, D = 128.

Layouts: Opart (NSPLIT * B * H, D) f32 and LSE (NSPLIT * B * H,) f32 are the split kernel's
(NSPLIT, B, HKV, G, D) and (NSPLIT, B, HKV, G) outputs flattened (same bytes): a load keeps
its tile's rank, the lowering places register fragments of rank 1 and 2 only, and a
(1, 1, BM, D) tile of a rank-4 tensor would load as a rank-4 fragment.  Row r of the flat
view is split sp, sequence b, head h with r = (sp * B + b) * H + h.  O (B, H, D) bf16: a
(BM, D) fragment stores into a (1, BM, D) tile (leading 1s are dropped).

Design (memory-bound and small: NSPLIT * B * H * (D + 1) * 4 bytes read, 1/32 to 1/500 of
the KV cache the split kernel read):
- Grid (H / BM, B): a block of 4 warps owns BM = 4 heads of one sequence, one warp per
  head, D = 128 values per warp (4 per thread, one 16-byte vector).
- One pass over the splits with a running max m, a running weight sum l and the running
  weighted sum acc, the next split's loads issued before this split's math; a split that raises the max rescales l and acc by exp2(m_old - m_new)
  (the online-softmax update over NSPLIT "keys" whose values are rows of Opart).
- exp2 with log2(e) folded into one multiply; the split kernel never writes -inf (an empty
  split's LSE is about -88000), so exp2(m_old - m_new) is never NaN; only the first
  split's m = -inf gives exp2(-inf) = 0, which is wanted.
"""

BM, D, H = 4, 128, 32
LOG2E = 1.4426950408889634

B = dim("B")
NSPLIT = dim("NSPLIT")

@kernel(arch="sm_90a", grid=(H // BM, B), warps=4)
def attention_decode_combine_sm90(Opart: Tensor[f32, (NSPLIT * B * H, D)],
                                  LSE: Tensor[f32, (NSPLIT * B * H,)],
                                  O: Tensor[bf16, (B, H, D)]):
    m = fragment(f32, (BM,), fill=-inf)     # running max of LSE, log2 units
    l = fragment(f32, (BM,))                # running sum of the weights
    acc = fragment(f32, (BM, D))            # running weighted sum of the partials
    # split sp + 1 is loaded while split sp is folded in: one load latency per launch, not
    # one per split (the last iteration reads rows past the tensor: zeros, never used)
    lse = load(LSE.tile((BM,), (block.y * (H // BM) + block.x,)))
    part = load(Opart.tile((BM, D), (block.y * (H // BM) + block.x, 0)))
    for sp in range(NSPLIT):
        r = ((sp + 1) * B + block.y) * (H // BM) + block.x  # the next split's rows, in tiles
        lse_next = load(LSE.tile((BM,), (r,)))
        part_next = load(Opart.tile((BM, D), (r, 0)))
        mn = maximum(m, lse * LOG2E)
        alpha = exp2(m - mn)                # 0 on the first split (m = -inf)
        w = exp2(fma(lse, LOG2E, -mn))
        l = fma(l, alpha, w)
        acc = fma(acc, unsqueeze(alpha, 1), part * unsqueeze(w, 1))
        # a carried value is the result of an op: `m = mn` would not carry it (CK332)
        m = maximum(m, lse * LOG2E)
        lse = lse_next * 1.0
        part = part_next * 1.0
    store(O.tile((1, BM, D), (block.y, block.x, 0)), cast(acc / unsqueeze(l, 1), bf16))
