"""C = A @ B.T in bf16 with f32 accumulation (a linear layer, y = x @ W.T).

A (M, K) and B (N, K) are K-major; C is (M, N), rounded to bf16 once at the end.
Implemented by the warp-specialised sm_90a GEMM and by the small-M decoding GEMM, whose
weight tensor is named W.
"""

from __future__ import annotations

import numpy as np

from cake_core.tasks import KernelEntry, Shape, Task, Tolerance, as_dtype


def inputs(dims, rng: np.random.Generator) -> dict[str, np.ndarray]:
    m, n, k = dims["M"], dims["N"], dims["K"]
    return {"A": as_dtype(rng.standard_normal((m, k)), "bf16"),
            "B": as_dtype(rng.standard_normal((n, k)), "bf16")}


def reference(x: dict[str, np.ndarray], dims) -> dict[str, np.ndarray]:
    c = x["A"].astype(np.float64) @ x["B"].astype(np.float64).T
    return {"C": as_dtype(c, "bf16")}


TASK = Task(
    name="gemm_bf16",
    description=__doc__.strip().splitlines()[0],
    kernels=(
        KernelEntry("../gemm_sm90.cake", "gemm_sm90"),
        KernelEntry("../gemm_sm90_tma_epilogue.cake", "gemm_sm90_tma_epilogue"),
        # more tiles than the simulator's 2 SMs: every block's tile loop comes round
        KernelEntry("../gemm_sm90_persistent.cake", "gemm_sm90_persistent",
                    sim_shapes=(Shape({"M": 512, "N": 512, "K": 64}),
                                Shape({"M": 520, "N": 264, "K": 72}, label="ragged"))),
        KernelEntry(
            "../tinygemm_sm90.cake", "tinygemm_sm90", params={"B": "W"},
            shapes=(Shape({"M": 16, "N": 8192, "K": 8192}, 1.0, "decode, 16 tokens"),
                    Shape({"M": 1, "N": 8192, "K": 8192}, 0.5, "decode, 1 token"),
                    Shape({"M": 64, "N": 4096, "K": 14336}, 0.5, "decode, 64 tokens")),
            sim_shapes=(Shape({"M": 64, "N": 128, "K": 128}),
                        Shape({"M": 48, "N": 72, "K": 200}, label="ragged"),
                        Shape({"M": 1, "N": 40, "K": 24}, label="one token"))),
    ),
    inputs=inputs,
    reference=reference,
    outputs=("C",),
    shapes=(Shape({"M": 4096, "N": 4096, "K": 4096}, 1.0, "headline"),
            Shape({"M": 8192, "N": 8192, "K": 8192}, 0.5),
            Shape({"M": 2048, "N": 2048, "K": 2048}, 0.5),
            Shape({"M": 4000, "N": 4104, "K": 4096}, 0.5, "ragged")),
    sim_shapes=(Shape({"M": 256, "N": 256, "K": 128}),
                Shape({"M": 200, "N": 136, "K": 72}, label="ragged")),
    # bf16 output: half an ulp is 2^-9 relative; the f32 sums differ from the exact ones
    # by far less, so 1/64 relative catches any wrong element without false alarms.
    tolerances={"bf16": Tolerance(atol=2e-2, rtol=1.6e-2)},
    baseline="torch.matmul(A, B.T) on bf16 CUDA tensors (cuBLAS), same shapes",
)
