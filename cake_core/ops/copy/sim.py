"""Data movement: TMA, cp.async, ldmatrix, and plain loads and stores.

TMA copies and bulk stores are issued by one elected thread of the op's group (the
group's first process); cp.async copies are shared by every warp of the group, each warp
moving the 16-byte chunks its threads own.  Copies read and write memory when the
scheduler completes them, not when they are issued.
"""

from __future__ import annotations

import numpy as np

from cake_core.diagnostics import codes
from cake_core.ir.kernel import Op
from cake_core.ir.types import FragmentType, const_shape
from cake_core.sim.context import GlobalFault, SimContext
from cake_core.sim.dtypes import decode, encode
from cake_core.sim.layout import SmemView
from cake_core.sim.races import join
from cake_core.sim.state import (
    AsyncOp,
    Blocked,
    Fragment,
    GlobalTensor,
    PipelineRT,
    TileRef,
)
from cake_core.sim.waits import check_init, group_wait


def tma_load(op: Op, ctx: SimContext) -> None:
    if not ctx.leader(op):
        return None
    dst = ctx.view(op, "dst")
    tile = ctx.tile(op, "src")
    target = ctx.arg(op, "bar")
    nbytes = tile.nbytes
    if isinstance(target, PipelineRT):
        cur = ctx.proc.cursor(target.name)
        if not cur.acquired:
            ctx.report(codes.SIM_BARRIER_MISUSE, op.span,
                       f"tma_load signals pipeline `{target.name}` outside an "
                       "acquire()..commit() of a stage: no stage is held",
                       key=("CK508", id(op)))
            return None
        s = cur.acquired[-1]
        bar = target.full[s]
        cur.tx[s] = cur.tx.get(s, 0) + nbytes
    else:
        bar = ctx.barrier(op, "bar")
        check_init(ctx, op, bar)

    def complete(a: AsyncOp) -> None:
        bits = ctx.global_read(tile, op, signed=True)
        ctx.smem_write(dst, bits.reshape(dst.logical_shape), op, actor=a, proxy="async")
        bar.complete_tx(nbytes, a.vc)

    ctx.issue("tma_load", ("tma", id(bar)), op, complete)
    return None


def tma_store(op: Op, ctx: SimContext) -> None:
    if not ctx.leader(op):
        return None
    tile = ctx.tile(op, "dst")
    src = ctx.view(op, "src")

    def complete(a: AsyncOp) -> None:
        bits = ctx.smem_read(src, op, actor=a, proxy="async")
        ctx.global_write(tile, bits.reshape(tile.shape), op)

    ctx.proc.bulk.append(ctx.issue("tma_store", ("bulk",), op, complete))
    return None


def tma_store_wait(op: Op, ctx: SimContext) -> Blocked | None:
    """Waits in the issuing thread only: a process standing for several warps passes the
    stores' completion to its other warps at their next barrier (CK316), and to the
    issuing thread's own next one-thread op."""
    if not ctx.leader(op):
        return None
    proc = ctx.proc
    several = len(proc.warps) > 1
    r = group_wait(ctx, proc.bulk, ctx.int(op, "n"), "bulk stores", acquire=not several)
    if isinstance(r, Blocked):
        return r
    if several:
        proc.leader_knows += [a.vc for a in r]
    return None


def cp_async(op: Op, ctx: SimContext) -> None:
    dst = ctx.view(op, "dst")
    tile = ctx.tile(op, "src")
    ctx.global_read(tile, op)  # a negative coordinate is a fault of the issuing thread
    n = int(np.prod(dst.shape))
    mask = ctx.share(op, n, dst.dtype.bytes)
    if mask is not None and not mask.any():
        return None

    def complete(a: AsyncOp) -> None:
        bits = ctx.global_read(tile, op)
        ctx.smem_write(dst, bits.reshape(dst.logical_shape), op, actor=a, mask=mask)

    ctx.proc.cp_open.append(ctx.issue("cp.async", ("cp.async",), op, complete))
    return None


def cp_async_commit(op: Op, ctx: SimContext) -> None:
    ctx.proc.cp_groups.append(ctx.proc.cp_open)
    ctx.proc.cp_open = []


