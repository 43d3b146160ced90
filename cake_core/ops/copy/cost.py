"""Cost facets of data movement: global traffic by latency class, shared-memory bytes."""

from __future__ import annotations

import contextlib
from dataclasses import replace

from cake_core.cost.exposure import barrier_key
from cake_core.cost.record import (
    ONCE,
    PIPELINED,
    SERIAL,
    CostContext,
    CostRecord,
    GlobalAccess,
)
from cake_core.ir.kernel import Op
from cake_core.ir.symbolic import Var
from cake_core.ir.types import PipelineType, SmemType, TensorType, TileType
from cake_core.ir.values import elements
from cake_core.primitives.registry import multicast_fanout


def _bytes(ctx: CostContext, t: object) -> float:
    dtype = getattr(t, "dtype", None)
    return float(ctx.numel(t) * (dtype.bytes if dtype is not None else 1))  # type: ignore[arg-type]


def tma_load(op: Op, ctx: CostContext) -> CostRecord:
    """A TMA copy: one instruction, the tile's bytes from L2/DRAM into smem.

    How much of its round trip the kernel waits for is read off the kernel's structure
    (`cake_core.cost.exposure`): a pipeline whose loads run ahead of their waits keeps
    `stages - 1` copies in flight; a copy waited for later in the same iteration (a
    single-buffered raw mbarrier, a one-role pipeline in lockstep) exposes its round
    trip every iteration; a raw mbarrier waited once (a tile loaded up front) exposes it
    once per block.  Copies on one barrier are grouped: they complete together.
    """
    bar_value = op.args["bar"]
    bar = bar_value.type
    if isinstance(bar, PipelineType):
        default = (PIPELINED, bar.stages - 1) if bar.stages > 1 else (SERIAL, 0)
    else:
        default = (ONCE, 0)
    latency, depth = ctx.load_exposure.get(id(op), default)
    key = barrier_key(bar_value)
    group = "/".join(key) if key is not None else ""
    access = ctx.tile_access(op.args["src"], latency=latency, depth=depth, group=group)
    # A multicast: every block of the mask issues its slice to all of them, so each block
    # receives `fan` slices while reading one from L2 (the record's `multicast` hook).
    fan = multicast_fanout(op)
    if fan > 1:
        access = replace(access, bytes=access.bytes * fan, multicast=fan)
    return CostRecord(reads=(access,), smem_write=_bytes(ctx, op.args["dst"].type) * fan,
                      issue=2.0)


def tma_store(op: Op, ctx: CostContext) -> CostRecord:
    access = ctx.tile_access(op.args["dst"], latency=SERIAL)
    return CostRecord(writes=(access,), smem_read=_bytes(ctx, op.args["src"].type), issue=2.0)


def tma_store_wait(op: Op, ctx: CostContext) -> CostRecord:
    return CostRecord(sync=(("async_wait", 1.0),))


def cp_async(op: Op, ctx: CostContext) -> CostRecord:
    """LDGSTS: 16-byte chunks spread over the executing threads, overlapped as deep as
    the kernel's `cp_async_wait(n)` inside its loop allows (n + 1 groups).  The chunks'
    shared-memory writes pay the bank conflicts of the destination's layout."""
    depth = ctx.cp_async_depth
    latency = PIPELINED if depth > 0 else SERIAL
    access = ctx.tile_access(op.args["src"], latency=latency, depth=depth)
    nbytes = _bytes(ctx, op.args["dst"].type)
    return CostRecord(reads=(access,), smem_write=nbytes, smem_conflict=ctx.smem_conflict(op),
                      issue=nbytes / 16.0 / 32.0)


def cp_async_commit(op: Op, ctx: CostContext) -> CostRecord:
    return CostRecord(issue=1.0)


def cp_async_wait(op: Op, ctx: CostContext) -> CostRecord:
    return CostRecord(sync=(("async_wait", 1.0),))


def ldmatrix(op: Op, ctx: CostContext) -> CostRecord:
    """Shared-memory reads into an mma.sync operand, per warp, at the wavefronts the
    source's layout costs (8 rows of 16 bytes per phase; row-major rows 64 or 128 bytes
    apart fall into the same banks)."""
    nbytes = _bytes(ctx, op.args["src"].type) * ctx.replicas(op)
    return CostRecord(smem_read=nbytes, smem_conflict=ctx.smem_conflict(op),
                      issue=nbytes / 512.0)


def load(op: Op, ctx: CostContext) -> CostRecord:
    """A synchronous load: from a global tile every execution waits for the round trip."""
    src = op.args["src"]
    if isinstance(src.type, TileType):
        return CostRecord(reads=(ctx.tile_access(src, latency=SERIAL),))
    return CostRecord(smem_read=_bytes(ctx, src.type), smem_conflict=ctx.smem_conflict(op))


def load_scalar(op: Op, ctx: CostContext) -> CostRecord:
    """One 4-byte read the thread waits for: a serial round trip, each execution.  Its
    value is not the cost model's to know: `expect=` gives the one loop bounds that
    depend on it are priced at (none: such a loop cannot be priced)."""
    src = op.args["src"]
    t = src.type
    assert isinstance(t, TensorType)
    footprint = float(t.dtype.bytes)
    for d in t.shape:
        with contextlib.suppress(KeyError):
            footprint *= ctx.eval(d)
    axes = frozenset(a.name.removeprefix("block.") for e in elements(op.args["index"])
                     if e.sym is not None for a in e.sym.atoms()
                     if isinstance(a, Var) and a.name.startswith("block."))
    expect = op.args["expect"]
    value = ctx.eval(expect.sym) if expect.sym is not None else None
    return CostRecord(reads=(GlobalAccess(src.name, float(t.dtype.bytes), axes, footprint,
                                          SERIAL),), value=value)


def store(op: Op, ctx: CostContext) -> CostRecord:
    """Registers to a global tile (clipped at the edge) or to shared memory."""
    dst = op.args["dst"]
    reps = ctx.replicas(op)
    if isinstance(dst.type, SmemType):
        return CostRecord(smem_write=_bytes(ctx, dst.type) * reps,
                          smem_conflict=ctx.smem_conflict(op))
    return CostRecord(writes=(ctx.tile_access(dst, latency=SERIAL, replicas=reps),))


# --- stmatrix ---------------------------------------------------------------------------------
def stmatrix(op: Op, ctx: CostContext) -> CostRecord:
    """Shared-memory writes of one part of an accumulator: 16-byte rows, 8 per phase like
    ldmatrix, at the wavefronts the destination's layout costs; one instruction per
    512 bytes a warp stores (x4: four 8x8 matrices of 16-bit elements)."""
    nbytes = _bytes(ctx, op.args["dst"].type) * ctx.replicas(op)
    return CostRecord(smem_write=nbytes, smem_conflict=ctx.smem_conflict(op),
                      issue=nbytes / 512.0)
