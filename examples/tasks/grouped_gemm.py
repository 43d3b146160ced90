"""C[g] = (A[g] * sa[g]) @ (B[g] * sb[g]).T for G experts: an MoE grouped fp8 GEMM.

DeepGEMM's masked grouped layout with its fine-grained scales (see gemm_fp8.py): A
(G, MX, K) holds each expert's tokens in its first count[g] rows, B (G, N, K) is each
expert's weight, SA (G, cdiv(K, 128), MX) the per-token scales of A, transposed, and SB
the per-128x128-block scales of B, (G, N/128, K/128) stored flat as
(G * cdiv(N, 128), cdiv(K, 128)).  C is (G, MX, N) bf16.

Rows of an expert past its count hold stale tokens (as a real MoE buffer does); they are
computed and judged like the others, since a kernel that cannot read the counts computes
every row.  The counts are drawn to be unequal and ragged, and rows past them are made
noticeably different data, so that the inputs look like a real dispatch buffer.
"""

from __future__ import annotations

import numpy as np

from cake_core.ir.types import DType
from cake_core.sim.dtypes import fp8_bits, fp8_value
from cake_core.tasks import Dims, KernelEntry, Shape, Task, Tolerance, as_dtype

GB = 128
"""The scaling granularity along K (and along N for B)."""


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _e4m3(x: np.ndarray) -> np.ndarray:
    return fp8_value(fp8_bits(np.asarray(x, dtype=np.float32), DType.E4M3), DType.E4M3)


def _quantise(x: np.ndarray, rows: int) -> tuple[np.ndarray, np.ndarray]:
    """Block quantisation to e4m3, `rows` x 128 blocks scaled to an amax of 448; returns the
    e4m3 values (float32, exact) and the f32 scales (cdiv(R, rows), cdiv(K, 128))."""
    r, k = x.shape
    rb, kb = _cdiv(r, rows), _cdiv(k, GB)
    pad = np.zeros((rb * rows, kb * GB))
    pad[:r, :k] = x
    blocks = pad.reshape(rb, rows, kb, GB)
    scale = (np.maximum(np.abs(blocks).max(axis=(1, 3)), 1e-4) / 448.0).astype(np.float32)
    q = _e4m3(blocks / scale.astype(np.float64)[:, None, :, None])
    return q.reshape(rb * rows, kb * GB)[:r, :k], scale


def inputs(dims: Dims, rng: np.random.Generator) -> dict[str, np.ndarray]:
    g, mx, n, k = dims["G"], dims["MX"], dims["N"], dims["K"]
    counts = rng.integers(0, mx + 1, g)
    a_all, sa_all, b_all, sb_all = [], [], [], []
    for e in range(g):
        a = rng.standard_normal((mx, k)) * np.exp(rng.uniform(-1.0, 1.0, (mx, 1)))
        a[counts[e]:] *= 4.0  # stale rows of the dispatch buffer
        b = rng.standard_normal((n, k)) / np.sqrt(k) * np.exp(rng.uniform(-0.5, 0.5))
        qa, sa = _quantise(a, 1)
        qb, sb = _quantise(b, GB)
        a_all.append(qa)
        sa_all.append(sa.T)
        b_all.append(qb)
        sb_all.append(sb)
    return {"A": as_dtype(np.stack(a_all), "e4m3"), "B": as_dtype(np.stack(b_all), "e4m3"),
            "SA": np.ascontiguousarray(np.stack(sa_all)),
            "SB": np.ascontiguousarray(np.concatenate(sb_all, axis=0))}


def reference(x: dict[str, np.ndarray], dims: Dims) -> dict[str, np.ndarray]:
    g, n, k = dims["G"], dims["N"], dims["K"]
    nb = _cdiv(n, GB)
    kblock = np.arange(k) // GB
    out = []
    for e in range(g):
        a = _e4m3(x["A"][e]).astype(np.float64)
        b = _e4m3(x["B"][e]).astype(np.float64)
        sa = x["SA"][e].astype(np.float64).T[:, kblock]
        sb = x["SB"][e * nb:(e + 1) * nb].astype(np.float64)[np.arange(n) // GB][:, kblock]
        out.append((a * sa) @ (b * sb).T)
    return {"C": as_dtype(np.stack(out), "bf16")}


TASK = Task(
    name="grouped_gemm",
    description=__doc__.strip().splitlines()[0],
    kernels=(KernelEntry("../grouped_gemm_sm90.cake", "grouped_gemm_sm90"),),
    inputs=inputs,
    reference=reference,
    outputs=("C",),
    shapes=(Shape({"G": 8, "MX": 1024, "N": 4096, "K": 7168}, 1.0,
                  "DeepSeek-V3-like experts, 1024 tokens each"),
            Shape({"G": 32, "MX": 256, "N": 7168, "K": 2048}, 0.5, "many small experts")),
    sim_shapes=(Shape({"G": 2, "MX": 128, "N": 128, "K": 256}),
                Shape({"G": 3, "MX": 196, "N": 144, "K": 208}, label="ragged")),
    # As gemm_fp8: |C| ~ 1 (4 on stale rows); exact fp8 products summed in f32, then one
    # bf16 rounding (2^-9 relative).  A dropped or misapplied scale is off by factors of e.
    tolerances={"bf16": Tolerance(atol=1e-2, rtol=1.6e-2)},
    baseline="DeepGEMM m_grouped_gemm_fp8_fp8_bf16_nt_masked on the same tensors",
)
