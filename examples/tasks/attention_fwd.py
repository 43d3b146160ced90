"""Attention forward: O = softmax(Q @ K.T / sqrt(D)) @ V, bf16 in and out, non-causal.

Q, K (BH, S, D) and O (BH, S, D) are row-major; V comes transposed, Vt (BH, D, S), so the
second GEMM reads it K-major (examples/attention_fwd_sm90.cake explains why).  BH is
batch * heads: the headline is batch 16 x 16 heads, S = 4096, D = 128.
"""

from __future__ import annotations

from _attention import inputs_for, reference_for

from cake_core.tasks import KernelEntry, Shape, Task, Tolerance

D = 128


TASK = Task(
    name="attention_fwd",
    description=__doc__.strip().splitlines()[0],
    kernels=(KernelEntry("../attention_fwd_sm90.cake", "attention_fwd_sm90"),
             # S a multiple of the 128-key tile only: with the ragged key mask ptxas
             # serializes this kernel's wgmmas (CK604, docs/kernels/attention.md, Limits)
             KernelEntry("../attention_fwd_sm90_pingpong.cake", "attention_fwd_sm90_pingpong",
                         sim_shapes=(Shape({"BH": 2, "S": 128}),
                                     Shape({"BH": 1, "S": 512},
                                           label="four key tiles: a stage refilled"))),
             # as the ping-pong kernel; more work items than the simulator's 2 SMs, so
             # the tile loop comes round: the second Q buffer and the K/V ring carried over
             KernelEntry("../attention_fwd_sm90_persistent.cake",
                         "attention_fwd_sm90_persistent",
                         sim_shapes=(Shape({"BH": 3, "S": 128}, label="three items on two blocks"),
                                     Shape({"BH": 2, "S": 512},
                                           label="two items a block, four key tiles each")))),
    inputs=inputs_for(D),
    reference=reference_for(D),
    outputs=("O",),
    # a grid over sequence length and batch * heads (the portfolio's buckets): short
    # prompts with many heads to one long context
    shapes=(Shape({"BH": 256, "S": 4096}, 1.0, "headline: batch 16 x 16 heads"),
            Shape({"BH": 256, "S": 1024}, 0.5),
            Shape({"BH": 64, "S": 8192}, 0.5),
            Shape({"BH": 1024, "S": 512}, 0.5, "short prompts, batch 32 x 32 heads"),
            Shape({"BH": 128, "S": 2048}, 0.5),
            Shape({"BH": 32, "S": 16384}, 0.5, "one long context, 32 heads")),
    sim_shapes=(Shape({"BH": 2, "S": 128}),
                Shape({"BH": 3, "S": 192}, label="query tile past S"),
                Shape({"BH": 2, "S": 104}, label="ragged: last key tile 40 of 64"),
                Shape({"BH": 3, "S": 200}, label="ragged: last key tile 8 of 64")),
    # O is a convex combination of V rows (|V| ~ 1): errors are absolute.  P is rounded to
    # bf16 before P @ V (2^-9 relative per weight) while the reference keeps it exact, and
    # O itself is rounded to bf16; 2e-2 absolute / 2e-2 relative is several times the sum
    # of both on these sizes and far below what a wrong row or column gives.
    tolerances={"bf16": Tolerance(atol=2e-2, rtol=2e-2)},
    baseline="torch.nn.functional.scaled_dot_product_attention on bf16 CUDA tensors "
             "(V transposed back), same shapes",
    fixed={"D": D},   # the head dim: one task per head dim, one dispatcher over them all
)
