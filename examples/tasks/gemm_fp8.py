"""C = (A * sa) @ (B * sb).T: an fp8 (e4m3) GEMM with fine-grained (block) scaling.

The DeepGEMM / DeepSeek-V3 convention.  A (M, K) and B (N, K) are e4m3, K-major.  Every
128 consecutive values of K in a row of A share one f32 scale (per token, per K block);
every 128x128 block of B shares one.  The scales of A are given transposed, SA of shape
(cdiv(K, 128), M), the column-major layout DeepGEMM also asks for, so one K block's scales
of a run of rows are contiguous (one TMA box).  SB is (cdiv(N, 128), cdiv(K, 128)).
C (M, N) is bf16:

    C[m, n] = sum_k A[m, k] * SA[k // 128, m] * B[n, k] * SB[n // 128, k // 128]
"""

from __future__ import annotations

import numpy as np

from cake_core.ir.types import DType
from cake_core.sim.dtypes import fp8_bits, fp8_value
from cake_core.tasks import Dims, KernelEntry, Shape, Task, Tolerance, as_dtype

G = 128
"""The scaling granularity along K (and along N for B)."""

E4M3_MAX = 448.0


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _quantise(x: np.ndarray, rows: int) -> tuple[np.ndarray, np.ndarray]:
    """Quantise `x` (R, K) to e4m3 in blocks of `rows` x 128, each scaled so its largest
    magnitude maps to 448 (the e4m3 maximum), as DeepGEMM's casts do.  Returns the e4m3
    values (as float32, exact) and the (cdiv(R, rows), cdiv(K, 128)) f32 scales."""
    r, k = x.shape
    rb, kb = _cdiv(r, rows), _cdiv(k, G)
    pad = np.zeros((rb * rows, kb * G))
    pad[:r, :k] = x
    blocks = pad.reshape(rb, rows, kb, G)
    amax = np.maximum(np.abs(blocks).max(axis=(1, 3)), 1e-4)
    scale = (amax / E4M3_MAX).astype(np.float32)
    q = blocks / scale.astype(np.float64)[:, None, :, None]
    vals = fp8_value(fp8_bits(q.astype(np.float32), DType.E4M3), DType.E4M3)
    return vals.reshape(rb * rows, kb * G)[:r, :k], scale


def inputs(dims: Dims, rng: np.random.Generator) -> dict[str, np.ndarray]:
    m, n, k = dims["M"], dims["N"], dims["K"]
    # Activations vary by token and by channel group (outlier channels are why the
    # scales are fine-grained); weights are ~N(0, 1/K) so |C| stays of order 1.
    a = rng.standard_normal((m, k)) * np.exp(rng.uniform(-1.0, 1.0, (m, 1)))
    a *= np.repeat(np.exp(rng.uniform(-2.0, 2.0, (1, _cdiv(k, G)))), G, axis=1)[:, :k]
    b = rng.standard_normal((n, k)) / np.sqrt(k)
    b *= np.exp(rng.uniform(-0.5, 0.5, (n, 1)))
    qa, sa = _quantise(a, 1)
    qb, sb = _quantise(b, G)
    return {"A": as_dtype(qa, "e4m3"), "B": as_dtype(qb, "e4m3"),
            "SA": np.ascontiguousarray(sa.T), "SB": sb}


def _exact_e4m3(x: np.ndarray) -> np.ndarray:
    """The e4m3 values in float64, decoded from their codes through the e4m3 table."""
    return fp8_value(fp8_bits(np.asarray(x, dtype=np.float32), DType.E4M3),
                     DType.E4M3).astype(np.float64)


def reference(x: dict[str, np.ndarray], dims: Dims) -> dict[str, np.ndarray]:
    k = dims["K"]
    a, b = _exact_e4m3(x["A"]), _exact_e4m3(x["B"])
    kblock = np.arange(k) // G
    sa = x["SA"].astype(np.float64).T[:, kblock]                     # (M, K)
    sb = x["SB"].astype(np.float64)[np.arange(b.shape[0]) // G][:, kblock]  # (N, K)
    c = (a * sa) @ (b * sb).T
    return {"C": as_dtype(c, "bf16")}


TASK = Task(
    name="gemm_fp8",
    description=__doc__.strip().splitlines()[0],
    kernels=(KernelEntry("../gemm_fp8_sm90.cake", "gemm_fp8_sm90"),),
    inputs=inputs,
    reference=reference,
    outputs=("C",),
    shapes=(Shape({"M": 4096, "N": 7168, "K": 7168}, 1.0, "headline, DeepSeek-V3-like"),
            Shape({"M": 4096, "N": 4096, "K": 4096}, 1.0),
            Shape({"M": 4000, "N": 7168, "K": 2048}, 0.5, "ragged M")),
    sim_shapes=(Shape({"M": 256, "N": 256, "K": 256}),
                Shape({"M": 196, "N": 144, "K": 336}, label="ragged")),
    # |C| is of order 1.  The kernel sums exact fp8 products in f32 (within a 128-value
    # block, and across blocks after scaling), so its error before the final rounding is
    # ~K * 2^-24 relative; the bf16 output rounds by at most 2^-9 relative.  1/64 relative
    # plus 1/100 absolute (for results near zero, where f32 cancellation shows) passes any
    # correct kernel and fails a dropped or misplaced scale, which is off by factors of e.
    tolerances={"bf16": Tolerance(atol=1e-2, rtol=1.6e-2)},
    baseline="DeepGEMM gemm_fp8_fp8_bf16_nt on the same e4m3 tensors and scales",
)
