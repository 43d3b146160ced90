"""Y = max over each row of X: values below zero, so zero-filled columns past N would win
unless the kernel masks them (tests/test_element_index.py)."""
from __future__ import annotations

import numpy as np

from cake_core.tasks import Shape, Task, Tolerance


def inputs(dims, rng: np.random.Generator) -> dict[str, np.ndarray]:
    return {"X": -1.0 - rng.random((dims["M"], dims["N"]), dtype=np.float32)}


def reference(x: dict[str, np.ndarray], dims) -> dict[str, np.ndarray]:
    return {"Y": x["X"].max(axis=1).astype(np.float32)}


TASK = Task(
    name="rowmax_masked", description="row maximum over ragged columns",
    kernels=(), inputs=inputs, reference=reference, outputs=("Y",),
    shapes=(Shape({"M": 64, "N": 1000}, 1.0, "headline"),),
    sim_shapes=(Shape({"M": 8, "N": 200}), Shape({"M": 6, "N": 129}, label="ragged")),
    tolerances={"f32": Tolerance(atol=0.0, rtol=0.0)},
    baseline="none",
)
