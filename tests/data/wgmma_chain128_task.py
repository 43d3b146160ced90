"""Y = bf16(X @ W1.T) @ W2.T with a 128-wide intermediate: the chain of
tests/test_fragment_column_slice.py, whose second GEMM takes the bf16 cast of the first
one's (64, 128) accumulator as A in registers, in two 64-column slices."""

from __future__ import annotations

import numpy as np

from cake_core.tasks import Shape, Task, Tolerance, as_dtype


def inputs(dims, rng: np.random.Generator) -> dict[str, np.ndarray]:
    m = dims["M"]
    return {"X": as_dtype(rng.standard_normal((m, 64)), "bf16"),
            "W1": as_dtype(rng.standard_normal((128, 64)) / 8, "bf16"),
            "W2": as_dtype(rng.standard_normal((64, 128)) / 8, "bf16")}


def reference(x: dict[str, np.ndarray], dims) -> dict[str, np.ndarray]:
    h = x["X"].astype(np.float64) @ x["W1"].astype(np.float64).T
    p = as_dtype(h, "bf16").astype(np.float64)   # the kernel rounds H to bf16 as A
    return {"Y": as_dtype(p @ x["W2"].astype(np.float64).T, "bf16")}


TASK = Task(
    name="chain_gemm_128", description="Y = bf16(X @ W1.T) @ W2.T, a 128-wide intermediate",
    kernels=(), inputs=inputs, reference=reference, outputs=("Y",),
    shapes=(Shape({"M": 128}, 1.0, "headline"),),
    sim_shapes=(Shape({"M": 128}), Shape({"M": 72}, label="ragged")),
    # bf16 output; the intermediate is rounded as in the kernel, so only the f32
    # summation order differs from the float64 reference.
    tolerances={"bf16": Tolerance(atol=2e-2, rtol=1.6e-2)},
    baseline="none",
)
