"""Variable-length attention forward on sm_90a: examples/attention_fwd_sm90.cake over a packed
batch (tests/test_tile_offset.py).

B sequences of different lengths are packed row after row, FlashAttention's varlen layout:
- Q, K, O (T, H * D): token t's head h is columns h * D .. h * D + D of row t.
- Vt (H * D, T): V transposed (the keys contiguous, as the padded kernel wants them).
- CuSeqlens (B + 1,): sequence b holds rows CuSeqlens[b] .. CuSeqlens[b + 1].  T is a
  multiple of 8 (a row of Vt, 2 * T bytes, is a 16-byte TMA stride).

Grid (cdiv(SMAX, BM), H, B), SMAX the longest sequence: block (i, h, b) owns query tile i of
head h of sequence b.  Its tiles sit at `offset=(start, 0)` (Vt: `(0, start)`), element
offsets read with `load_scalar`; TMA takes element coordinates, so nothing else changes.
- The key loop runs cdiv(n, BN) tiles, n = end - start; the last one's keys past n belong
  to the next sequence (or are the tensor's zeros) and are masked to -inf.
- A query tile past n skips its work in both roles.  The last query tile's rows past n are
  the next sequence's queries: computed, then dropped by the store's `limit=(end, H * D)`,
  so no block writes another sequence's rows.
"""

BM, BN = 128, 64
D, DK = 128, 64
STAGES = 3
# log2(e) / sqrt(D): the softmax scale folded into the exp2 argument
SCALE_LOG2 = 0.12751743074602467

B = dim("B")
H = dim("H")
T = dim("T", multiple_of=8)    # Vt rows are 2 * T bytes apart: TMA needs 16-byte strides
SMAX = dim("SMAX")             # the longest sequence: the grid's query tiles

@kernel(arch="sm_90a", grid=(cdiv(SMAX, BM), H, B), warps=12)
def attention_varlen_unpadded(Q: Tensor[bf16, (T, H * D)], K: Tensor[bf16, (T, H * D)],
                              Vt: Tensor[bf16, (H * D, T)], CuSeqlens: Tensor[i32, (B + 1,)],
                              O: Tensor[bf16, (T, H * D)]):
    start = load_scalar(CuSeqlens, (block.z,))
    end = load_scalar(CuSeqlens, (block.z + 1,))
    n = end - start
    sq = smem(bf16, (D // DK, BM, DK), layout=swizzle(128))
    sk = smem(bf16, (STAGES, D // DK, BN, DK), layout=swizzle(128))
    sv = smem(bf16, (STAGES, D, BN), layout=swizzle(128))
    qready = mbarrier(count=1)
    kv = pipeline(stages=STAGES, producer="load", consumer="softmax")
    fence_barrier_init()
    syncthreads()

    with role("load", warps=range(0, 4), regs=40):
        if block.x * BM < n:
            qready.expect_tx(BM * D * 2)
            for h in range(D // DK):
                tma_load(sq[h], Q.tile((BM, DK), (block.x, block.y * (D // DK) + h),
                                       offset=(start, 0)), qready)
            for j in range(cdiv(n, BN)):
                st = kv.acquire()
                for h in range(D // DK):
                    tma_load(sk[st, h], K.tile((BN, DK), (j, block.y * (D // DK) + h),
                                               offset=(start, 0)), kv)
                tma_load(sv[st], Vt.tile((D, BN), (block.y, j), offset=(0, start)), kv)
                kv.commit()

    with role("softmax", warps=range(4, 12), regs=232):
        if block.x * BM < n:
            m = fragment(f32, (BM,), fill=-inf)     # running row max, in exp2 units
            l = fragment(f32, (BM,))                # running row sum of exp2
            o = fragment(f32, (BM, D), layout=wgmma_acc)
            qready.wait(0)
            for j in range(cdiv(n, BN)):
                st = kv.wait()
                s = fragment(f32, (BM, BN), layout=wgmma_acc)
                for h in range(D // DK):
                    wgmma(s, sq[h], sk[st, h].T)
                wgmma_wait(0)
                if j == cdiv(n, BN) - 1:
                    s = where(lt(col_index(s) + j * BN, n), s, -inf)   # keys past n: -inf

                ms = maximum(m, row_max(s) * SCALE_LOG2)   # the new row max
                p = exp2(fma(s, SCALE_LOG2, -unsqueeze(ms, 1)))
                alpha = exp2(m - ms)                # 0 on the first tile (m = -inf)
                l = fma(l, alpha, row_sum(p))
                m = ms * 1.0
                o = o * unsqueeze(alpha, 1)         # the previous P @ V has been waited for
                wgmma(o, cast(p, bf16), sv[st].T)
                wgmma_wait(0)
                kv.release()

            o = o / unsqueeze(l, 1)
            store(O.tile((BM, D), (block.x, block.y), offset=(start, 0), limit=(end, H * D)),
                  cast(o, bf16))
