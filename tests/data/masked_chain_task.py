"""Y = bf16(mask(X @ W1.T)) @ W2.T with mask keeping h[r, c] for c <= r (a causal mask on the
first product's accumulator, tests/test_element_index.py)."""

from __future__ import annotations

import numpy as np

from cake_core.tasks import Shape, Task, Tolerance, as_dtype


def inputs(dims, rng: np.random.Generator) -> dict[str, np.ndarray]:
    m = dims["M"]
    return {"X": as_dtype(rng.standard_normal((m, 64)), "bf16"),
            "W1": as_dtype(rng.standard_normal((64, 64)) / 8, "bf16"),
            "W2": as_dtype(rng.standard_normal((64, 64)) / 8, "bf16")}


def reference(x: dict[str, np.ndarray], dims) -> dict[str, np.ndarray]:
    h = x["X"].astype(np.float64) @ x["W1"].astype(np.float64).T
    rows = np.arange(h.shape[0])[:, None]
    h = np.where(np.arange(h.shape[1])[None, :] <= rows, h, 0.0)
    p = as_dtype(h, "bf16").astype(np.float64)   # the kernel rounds H to bf16 as A
    return {"Y": as_dtype(p @ x["W2"].astype(np.float64).T, "bf16")}


TASK = Task(
    name="masked_chain", description="Y = bf16(causal(X @ W1.T)) @ W2.T",
    kernels=(), inputs=inputs, reference=reference, outputs=("Y",),
    shapes=(Shape({"M": 128}, 1.0, "headline"),),
    sim_shapes=(Shape({"M": 128}), Shape({"M": 72}, label="ragged")),
    # as the unmasked chain's task: bf16 output, only the f32 summation order differs
    tolerances={"bf16": Tolerance(atol=2e-2, rtol=1.6e-2)},
    baseline="none",
)
