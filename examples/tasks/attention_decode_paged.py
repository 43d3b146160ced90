"""Decode attention, split step over a paged KV cache: per KV split, the normalised partial
output and its LSE, each sequence with its own length.

One query token per sequence (flash-decoding).  Q (B, HKV, G, D) is the (B, H, D) query
with its H = HKV * G heads grouped by KV head.  The KV cache is a pool of NPAGES pages of
PAGE = 256 keys: K (NPAGES, HKV, PAGE, D) and Vt (NPAGES, HKV, D, PAGE) (V transposed per
page).  PageTable (B, MAXPAGES) i32 maps sequence b's i-th page of keys to its pool page,
SeqLens (B,) i32 is each sequence's number of keys (0 .. MAXPAGES * PAGE).
Sequence b's NP = cdiv(SeqLens[b], PAGE) pages are cut into NSPLIT splits of
PPS = cdiv(NP, NSPLIT) pages; split sp holds keys [sp * PPS * PAGE,
min((sp + 1) * PPS * PAGE, SeqLens[b])).  Outputs, per split, sequence and query head (f32):
  Opart = softmax(q . k / sqrt(D)) @ v over the split's keys,
  LSE   = log(sum exp(q . k / sqrt(D))) over the split's keys.
A split with no key (past its sequence's end, or any split of a length-0 sequence) has
Opart = 0 and LSE = MASKED / sqrt(D) with MASKED = -1e6: finite, weight 0 in the combine
(examples/tasks/attention_decode_combine.py) next to any split with a key, and for a
length-0 sequence every split alike, so the combined output is 0.
"""

from __future__ import annotations

import numpy as np

from cake_core.tasks import Dims, KernelEntry, Shape, Task, Tolerance, as_dtype

D, G, HKV, BN = 128, 4, 8, 64
PAGE = 256
MASKED = -1e6


