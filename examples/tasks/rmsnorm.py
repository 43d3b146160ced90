"""RMSNorm: Y = X / sqrt(mean(X^2, last axis) + 1e-6) * W, bf16 in and out, f32 math.

X (M, D) bf16 token rows with hidden size D = 4096 (the kernels' constant), W (D,) bf16
gain, Y (M, D) bf16.  M (tokens) is ragged on purpose in the simulated shapes.
"""

from __future__ import annotations

import numpy as np

from cake_core.tasks import KernelEntry, Shape, Task, Tolerance, as_dtype

#: The kernels' hidden size: a compile-time constant of the .cake files.
D = 4096
EPS = 1e-6


def inputs(dims, rng: np.random.Generator) -> dict[str, np.ndarray]:
    m = dims["M"]
    # a per-row scale spread over two decades, so a wrong mean or eps shows in every row
    scale = np.exp(rng.uniform(-2.0, 2.0, size=(m, 1)))
    return {"X": as_dtype(rng.standard_normal((m, D)) * scale, "bf16"),
            "W": as_dtype(1.0 + 0.1 * rng.standard_normal(D), "bf16")}


def reference(t: dict[str, np.ndarray], dims) -> dict[str, np.ndarray]:
    x = t["X"].astype(np.float64)
    r = 1.0 / np.sqrt((x * x).mean(-1, keepdims=True) + EPS)
    return {"Y": as_dtype(x * r * t["W"].astype(np.float64), "bf16")}


TASK = Task(
    name="rmsnorm",
    description=__doc__.strip().splitlines()[0],
    kernels=(KernelEntry("../rmsnorm_sm90.cake", "rmsnorm_sm90"),
             KernelEntry("../rmsnorm_sm80.cake", "rmsnorm_sm80")),
    inputs=inputs,
    reference=reference,
    outputs=("Y",),
    shapes=(Shape({"M": 8192}, 1.0, "headline, 8192 tokens"),
            Shape({"M": 32768}, 0.5, "32768 tokens"),
            Shape({"M": 8191}, 0.5, "ragged M")),
    # the kernels' blocks hold 4 rows: 6 and 9 leave a partial last block
    sim_shapes=(Shape({"M": 8}),
                Shape({"M": 6}, label="ragged M"),
                Shape({"M": 9}, label="ragged M, one row in the last block")),
    # bf16 output: half an ulp is 2^-9 relative; the f32 row sums are far closer than that
    tolerances={"bf16": Tolerance(atol=1e-2, rtol=1.6e-2)},
    baseline="torch: x * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + 1e-6) * w "
             "on bf16 CUDA tensors, same shapes",
)
