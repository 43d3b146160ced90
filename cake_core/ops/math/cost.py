"""Cost facets of element-wise math and row reductions on the CUDA cores.

Work is counted in FP32-lane operations per block.  Transcendentals go through the
multi-function unit (MUFU), a pipe of its own that delivers an eighth as many results per
clock as the FP32 lanes on sm_80 and later (16 against 128 per SM; CUDA C++ Programming
Guide, arithmetic instruction throughput): each takes one FP32 issue slot (`cuda_ops`) and
one MUFU result (`mufu_ops`), and the timing model overlaps the two pipes.  A division is
a reciprocal plus a multiply; `exp` is a multiply by log2(e) and an `exp2`.
"""

from __future__ import annotations

import math as _m
from collections.abc import Callable

from cake_core.cost.record import FREE, CostContext, CostRecord
from cake_core.ir.kernel import Op
from cake_core.ir.types import FragmentType

Facet = Callable[[Op, CostContext], CostRecord]


def _elements(op: Op, ctx: CostContext) -> float:
    """Elements the op computes: its largest fragment result or operand (0 for scalars)."""
    sizes = [ctx.numel(v.type) for v in (*op.results, *op.args.values())
             if isinstance(v.type, FragmentType)]
    return float(max(sizes, default=0) * ctx.replicas(op))


def _ew(weight: float, mufu: float = 0.0) -> Facet:
    def facet(op: Op, ctx: CostContext) -> CostRecord:
        n = _elements(op, ctx)
        return CostRecord(cuda_ops=weight * n, mufu_ops=mufu * n)

    return facet


add = sub = mul = maximum = minimum = _ew(1.0)
lt = le = gt = ge = eq = ne = _ew(1.0)
neg = abs = _ew(1.0)  # the primitive is named `abs`
where = _ew(1.0)
col_index = row_index = _ew(1.0)  # an integer add of the thread's offset per register
fma = _ew(1.0)  # one FFMA
cast = _ew(1.0)
div = _ew(2.0, mufu=1.0)
exp = _ew(2.0, mufu=1.0)
exp2 = log = log2 = sqrt = rsqrt = _ew(1.0, mufu=1.0)


def unsqueeze(op: Op, ctx: CostContext) -> CostRecord:
    return FREE


def cols(op: Op, ctx: CostContext) -> CostRecord:
    """A column slice of a wgmma fragment names registers the operand already holds."""
    return FREE


def _row(passes: float) -> Facet:
    """A row reduction: one op per element per pass, plus a shuffle tree over the lanes
    that share a row (log2 of up to 4 lanes, as in the mma/wgmma accumulator layouts)."""

    def facet(op: Op, ctx: CostContext) -> CostRecord:
        x = op.args["x"].type
        n = float(ctx.numel(x) * ctx.replicas(op))
        rows = float(ctx.eval(x.shape[0])) if isinstance(x, FragmentType) and x.shape else 1.0
        shuffles = rows * _m.log2(4) * passes
        return CostRecord(cuda_ops=passes * n + shuffles)

    return facet


row_max = row_min = row_sum = _row(1.0)
row_argmin = row_argmax = _row(2.0)
