"""Allocations and views: smem buffers, fragments, pipelines, mbarriers, tiles."""

from __future__ import annotations

import numpy as np

from cake_core.ir.kernel import Op
from cake_core.ir.types import (
    BarrierType,
    FragmentType,
    PipelineType,
    SmemType,
    const_shape,
)
from cake_core.sim.context import SimContext, SimUnsupported
from cake_core.sim.dtypes import VALUE, round_to
from cake_core.sim.layout import SmemView
from cake_core.sim.state import Fragment, GlobalTensor, MBarrier, PipelineRT, TileRef


def smem(op: Op, ctx: SimContext) -> SmemView:
    t = op.results[0].type
    assert isinstance(t, SmemType)
    return SmemView.whole(ctx.sk.buffers[t.buffer]).retyped(t)


def fragment(op: Op, ctx: SimContext) -> Fragment:
    t = op.results[0].type
    assert isinstance(t, FragmentType)
    shape = const_shape(t.shape)
    if shape is None:
        raise SimUnsupported("a fragment needs a constant shape")
    fill = ctx.arg(op, "fill") if "fill" in op.args else 0
    if fill is None:  # no clearing: the first wgmma(accumulate=False) writes every element
        garbage = np.nan if np.issubdtype(VALUE[t.dtype], np.floating) else 0
        return Fragment(np.full(shape, garbage, dtype=VALUE[t.dtype]), t.dtype, undefined=True)
    value = round_to(np.asarray(fill), t.dtype)
    return Fragment(np.full(shape, value, dtype=VALUE[t.dtype]), t.dtype)


def pipeline(op: Op, ctx: SimContext) -> PipelineRT:
    """The block's pipeline (made by whichever process gets here first).

    full[s] expects one arrival per producer process, empty[s] one per consumer process,
    so a role simulated warp by warp arrives once per warp."""
    t = op.results[0].type
    assert isinstance(t, PipelineType)
    obj = ctx.block.objects.get(t.name)
    if obj is None:
        groups = ctx.sk.groups
        prod = len(groups.get(t.producer, ()))
        cons = sum(len(groups.get(c, ())) for c in t.consumers)
        full = [MBarrier(t.name, f"the full barrier of stage {s} of pipeline `{t.name}`",
                         max(prod, 1), op.span, raw=False) for s in range(t.stages)]
        empty = [MBarrier(t.name, f"the empty barrier of stage {s} of pipeline `{t.name}`",
                          max(cons, 1), op.span, raw=False) for s in range(t.stages)]
        obj = ctx.block.objects[t.name] = PipelineRT(t.name, t.stages, full, empty, op.span)
    assert isinstance(obj, PipelineRT)
    return obj


def mbarrier(op: Op, ctx: SimContext) -> list[MBarrier]:
    """Raw mbarriers; the op's elected thread (the group leader) initialises them."""
    t = op.results[0].type
    assert isinstance(t, BarrierType)
    obj = ctx.block.objects.get(t.name)
    if obj is None:
        labels = [f"mbarrier `{t.name}`"] if t.n == 1 else \
            [f"mbarrier `{t.name}[{i}]`" for i in range(t.n)]
        obj = ctx.block.objects[t.name] = [MBarrier(t.name, lab, t.count, op.span, raw=True)
                                           for lab in labels]
    assert isinstance(obj, list)
    if ctx.leader(op):
        for b in obj:
            b.init_comp, b.init_epoch = ctx.proc.comp, ctx.proc.epoch
    return obj


def _ints(x: object) -> tuple[int, ...]:
    if isinstance(x, int):
        return (x,)
    assert isinstance(x, tuple)
    return tuple(int(e) for e in x)


def tensor_tile(op: Op, ctx: SimContext) -> TileRef:
    t = ctx.arg(op, "self")
    assert isinstance(t, GlobalTensor)
    offset = _ints(ctx.arg(op, "offset")) if op.given("offset") else None
    limit = _ints(ctx.arg(op, "limit")) if op.given("limit") else None
    return TileRef(t, _ints(ctx.arg(op, "shape")), _ints(ctx.arg(op, "coords")), offset, limit)


def smem_tile(op: Op, ctx: SimContext) -> SmemView:
    view = ctx.view(op, "self")
    t = op.results[0].type
    assert isinstance(t, SmemType)
    return view.tile(_ints(ctx.arg(op, "shape")), _ints(ctx.arg(op, "coords"))).retyped(t)
