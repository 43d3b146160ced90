"""Y = X on the rows each segment holds, 0 on its padding rows: segments of a routing
table read from memory (tests/test_scalar_load.py).

Segment g starts at row Offsets[g], a multiple of 16, and holds Counts[g] rows (0 for
one of them); its padding up to the next multiple of 16 holds data that a kernel which
ignores the counts copies through.  The segments cover all MT rows.
"""
from __future__ import annotations

import numpy as np

from cake_core.tasks import Shape, Task, Tolerance

ALIGN = 16


def _counts(g: int, mt: int) -> np.ndarray:
    """Ragged counts, segment 1 empty; the last segment fills the rows left but 3."""
    c = np.array([(7 * e + 5) % 37 if e != 1 else 0 for e in range(g)], dtype=np.int32)
    c[-1] = mt - int((-(-c[:-1] // ALIGN) * ALIGN).sum()) - 3
    return c


def inputs(dims, rng: np.random.Generator) -> dict[str, np.ndarray]:
    g = dims["G"]
    counts = _counts(g, dims["MT"])
    offsets = np.zeros(g + 1, dtype=np.int32)
    offsets[1:] = np.cumsum(-(-counts // ALIGN) * ALIGN)
    return {"X": rng.standard_normal((dims["MT"], dims["N"])).astype(np.float32),
            "Offsets": offsets, "Counts": counts}


def reference(x: dict[str, np.ndarray], dims) -> dict[str, np.ndarray]:
    y = np.zeros_like(x["X"])
    for lo, n in zip(x["Offsets"][:-1], x["Counts"], strict=False):
        y[lo:lo + n] = x["X"][lo:lo + n]
    return {"Y": y}


TASK = Task(
    name="segment_mask", description="copy the rows of each segment, zero its padding",
    kernels=(), inputs=inputs, reference=reference, outputs=("Y",),
    shapes=(Shape({"G": 8, "MT": 512, "N": 256}, 1.0, "headline"),),
    sim_shapes=(Shape({"G": 4, "MT": 128, "N": 48}),),
    tolerances={"f32": Tolerance(atol=0.0, rtol=0.0)},
    baseline="none",
)
