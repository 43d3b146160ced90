"""Row softmax over the last axis: Y = exp(X - max) / sum(exp(X - max)), bf16 in and out.

X (M, N) bf16, Y (M, N) bf16, f32 math.  The register-resident kernel holds a whole row of
N = 4096 (its constant); the online kernel takes N as a launch dim, a multiple of its
1024-column chunk, for rows too long for the registers.  M is ragged on purpose.
"""

from __future__ import annotations

import numpy as np

from cake_core.tasks import KernelEntry, Shape, Task, Tolerance, as_dtype


def inputs(dims, rng: np.random.Generator) -> dict[str, np.ndarray]:
    m, n = dims["M"], dims["N"]
    # logits with a per-row offset and spread: a missing max subtraction overflows, a wrong
    # sum or a wrong exponent base shows in every row
    off = rng.uniform(-50.0, 50.0, size=(m, 1))
    spread = rng.uniform(0.5, 4.0, size=(m, 1))
    return {"X": as_dtype(off + spread * rng.standard_normal((m, n)), "bf16")}


def reference(t: dict[str, np.ndarray], dims) -> dict[str, np.ndarray]:
    x = t["X"].astype(np.float64)
    e = np.exp(x - x.max(-1, keepdims=True))
    return {"Y": as_dtype(e / e.sum(-1, keepdims=True), "bf16")}


_FIXED_N = 4096

TASK = Task(
    name="softmax",
    description=__doc__.strip().splitlines()[0],
    kernels=(
        KernelEntry("../softmax_sm90.cake", "softmax_sm90",
                    shapes=(Shape({"M": 8192, "N": _FIXED_N}, 1.0, "headline, 8192 rows"),
                            Shape({"M": 8191, "N": _FIXED_N}, 0.5, "ragged M")),
                    sim_shapes=(Shape({"M": 8, "N": _FIXED_N}),
                                Shape({"M": 7, "N": _FIXED_N}, label="ragged M"))),
        KernelEntry("../softmax_sm90_online.cake", "softmax_sm90_online"),
    ),
    inputs=inputs,
    reference=reference,
    outputs=("Y",),
    shapes=(Shape({"M": 8192, "N": 8192}, 1.0, "headline, 8192 rows of 8192"),
            Shape({"M": 4096, "N": 32768}, 0.5, "long rows"),
            Shape({"M": 8191, "N": 8192}, 0.5, "ragged M")),
    sim_shapes=(Shape({"M": 8, "N": 3072}),
                Shape({"M": 5, "N": 2048}, label="ragged M")),
    # probabilities down to ~1e-40 in bf16: half an ulp is 2^-9 relative; f32 exp2 and
    # sums are far closer.  atol covers the flush of the tiniest values.
    tolerances={"bf16": Tolerance(atol=1e-6, rtol=1.6e-2)},
    baseline="torch.softmax(x.float(), -1).bfloat16() on CUDA tensors, same shapes",
)
