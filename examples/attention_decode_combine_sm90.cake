"""Decode attention, combine step on sm_90a: merge the NSPLIT partial outputs of the split
kernel (examples/attention_decode_split_sm90.cake) into O.

  M = max_sp LSE[sp],  w_sp = exp(LSE[sp] - M),  O = sum_sp w_sp * Opart[sp] / sum_sp w_sp

per sequence b and query head h.  Opart (NSPLIT, B, H, D) f32, LSE (NSPLIT, B, H) f32 (the
split kernel's outputs, reshaped: same bytes), O (B, H, D) bf16; H = 32, D = 128.

Design (memory-bound and small: NSPLIT * B * H * (D + 1) * 4 bytes read, 1/32 to 1/500 of
the KV cache the split kernel read):
- Grid (H / BM, B): a block of 4 warps owns BM = 4 heads of one sequence, one warp per
  head, D = 128 values per warp (4 per thread, one 16-byte vector).
- One pass over the splits with a running max m, a running weight sum l and the running
  weighted sum acc; a split that raises the max rescales l and acc by exp2(m_old - m_new)
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
def attention_decode_combine_sm90(Opart: Tensor[f32, (NSPLIT, B, H, D)],
                                  LSE: Tensor[f32, (NSPLIT, B, H)],
                                  O: Tensor[bf16, (B, H, D)]):
    # loads keep the tile's rank (leading 1s included), so the carried values have it too
    m = fragment(f32, (1, 1, BM), fill=-inf)    # running max of LSE, log2 units
    l = fragment(f32, (1, 1, BM))               # running sum of the weights
    acc = fragment(f32, (1, 1, BM, D))          # running weighted sum of the partials
    for sp in range(NSPLIT):
        lse = load(LSE.tile((1, 1, BM), (sp, block.y, block.x))) * LOG2E
        part = load(Opart.tile((1, 1, BM, D), (sp, block.y, block.x, 0)))
        mn = maximum(m, lse)
        alpha = exp2(m - mn)                # 0 on the first split
        w = exp2(lse - mn)
        l = fma(l, alpha, w)
        acc = fma(acc, unsqueeze(alpha, 3), part * unsqueeze(w, 3))
        m = maximum(m, lse)
    store(O.tile((1, BM, D), (block.y, block.x, 0)), cast(acc / unsqueeze(l, 3), bf16))
