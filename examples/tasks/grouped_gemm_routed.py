"""C[r] = A[r] @ B[g].T for each row r of expert g: an MoE grouped GEMM, contiguous layout.

DeepGEMM's contiguous grouped layout (m_grouped_gemm_fp8_fp8_bf16_nt_contiguous), in bf16:
A (MT, K) stacks every expert's tokens, expert g's at rows Offsets[g] .. Offsets[g] +
Counts[g]; each segment starts on a 128-row boundary and is padded up to the next one
(Offsets[g + 1] - Offsets[g] = 128 * cdiv(Counts[g], 128)).  B (G, N, K) holds each
expert's weight.  C (MT, N) bf16 has each token's output in its row and 0 in padding rows.

The counts are ragged, one expert is empty, and the padding rows of A hold noise (a
kernel that ignores the counts writes it through).  The segments cover all MT rows.
"""

from __future__ import annotations

import numpy as np

from cake_core.tasks import Dims, KernelEntry, Shape, Task, Tolerance, as_dtype

ALIGN = 128
"""Segment alignment in rows: the kernel's BM, and DeepGEMM's M alignment."""


def counts_for(g: int, mt: int, rng: np.random.Generator) -> np.ndarray:
    """Ragged token counts whose padded segments fill exactly `mt` rows; expert 1 (when
    there are two or more) gets none, and the last one a count that is not a multiple of
    ALIGN."""
    if mt % ALIGN or mt < ALIGN:
        raise ValueError(f"MT must be a positive multiple of {ALIGN}, not {mt}")
    mean = mt // g
    counts = np.zeros(g, dtype=np.int64)
    room = mt - ALIGN  # rows left to the others once the last expert has one tile
    for e in range(g - 1):
        c = 0 if e == 1 else int(rng.integers(mean // 4 + 1, max(mean // 4 + 2, mean)))
        padded = -(-c // ALIGN) * ALIGN
        if padded > room:
            c = padded = room
        counts[e], room = c, room - padded
    counts[-1] = room + ALIGN - int(rng.integers(1, ALIGN))
    return counts.astype(np.int32)


def offsets_for(counts: np.ndarray) -> np.ndarray:
    out = np.zeros(len(counts) + 1, dtype=np.int32)
    out[1:] = np.cumsum(-(-counts // ALIGN) * ALIGN)
    return out


def inputs(dims: Dims, rng: np.random.Generator) -> dict[str, np.ndarray]:
    g, mt, n, k = dims["G"], dims["MT"], dims["N"], dims["K"]
    counts = counts_for(g, mt, rng)
    a = rng.standard_normal((mt, k)).astype(np.float32)
    b = (rng.standard_normal((g, n, k)) / np.sqrt(k)).astype(np.float32)
    return {"A": as_dtype(a, "bf16"), "B": as_dtype(b, "bf16"), "Offsets": offsets_for(counts),
            "Counts": counts}


def reference(x: dict[str, np.ndarray], dims: Dims) -> dict[str, np.ndarray]:
    a = x["A"].astype(np.float64)
    out = np.zeros((dims["MT"], dims["N"]))
    for e, (lo, c) in enumerate(zip(x["Offsets"][:-1], x["Counts"], strict=True)):
        out[lo:lo + c] = a[lo:lo + c] @ x["B"][e].astype(np.float64).T
    return {"C": as_dtype(out, "bf16")}


TASK = Task(
    name="grouped_gemm_routed",
    description=__doc__.strip().splitlines()[0],
    kernels=(KernelEntry("../grouped_gemm_sm90_routed.cake", "grouped_gemm_sm90_routed"),),
    inputs=inputs,
    reference=reference,
    outputs=("C",),
    shapes=(Shape({"G": 8, "MT": 8192, "N": 4096, "K": 7168}, 1.0,
                  "DeepSeek-V3-like: 8 experts, ~1024 tokens each"),
            Shape({"G": 32, "MT": 8192, "N": 4096, "K": 7168}, 0.5,
                  "32 experts, ~256 tokens each")),
    sim_shapes=(Shape({"G": 3, "MT": 512, "N": 256, "K": 128}),
                Shape({"G": 4, "MT": 640, "N": 264, "K": 136}, label="ragged")),
    # |C| ~ 1: bf16 products summed in f32, one bf16 rounding (2^-9 relative), as gemm_bf16.
    tolerances={"bf16": Tolerance(atol=2e-2, rtol=1.6e-2)},
    baseline="DeepGEMM m_grouped_gemm contiguous layout on the same tensors (bf16)",
)
