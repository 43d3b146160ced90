"""Decode attention, split step (flash-decoding) over a paged KV cache on sm_90a.

The math and outputs of examples/attention_decode_split_sm90.cake: for each sequence b, KV
head kh and split sp, over the keys n of that split,
  Opart[sp, b, kh, g] = sum_n softmax_n(q . k_n / sqrt(D)) v_n         (normalised, f32)
  LSE[sp, b, kh, g]   = log(sum_n exp(q . k_n / sqrt(D)))               (natural log, f32)
for the G = H / HKV query heads g sharing KV head kh; the unchanged combine kernel
(examples/attention_decode_combine_sm90.cake) merges the splits.  H = 32, HKV = 8, D = 128.

What is paged (vLLM's block table):
- K (NPAGES, HKV, PAGE, D) and Vt (NPAGES, HKV, D, PAGE): a pool of pages of PAGE keys,
  shared by all sequences; Vt is V transposed per page, as the contiguous kernel stores it.
- PageTable (B, MAXPAGES) i32: PageTable[b, i] is the pool page holding keys
  [i * PAGE, (i + 1) * PAGE) of sequence b.  Entries past the sequence's pages are never read.
- SeqLens (B,) i32: the number of cached keys of each sequence, each its own.
- Q, Opart, LSE as in the contiguous kernel.

PAGE is a compile-time multiple of the 64-key tile: 256 here (FlashAttention-3's page),
a page holding TPP = PAGE // 64 key tiles; 64 and 128 work unchanged
(tests/test_attention_decode_paged.py runs them).  The block table is read once per page,
by the producer, before the page's tiles are fetched: a read is a dependent round trip
(the cost model charges it serially), so larger pages pay it less often.  A page smaller
than a tile would need several TMA boxes per tile and is not taken.

Splits follow each sequence's own length, in whole pages: sequence b has
NP = cdiv(SeqLens[b], PAGE) pages, cut into NSPLIT splits of PPS = cdiv(NP, NSPLIT) pages;
split sp runs the pages it has (none past the end: a page beyond the sequence is never
fetched, where the contiguous kernel fetched zero-filled boxes) and, of the last page, only
the tiles up to the length.  Keys at or past SeqLens[b] in the last tile get the raw score
MASKED = -1e6, as in the contiguous kernel.  A split with no key (past the end, or any
split of a length-0 sequence) reports Opart = 0 and LSE = MASKED / sqrt(D), finite, so the
combine gives it weight 0; a length-0 sequence's splits are all equal and its combined
output is 0.
"""

BN = 64
PAGE = 256                        # keys per page: a multiple of BN
TPP = PAGE // BN                  # key tiles per page
D, DK = 128, 64
G, HKV = 4, 8
GM = 64                           # G padded to wgmma's M
STAGES = 4
SCALE_LOG2 = 0.12751743074602467  # log2(e) / sqrt(D)
LN2 = 0.6931471805599453
MASKED = -1e6                     # a masked key's raw score

B = dim("B")
NSPLIT = dim("NSPLIT")
NPAGES = dim("NPAGES")            # pages in the pool
MAXPAGES = dim("MAXPAGES")        # block-table entries per sequence

@kernel(arch="sm_90a", grid=(NSPLIT, HKV, B), warps=8)
def attention_decode_split_sm90_paged(Q: Tensor[bf16, (B, HKV, G, D)],
                                      K: Tensor[bf16, (NPAGES, HKV, PAGE, D)],
                                      Vt: Tensor[bf16, (NPAGES, HKV, D, PAGE)],
                                      PageTable: Tensor[i32, (B, MAXPAGES)],
                                      SeqLens: Tensor[i32, (B,)],
                                      Opart: Tensor[f32, (NSPLIT, B, HKV, G, D)],
                                      LSE: Tensor[f32, (NSPLIT, B, HKV, G)]):
    sq = smem(bf16, (D // DK, GM, DK), layout=swizzle(128))
    sk = smem(bf16, (STAGES, D // DK, BN, DK), layout=swizzle(128))
    sv = smem(bf16, (STAGES, D, BN), layout=swizzle(128))
    qready = mbarrier(count=1)
    kv = pipeline(stages=STAGES, producer="load", consumer="softmax")
    fence_barrier_init()
    syncthreads()
    # this sequence's length (priced at a full block table) and this split's pages
    n = load_scalar(SeqLens, (block.z,), expect=MAXPAGES * PAGE)
    pps = cdiv(cdiv(n, PAGE), NSPLIT)                      # pages per split
    first = block.x * pps                                  # this split's first page
    npages = min(pps, max(cdiv(n, PAGE) - first, 0))       # the pages it has

    with role("load", warps=range(0, 4), regs=40):
        qready.expect_tx(GM * D * 2)
        for h in range(D // DK):
            tma_load(sq[h], Q.tile((1, 1, GM, DK), (block.z, block.y, 0, h)), qready)
        for j in range(npages):
            pg = load_scalar(PageTable, (block.z, first + j), expect=0)   # its pool page
            for u in range(min(TPP, cdiv(n, BN) - (first + j) * TPP)):   # its key tiles
                st = kv.acquire()
                for h in range(D // DK):
                    tma_load(sk[st, h], K.tile((1, 1, BN, DK), (pg, block.y, u, h)), kv)
                tma_load(sv[st], Vt.tile((1, 1, D, BN), (pg, block.y, 0, u)), kv)
                kv.commit()

    with role("softmax", warps=range(4, 8), regs=232):
        m = fragment(f32, (GM,), fill=-inf)     # running row max, in exp2 units
        l = fragment(f32, (GM,))                # running row sum of exp2
        o = fragment(f32, (GM, D), layout=wgmma_acc)
        qready.wait(0)
        for j in range(npages):
            for u in range(min(TPP, cdiv(n, BN) - (first + j) * TPP)):
                t = (first + j) * TPP + u                      # the tile's place in the sequence
                st = kv.wait()
                s = fragment(f32, (GM, BN), layout=wgmma_acc)
                for h in range(D // DK):
                    wgmma(s, sq[h], sk[st, h].T)
                wgmma_wait(0)
                s = where(lt(col_index(s) + t * BN, n), s, MASKED)   # keys past the length

                ms = maximum(m, row_max(s) * SCALE_LOG2)   # the new row max
                p = exp2(fma(s, SCALE_LOG2, -unsqueeze(ms, 1)))
                alpha = exp2(m - ms)                # 0 on the first tile (m = -inf)
                l = fma(l, alpha, row_sum(p))
                m = ms * 1.0                        # a new value (see docs/kernels/attention.md)
                o = o * unsqueeze(alpha, 1)         # the previous P @ V has been waited for
                wgmma(o, cast(p, bf16), sv[st].T)
                wgmma_wait(0)
                kv.release()

        # a split with no key kept m = -inf and l = 0: report Opart = 0 and the finite
        # LSE = MASKED / sqrt(D) (weight 0 in the combine); a split with keys has l > 0
        l = where(gt(l, 0.0), l, 1.0)
        m = maximum(m, MASKED * SCALE_LOG2)
        o = o / unsqueeze(l, 1)
        store(Opart.tile((1, 1, 1, GM, D), (block.x, block.z, block.y, 0, 0)), o)
        store(LSE.tile((1, 1, 1, GM), (block.x, block.z, block.y, 0)), (m + log2(l)) * LN2)
