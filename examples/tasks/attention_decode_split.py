"""Decode attention, split step: per KV split, the normalised partial output and its LSE.

One query token per sequence (flash-decoding).  Q (B, HKV, G, D) is the (B, H, D) query
with its H = HKV * G heads grouped by KV head (a free reshape); K (B, HKV, S, D) and
Vt (B, HKV, D, S) are the KV cache, V stored transposed (examples/attention_fwd_sm90.cake
says why).  The S keys are cut into NSPLIT splits of TPS = cdiv(cdiv(S, 64), NSPLIT)
tiles of 64 keys; split sp holds keys [sp * TPS * 64, min((sp + 1) * TPS * 64, S)).
Outputs, per split, sequence and query head (f32):
  Opart = softmax(q . k / sqrt(D)) @ v over the split's keys,
  LSE   = log(sum exp(q . k / sqrt(D))) over the split's keys.
A split with no key (possible when NSPLIT does not divide the tile count) has Opart = 0 and
the LSE of its TPS * 64 masked keys, each scoring MASKED / sqrt(D) with MASKED = -1e6:
LSE = MASKED / sqrt(D) + log(TPS * 64), finite, and weight 0 in the combine
(examples/tasks/attention_decode_combine.py), where -inf would make -inf - -inf = NaN.
"""

from __future__ import annotations

import numpy as np

from cake_core.tasks import Dims, KernelEntry, Shape, Task, Tolerance, as_dtype

D, G, HKV, BN = 128, 4, 8, 64
MASKED = -1e6


def tiles_per_split(s: int, nsplit: int) -> int:
    """TPS = cdiv(cdiv(S, 64), NSPLIT), as the kernel computes it."""
    tiles = -(-s // BN)
    return -(-tiles // nsplit)


def split_bounds(s: int, nsplit: int) -> list[tuple[int, int]]:
    """The key range of each split: whole 64-key tiles, the last ones possibly short or empty."""
    tps = tiles_per_split(s, nsplit)
    return [(min(sp * tps * BN, s), min((sp + 1) * tps * BN, s)) for sp in range(nsplit)]


def inputs(dims: Dims, rng: np.random.Generator) -> dict[str, np.ndarray]:
    b, s = dims["B"], dims["S"]
    return {"Q": as_dtype(rng.standard_normal((b, HKV, G, D)), "bf16"),
            "K": as_dtype(rng.standard_normal((b, HKV, s, D)), "bf16"),
            "Vt": as_dtype(rng.standard_normal((b, HKV, D, s)), "bf16")}


def reference(x: dict[str, np.ndarray], dims: Dims) -> dict[str, np.ndarray]:
    b, s, nsplit = dims["B"], dims["S"], dims["NSPLIT"]
    q = x["Q"].astype(np.float64)
    k = x["K"].astype(np.float64)
    v = np.swapaxes(x["Vt"].astype(np.float64), 2, 3)              # (B, HKV, S, D)
    scores = q @ np.swapaxes(k, 2, 3) / np.sqrt(D)                 # (B, HKV, G, S)
    opart = np.zeros((nsplit, b, HKV, G, D))
    bounds = split_bounds(s, nsplit)
    padded = tiles_per_split(s, nsplit) * BN                        # keys an empty split masks
    lse = np.full((nsplit, b, HKV, G), MASKED / np.sqrt(D) + np.log(padded))
    for sp, (lo, hi) in enumerate(bounds):
        if lo == hi:
            continue
        sc = scores[..., lo:hi]
        mx = sc.max(axis=-1, keepdims=True)
        p = np.exp(sc - mx)
        total = p.sum(axis=-1, keepdims=True)
        opart[sp] = (p @ v[:, :, lo:hi]) / total
        lse[sp] = (mx + np.log(total))[..., 0]
    return {"Opart": opart.astype(np.float32), "LSE": lse.astype(np.float32)}


TASK = Task(
    name="attention_decode_split",
    description=__doc__.strip().splitlines()[0],
    kernels=(KernelEntry("../attention_decode_split_sm90.cake", "attention_decode_split_sm90"),),
    inputs=inputs,
    reference=reference,
    outputs=("Opart", "LSE"),
    # NSPLIT is chosen per batch so that NSPLIT * B * HKV blocks (one per SM) fill the
    # 132 SMs once: 16 at batch 1, 4 at batch 4, 1 from batch 16 on
    shapes=(Shape({"B": 16, "S": 8192, "NSPLIT": 1}, 1.0, "headline: batch 16, 8K cache"),
            Shape({"B": 1, "S": 8192, "NSPLIT": 16}, 0.5, "batch 1"),
            Shape({"B": 4, "S": 8192, "NSPLIT": 4}, 0.5, "batch 4"),
            Shape({"B": 64, "S": 8192, "NSPLIT": 1}, 0.5, "batch 64")),
    sim_shapes=(Shape({"B": 1, "S": 296, "NSPLIT": 4},
                      label="ragged: a 40-key tile, an empty split"),
                Shape({"B": 2, "S": 128, "NSPLIT": 2})),
    # Opart is a convex combination of V rows (|V| ~ 1) with P rounded to bf16 before
    # P @ V (2^-9 relative per weight): 2e-2 as for attention_fwd.  LSE errors are f32
    # rounding of the scores and exp2/log2 (~1e-5); a missing key or an extra zero key
    # moves it by far more.
    tolerances={"f32": Tolerance(atol=2e-2, rtol=2e-2)},
    baseline="flash_attn_with_kvcache (FlashAttention-2 split-KV decode) on bf16 CUDA tensors, "
             "same shapes",
)
