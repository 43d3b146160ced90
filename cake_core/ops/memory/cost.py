"""Cost facets of allocations and views: they move no data.

Allocations cost nothing at run time except the initialisation they imply: a fragment is
filled (one register move per element), barriers are initialised by one thread.
"""

from __future__ import annotations

from cake_core.cost.record import FREE, CostContext, CostRecord
from cake_core.ir.kernel import Op
from cake_core.ir.types import NoneType


def smem(op: Op, ctx: CostContext) -> CostRecord:
    return FREE


def fragment(op: Op, ctx: CostContext) -> CostRecord:
    """Filling a fragment is one move per element (per warp for per-warp layouts).

    Nothing is written for `fill=None`, nor for a fill that ptxas folds away: a cleared
    accumulator whose first use, straight after, is a wgmma writing it becomes scale-d 0
    on that wgmma's first K step (`HGMMA ... RZ, !UPT` in the SASS)."""
    fill = op.args.get("fill")
    if (fill is not None and isinstance(fill.type, NoneType)) or id(op) in ctx.folded_fills:
        return FREE
    return CostRecord(cuda_ops=float(ctx.numel(op.results[0].type) * ctx.replicas(op)))


def pipeline(op: Op, ctx: CostContext) -> CostRecord:
    """Barrier initialisation: the lanes of one warp initialise the stages in parallel."""
    return CostRecord(issue=1.0)


def mbarrier(op: Op, ctx: CostContext) -> CostRecord:
    return CostRecord(issue=1.0)


def tensor_tile(op: Op, ctx: CostContext) -> CostRecord:
    """A tile is an address computation; the copy that uses it pays for the bytes."""
    return FREE


def smem_tile(op: Op, ctx: CostContext) -> CostRecord:
    return FREE
