"""Variable-length attention forward on sm_90a: B sequences of different lengths, one launch.

O = softmax(Q @ K.T / sqrt(D)) @ V within each sequence, bf16, non-causal, D = 128.  The
plain kernel (attention_fwd_sm90.cake, read it first) with its (BH, S, D) problems replaced
by sequences packed one after another, as a serving batch of prompts comes:

- Q, K, O (T, H * D): every sequence's tokens stacked (T rows), each token's H heads side
  by side (FlashAttention's varlen layout, (total, heads, head_dim) with the last two
  merged).  Vt (H * D, T): V transposed, as the plain kernel takes it.
- Sequence b owns rows Offsets[b] .. Offsets[b] + Lens[b].  Each sequence starts on a
  128-row boundary and is padded up to the next one (Offsets[b + 1] - Offsets[b] =
  128 * cdiv(Lens[b], 128)): DeepGEMM's contiguous grouped layout.  The padding rows
  belong to no token; the kernel writes zeros to them.  The kernel takes its tiles at an
  element offset of the sequence's first row (`offset=`) and stores within its padded rows
  (`limit=`), so its tile sizes are free of the alignment.
- SMAX, the longest length, sizes the grid.

Design: grid (cdiv(SMAX, BM), H, B); block (i, h, b) reads its sequence's offset and length
once (`load_scalar`: every thread the same word), and does nothing when its query tile i
starts past the sequence's end (a short prompt leaves most of its blocks idle, each gone
after two loads).  Otherwise it runs the plain kernel's schedule over the sequence's
cdiv(len, BN) key tiles: the keys of the last one past the sequence's end (its padding and,
past that, the next sequence's first rows) score -inf, and the rows past the end of the
last query tile are zeroed before the store.
"""

BM, BN = 128, 64
D, DK = 128, 64
STAGES = 3
# log2(e) / sqrt(D): the softmax scale folded into the exp2 argument
SCALE_LOG2 = 0.12751743074602467

B = dim("B")                        # sequences
H = dim("H")                        # heads
ALIGN = 128                         # the layout's sequence alignment, in rows
T = dim("T", multiple_of=ALIGN)     # rows of the packed tensors: every padded sequence
SMAX = dim("SMAX")                  # the longest sequence: the grid's query tiles

@kernel(arch="sm_90a", grid=(cdiv(SMAX, BM), H, B), warps=12)
def attention_fwd_sm90_varlen(Q: Tensor[bf16, (T, H * D)], K: Tensor[bf16, (T, H * D)],
                              Vt: Tensor[bf16, (H * D, T)],
                              Offsets: Tensor[i32, (B + 1,)], Lens: Tensor[i32, (B,)],
                              O: Tensor[bf16, (T, H * D)]):
    sq = smem(bf16, (D // DK, BM, DK), layout=swizzle(128))
    sk = smem(bf16, (STAGES, D // DK, BN, DK), layout=swizzle(128))
    sv = smem(bf16, (STAGES, D, BN), layout=swizzle(128))
    qready = mbarrier(count=1)
    kv = pipeline(stages=STAGES, producer="load", consumer="softmax")
    fence_barrier_init()
    syncthreads()
    # The sequence: its first row, its padded end and its length.  Its tiles are taken at
    # an element offset of `first` rows, so no tile size is tied to the layout's alignment.
    first = load_scalar(Offsets, (block.z,))
    end = load_scalar(Offsets, (block.z + 1,))
    n = load_scalar(Lens, (block.z,), expect=T // B)

    with role("load", warps=range(0, 4), regs=40):
        if block.x * BM < n:
            qready.expect_tx(BM * D * 2)
            for h in range(D // DK):
                tma_load(sq[h], Q.tile((BM, DK), (block.x, block.y * (D // DK) + h),
                                               offset=(first, 0)), qready)
            for j in range(cdiv(n, BN)):
                st = kv.acquire()
                for h in range(D // DK):
                    tma_load(sk[st, h], K.tile((BN, DK), (j, block.y * (D // DK) + h),
                                               offset=(first, 0)), kv)
                tma_load(sv[st], Vt.tile((D, BN), (block.y, j), offset=(0, first)), kv)
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
                    s = where(lt(col_index(s) + j * BN, n), s, -inf)   # keys past the end

                ms = maximum(m, row_max(s) * SCALE_LOG2)   # the new row max
                p = exp2(fma(s, SCALE_LOG2, -unsqueeze(ms, 1)))
                alpha = exp2(m - ms)                # 0 on the first tile (m = -inf)
                l = fma(l, alpha, row_sum(p))
                m = ms * 1.0                        # a new value (docs/kernels/attention.md)
                o = o * unsqueeze(alpha, 1)         # the previous P @ V has been waited for
                wgmma(o, cast(p, bf16), sv[st].T)
                wgmma_wait(0)
                kv.release()

            o = o / unsqueeze(l, 1)
            # rows past the sequence's end are its padding: no token, so zero
            o = where(lt(row_index(o) + block.x * BM, n), o, 0.0)
            # a query tile larger than the padding would reach the next sequence's rows:
            # the limit keeps the store to this sequence's own (padded) rows
            rows = O.tile((BM, D), (block.x, block.y), offset=(first, 0), limit=(end, H * D))
            store(rows, cast(o, bf16))
