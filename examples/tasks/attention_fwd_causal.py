"""Causal attention forward: O = softmax(mask(Q @ K.T / sqrt(D))) @ V, query q attending
to keys k <= q, bf16 in and out.

Same inputs and layouts as attention_fwd (Q, K, O (BH, S, D); V transposed, Vt (BH, D, S)).
The headline is batch 16 x 16 heads, S = 4096, D = 128.
"""

from __future__ import annotations

from _attention import inputs_for, reference_for

from cake_core.tasks import KernelEntry, Shape, Task, Tolerance

D = 128


TASK = Task(
    name="attention_fwd_causal",
    description=__doc__.strip().splitlines()[0],
    kernels=(KernelEntry("../attention_fwd_sm90_causal.cake", "attention_fwd_sm90_causal"),),
    inputs=inputs_for(D),
    reference=reference_for(D, causal=True),
    outputs=("O",),
    shapes=(Shape({"BH": 256, "S": 4096}, 1.0, "headline: batch 16 x 16 heads"),
            Shape({"BH": 256, "S": 1024}, 0.5),
            Shape({"BH": 64, "S": 8192}, 0.5)),
    sim_shapes=(Shape({"BH": 2, "S": 128}),
                Shape({"BH": 2, "S": 256}, label="two query tiles, four key tiles"),
                Shape({"BH": 3, "S": 192}, label="query tile past S"),
                Shape({"BH": 2, "S": 104}, label="ragged: last key tile 40 of 64"),
                Shape({"BH": 3, "S": 200}, label="ragged: last key tile 8 of 64")),
    # As attention_fwd: O is a convex combination of V rows (|V| ~ 1), P is rounded to bf16
    # before P @ V and O to bf16 at the end.  The first queries average one or a few keys,
    # so O there is close to a single V row (up to ~4 in size) and its bf16 rounding alone
    # is up to 2^-8 * 4 = 0.016: hence atol 2e-2 with rtol 2e-2, the non-causal values.
    tolerances={"bf16": Tolerance(atol=2e-2, rtol=2e-2)},
    baseline="torch.nn.functional.scaled_dot_product_attention(is_causal=True) on bf16 "
             "CUDA tensors (V transposed back), same shapes",
    fixed={"D": D},   # the head dim: one task per head dim, one dispatcher over them all
)
