"""Attention forward at head dim 64: O = softmax(Q @ K.T / sqrt(64)) @ V, bf16, non-causal.

Same layouts and conventions as attention_fwd.py (which is D = 128): Q, K (BH, S, D) and
O (BH, S, D) row-major, V transposed as Vt (BH, D, S).  The module is self-contained because
tasks are imported by file path, one module each, without a package to import from.
"""

from __future__ import annotations

from _attention import inputs_for, reference_for

from cake_core.tasks import KernelEntry, Shape, Task, Tolerance

D = 64


TASK = Task(
    name="attention_fwd_d64",
    description=__doc__.strip().splitlines()[0],
    kernels=(KernelEntry("../attention_fwd_sm90_d64.cake", "attention_fwd_sm90_d64"),),
    inputs=inputs_for(D),
    reference=reference_for(D),
    outputs=("O",),
    shapes=(Shape({"BH": 256, "S": 4096}, 1.0, "headline: batch 16 x 16 heads"),
            Shape({"BH": 512, "S": 2048}, 0.5),
            Shape({"BH": 128, "S": 8192}, 0.5)),
    sim_shapes=(Shape({"BH": 2, "S": 128}),
                Shape({"BH": 3, "S": 256}, label="query tile past S")),
    # O is a convex combination of V rows (|V| ~ 1): errors are absolute.  P is rounded to
    # bf16 before P @ V (2^-9 relative per weight) while the reference keeps it exact, and
    # O itself is rounded to bf16.  D does not enter either error (both are per weight and
    # per output element), so attention_fwd's 2e-2 / 2e-2 holds; a wrong scale or row moves
    # O by O(0.1) or more.
    tolerances={"bf16": Tolerance(atol=2e-2, rtol=2e-2)},
    baseline="torch.nn.functional.scaled_dot_product_attention on bf16 CUDA tensors "
             "(V transposed back), same shapes",
    fixed={"D": D},   # the head dim: one dispatcher over the attention tasks chooses by it
)