def split_bounds(n: int, nsplit: int, page: int) -> list[tuple[int, int]]:
    """The key range of each split of a sequence of n keys: whole pages by its own length,
    the last ones possibly short or empty."""
    pages = -(-n // page)
    keys = -(-pages // nsplit) * page
    return [(min(sp * keys, n), min((sp + 1) * keys, n)) for sp in range(nsplit)]


def seq_lens(b: int, cap: int, rng: np.random.Generator) -> np.ndarray:
    """Ragged lengths in [1, cap]; sequence 0 is 23 keys short of a full table (a last tile
    of 41 keys), and in batches of 3 or more the last sequence is empty and, from 4 on, the
    one before it has a single key (a slot just started)."""
    lens = rng.integers(1, cap + 1, size=b)
    lens[0] = max(cap - 23, 1)
    if b >= 3:
        lens[-1] = 0
    if b >= 4:
        lens[-2] = 1
    return lens.astype(np.int32)


def paged_inputs(dims: Dims, rng: np.random.Generator, page: int) -> dict[str, np.ndarray]:
    """Inputs for pages of `page` keys (the kernel's PAGE; a test also runs other sizes)."""
    b, maxpages, npages = dims["B"], dims["MAXPAGES"], dims["NPAGES"]
    if npages < b * maxpages:
        raise ValueError(f"NPAGES = {npages} < B * MAXPAGES = {b * maxpages}")
    lens = seq_lens(b, maxpages * page, rng)
    # every table entry (used or not) is a distinct pool page in random order: a kernel that
    # reads the logical page, or pages past a sequence's length, reads other keys
    table = rng.permutation(npages)[: b * maxpages].reshape(b, maxpages).astype(np.int32)
    return {"Q": as_dtype(rng.standard_normal((b, HKV, G, D)), "bf16"),
            "K": as_dtype(rng.standard_normal((npages, HKV, page, D)), "bf16"),
            "Vt": as_dtype(rng.standard_normal((npages, HKV, D, page)), "bf16"),
            "PageTable": table, "SeqLens": lens}


def inputs(dims: Dims, rng: np.random.Generator) -> dict[str, np.ndarray]:
    return paged_inputs(dims, rng, PAGE)


def reference(x: dict[str, np.ndarray], dims: Dims) -> dict[str, np.ndarray]:
    b, nsplit = dims["B"], dims["NSPLIT"]
    page = x["K"].shape[2]
    opart = np.zeros((nsplit, b, HKV, G, D))
    lse = np.full((nsplit, b, HKV, G), MASKED / np.sqrt(D))
    for i in range(b):
        n = int(x["SeqLens"][i])
        pages = x["PageTable"][i, : -(-n // page)]
        # the sequence's cache, gathered page by page: (HKV, n, D) each
        k = np.concatenate([x["K"][p] for p in pages], axis=1)[:, :n].astype(np.float64) \
            if n else np.zeros((HKV, 0, D))
        v = np.concatenate([np.swapaxes(x["Vt"][p], 1, 2) for p in pages],
                           axis=1)[:, :n].astype(np.float64) if n else np.zeros((HKV, 0, D))
        scores = x["Q"][i].astype(np.float64) @ np.swapaxes(k, 1, 2) / np.sqrt(D)  # (HKV, G, n)
        for sp, (lo, hi) in enumerate(split_bounds(n, nsplit, page)):
            if lo == hi:
                continue
            sc = scores[..., lo:hi]
            mx = sc.max(axis=-1, keepdims=True)
            p = np.exp(sc - mx)
            total = p.sum(axis=-1, keepdims=True)
            opart[sp, i] = (p @ v[:, lo:hi]) / total
            lse[sp, i] = (mx + np.log(total))[..., 0]
    return {"Opart": opart.astype(np.float32), "LSE": lse.astype(np.float32)}


TASK = Task(
    name="attention_decode_paged",
    description=__doc__.strip().splitlines()[0],
    kernels=(KernelEntry("../attention_decode_split_sm90_paged.cake",
                         "attention_decode_split_sm90_paged"),),
    inputs=inputs,
    reference=reference,
    outputs=("Opart", "LSE"),
    # an 8K block table (32 pages of 256 keys), lengths ragged below it; NSPLIT per batch
    # as the contiguous task chooses it: NSPLIT * B * HKV blocks fill the 132 SMs once
    shapes=(Shape({"B": 16, "MAXPAGES": 32, "NPAGES": 512, "NSPLIT": 1}, 1.0,
                  "headline: batch 16, 8K block table"),
            Shape({"B": 1, "MAXPAGES": 32, "NPAGES": 32, "NSPLIT": 16}, 0.5, "batch 1"),
            Shape({"B": 4, "MAXPAGES": 32, "NPAGES": 128, "NSPLIT": 4}, 0.5, "batch 4"),
            Shape({"B": 64, "MAXPAGES": 32, "NPAGES": 2048, "NSPLIT": 1}, 0.5, "batch 64")),
    sim_shapes=(Shape({"B": 4, "MAXPAGES": 2, "NPAGES": 11, "NSPLIT": 3},
                      label="ragged: lengths 489, random, 1, 0; 3 noise pages"),
                Shape({"B": 2, "MAXPAGES": 3, "NPAGES": 7, "NSPLIT": 2},
                      label="a 2-page and a 1-page split")),
    # as attention_decode_split: Opart is a convex combination of V rows (|V| ~ 1) with P
    # rounded to bf16 before P @ V (2^-9 relative per weight), hence 2e-2; LSE errors are
    # f32 rounding of the scores and exp2/log2 (~1e-5, ~1e-2 absolute at an empty split's
    # -88388); a missing key, an extra key or another page's key moves them by far more
    tolerances={"f32": Tolerance(atol=2e-2, rtol=2e-2)},
    baseline="flash_attn_with_kvcache with block_table and cache_seqlens (paged split-KV "
             "decode) on bf16 CUDA tensors, same shapes",
)
