"""C = A @ B.T in f16 with f32 accumulation, for sm_80 (A100).

A (M, K) and B (N, K) are K-major; C is (M, N), rounded to f16 once at the end.
"""

from __future__ import annotations

import numpy as np

from cake_core.tasks import KernelEntry, Shape, Task, Tolerance, as_dtype


def inputs(dims, rng: np.random.Generator) -> dict[str, np.ndarray]:
    m, n, k = dims["M"], dims["N"], dims["K"]
    return {"A": as_dtype(rng.standard_normal((m, k)), "f16"),
            "B": as_dtype(rng.standard_normal((n, k)), "f16")}


def reference(x: dict[str, np.ndarray], dims) -> dict[str, np.ndarray]:
    c = x["A"].astype(np.float64) @ x["B"].astype(np.float64).T
    return {"C": as_dtype(c, "f16")}


TASK = Task(
    name="gemm_f16_sm80",
    description=__doc__.strip().splitlines()[0],
    kernels=(KernelEntry("../gemm_sm80.cake", "gemm_sm80"),),
    inputs=inputs,
    reference=reference,
    outputs=("C",),
    shapes=(Shape({"M": 4096, "N": 4096, "K": 4096}, 1.0, "headline"),
            Shape({"M": 8192, "N": 8192, "K": 4096}, 0.5),
            Shape({"M": 4000, "N": 4104, "K": 4096}, 0.5, "ragged")),
    sim_shapes=(Shape({"M": 256, "N": 256, "K": 128}),
                Shape({"M": 200, "N": 136, "K": 72}, label="ragged")),
    # f16 output: half an ulp is 2^-11 relative
    tolerances={"f16": Tolerance(atol=5e-3, rtol=4e-3)},
    baseline="torch.matmul(A, B.T) on f16 CUDA tensors (cuBLAS), same shapes",
)
