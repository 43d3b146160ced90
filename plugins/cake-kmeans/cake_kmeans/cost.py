"""Cost facet of `argmin_update`: CUDA-core work, in the units of the built-in math facets.

The row scan is the same as `row_argmin`'s (a compare and a select per element, then a
shuffle tree over the lanes that share a row: log2 of 4 lanes in the accumulator
layouts, two shuffles per step for value and index); the epilogue adds one compare and
two selects per row, the offset folding into the index select -- against four (R,)
vector ops for the unfused `lt` + `add` + two `where`s.
"""

from __future__ import annotations

import math

from cake_core.cost.record import CostContext, CostRecord
from cake_core.ir.kernel import Op
from cake_core.ir.types import FragmentType

#: Lanes sharing a row in the wgmma / mma.sync accumulator layouts.
ROW_LANES = 4


def argmin_update(op: Op, ctx: CostContext) -> CostRecord:
    dist = op.args["dist"].type
    assert isinstance(dist, FragmentType)
    replicas = ctx.replicas(op)
    elements = float(ctx.numel(dist) * replicas)
    rows = float(ctx.eval(dist.shape[0]) * replicas) if dist.shape else 1.0
    scan = 2.0 * elements
    shuffles = rows * math.log2(ROW_LANES) * 2.0
    epilogue = 3.0 * rows
    return CostRecord(cuda_ops=scan + shuffles + epilogue)