def cp_async_wait(op: Op, ctx: SimContext) -> Blocked | None:
    """`cp.async.wait_group n`: every committed group but the newest `n` is complete.

    Groups are counted as committed, empty ones included: a prologue that commits past
    the end of K leaves empty groups among the newest `n`, and the wait still covers the
    older ones.  Only the groups the wait covers are acquired; a newer group that happens
    to have landed is not ordered before this thread's later accesses."""
    n = ctx.int(op, "n")
    groups = ctx.proc.cp_groups
    covered = groups[:max(len(groups) - n, 0)]
    needed = [a for g in covered for a in g]
    if not all(a.done for a in needed):
        return Blocked(f"waits until all but the newest {n} cp.async groups are complete",
                       lambda: all(a.done for a in needed),
                       needs=lambda: [a for a in needed if not a.done])
    for a in needed:
        join(ctx.proc.vc, a.vc)
    del groups[:len(covered)]
    return None


def _to_fragment(op: Op, bits: np.ndarray) -> Fragment:
    t = op.results[0].type
    assert isinstance(t, FragmentType)
    shape = const_shape(t.shape) or bits.shape
    return Fragment(decode(bits, t.dtype).reshape(shape), t.dtype)


def ldmatrix(op: Op, ctx: SimContext) -> Fragment:
    src = ctx.view(op, "src")
    return _to_fragment(op, ctx.smem_read(src, op))


def load(op: Op, ctx: SimContext) -> Fragment:
    src = ctx.arg(op, "src")
    if isinstance(src, SmemView):
        bits = ctx.smem_read(src, op)
    else:
        assert isinstance(src, TileRef)
        bits = ctx.global_read(src, op)
    return _to_fragment(op, bits)


def load_scalar(op: Op, ctx: SimContext) -> int:
    """The element's value as a Python int (the simulator's runtime index); an index
    outside the tensor is a fault, and an element another block already wrote is a race
    between blocks, which the GPU does not order."""
    t = ctx.arg(op, "src")
    assert isinstance(t, GlobalTensor)
    raw = ctx.arg(op, "index")
    idx = tuple(int(i) for i in (raw if isinstance(raw, tuple) else (raw,)))
    if any(not 0 <= i < n for i, n in zip(idx, t.shape, strict=True)):
        raise GlobalFault(f"load_scalar reads `{t.name}`{list(idx)}, outside its shape "
                          f"{t.shape}")
    if t.owner is not None and 0 <= t.owner[idx] != ctx.block.linear:
        ctx.report(codes.SIM_DATA_RACE, op.span,
                   f"{ctx.block.describe()} reads `{t.name}`{list(idx)}, which block "
                   f"#{int(t.owner[idx])} wrote; blocks run in any order, so the value read "
                   "depends on which runs first", data={"tensor": t.name},
                   key=("CK501-global", id(op)))
    return int(decode(t.data[idx], t.dtype))


def store(op: Op, ctx: SimContext) -> None:
    f = ctx.frag(op, "src")
    dst = ctx.arg(op, "dst")
    bits = encode(f.array, f.dtype)
    if isinstance(dst, SmemView):
        ctx.smem_write(dst, bits.reshape(dst.logical_shape), op)
    else:
        assert isinstance(dst, TileRef)
        ctx.global_write(dst, bits.reshape(dst.shape), op)


# --- stmatrix ---------------------------------------------------------------------------------
def stmatrix(op: Op, ctx: SimContext) -> None:
    """Writes part `part` of the fragment's columns, as the group's warps together do.

    The lane-level distribution only decides which thread writes which element; the
    elements written and the proxy they go through (generic: a `tma_store` of them needs
    a fence) are those of a plain `store` of the same columns."""
    f = ctx.frag(op, "src")
    dst = ctx.view(op, "dst")
    rows, width = dst.logical_shape
    part = ctx.int(op, "part")
    parts = f.array.shape[1] // width
    if not 0 <= part < parts:
        ctx.report(codes.SIM_OUT_OF_BOUNDS, op.span,
                   f"stmatrix part {part} is out of range: the fragment has {parts} part(s) "
                   f"of {width} columns", key=("stmatrix-part", id(op)))
        return None
    cols = f.array[:, part * width:(part + 1) * width]
    ctx.smem_write(dst, encode(cols, f.dtype).reshape(rows, width), op)
    return None
