"""Decode attention, combine step: O from the split kernel's partial outputs and LSEs.

Opart f32 holds each split's normalised partial output and LSE f32 its natural-log sum of
exp(score), as (NSPLIT * B * H, D) and (NSPLIT * B * H,): the (NSPLIT, B, H, D) and
(NSPLIT, B, H) arrays flattened (the combine kernel says why).  The split task
(examples/tasks/attention_decode_split.py) makes them; a split with no key reports
Opart = 0 and a very negative finite LSE.
O (B, H, D) bf16 = sum_sp exp(LSE[sp] - M) * Opart[sp] / sum_sp exp(LSE[sp] - M) with
M = max_sp LSE[sp].  H = 32, D = 128.
"""

from __future__ import annotations

import numpy as np

from cake_core.tasks import Dims, KernelEntry, Shape, Task, Tolerance, as_dtype

H, D = 32, 128


def inputs(dims: Dims, rng: np.random.Generator) -> dict[str, np.ndarray]:
    nsplit, b = dims["NSPLIT"], dims["B"]
    # LSEs spread over +-20 so the max matters (a combine without it overflows or loses
    # every weight), and one split per row pushed far down as an empty split would be
    lse = rng.uniform(-20.0, 20.0, size=(nsplit, b, H))
    if nsplit > 1:
        lse[nsplit - 1, :, ::3] = -88383.5
    return {"Opart": rng.standard_normal((nsplit * b * H, D)).astype(np.float32),
            "LSE": lse.reshape(-1).astype(np.float32)}


def reference(x: dict[str, np.ndarray], dims: Dims) -> dict[str, np.ndarray]:
    nsplit, b = dims["NSPLIT"], dims["B"]
    lse = x["LSE"].astype(np.float64).reshape(nsplit, b, H)
    part = x["Opart"].astype(np.float64).reshape(nsplit, b, H, D)
    w = np.exp(lse - lse.max(axis=0, keepdims=True))[..., None]     # (NSPLIT, B, H, 1)
    o = (w * part).sum(axis=0) / w.sum(axis=0)
    return {"O": as_dtype(o, "bf16")}


TASK = Task(
    name="attention_decode_combine",
    description=__doc__.strip().splitlines()[0],
    kernels=(KernelEntry("../attention_decode_combine_sm90.cake",
                         "attention_decode_combine_sm90"),),
    inputs=inputs,
    reference=reference,
    outputs=("O",),
    # the split counts the split kernel's shapes use at each batch size
    shapes=(Shape({"B": 16, "NSPLIT": 1}, 1.0, "headline: batch 16"),
            Shape({"B": 1, "NSPLIT": 16}, 0.5, "batch 1"),
            Shape({"B": 4, "NSPLIT": 4}, 0.5, "batch 4"),
            Shape({"B": 64, "NSPLIT": 1}, 0.5, "batch 64")),
    sim_shapes=(Shape({"B": 1, "NSPLIT": 4}),
                Shape({"B": 3, "NSPLIT": 5}),
                Shape({"B": 2, "NSPLIT": 1}, label="one split: O = Opart")),
    # a convex combination of f32 values ~1, rounded to bf16 (2^-9 relative): f32 math
    # adds ~1e-6; 1e-2 / 1e-2 is bf16 rounding with margin, far below a wrong weight
    tolerances={"bf16": Tolerance(atol=1e-2, rtol=1e-2)},
    baseline="the combine step of flash_attn_with_kvcache (its split-KV path), same shapes",
)
