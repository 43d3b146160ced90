"""Cost facets of data movement: global traffic by latency class, shared-memory bytes."""

from __future__ import annotations

from cake_core.cost.record import ONCE, PIPELINED, SERIAL, CostContext, CostRecord
from cake_core.ir.kernel import Op
from cake_core.ir.types import PipelineType, SmemType, TileType


def _bytes(ctx: CostContext, t: object) -> float:
    dtype = getattr(t, "dtype", None)
    return float(ctx.numel(t) * (dtype.bytes if dtype is not None else 1))  # type: ignore[arg-type]


def tma_load(op: Op, ctx: CostContext) -> CostRecord:
    """A TMA copy: one instruction, the tile's bytes from L2/DRAM into smem.

    Completion on a pipeline overlaps up to `stages - 1` iterations of the loop around it;
    on a raw mbarrier the kernel waits once for it (a tile loaded up front).
    """
    bar = op.args["bar"].type
    if isinstance(bar, PipelineType):
        latency, depth = (PIPELINED, bar.stages - 1) if bar.stages > 1 else (SERIAL, 0)
    else:
        latency, depth = ONCE, 0
    src = op.args["src"]
    access = ctx.tile_access(src, latency=latency, depth=depth)
    return CostRecord(reads=(access,), smem_write=_bytes(ctx, op.args["dst"].type), issue=2.0)


def tma_store(op: Op, ctx: CostContext) -> CostRecord:
    access = ctx.tile_access(op.args["dst"], latency=SERIAL)
    return CostRecord(writes=(access,), smem_read=_bytes(ctx, op.args["src"].type), issue=2.0)


def tma_store_wait(op: Op, ctx: CostContext) -> CostRecord:
    return CostRecord(sync=(("async_wait", 1.0),))


def cp_async(op: Op, ctx: CostContext) -> CostRecord:
    """LDGSTS: 16-byte chunks spread over the executing threads, overlapped as deep as
    the kernel's `cp_async_wait(n)` inside its loop allows (n + 1 groups)."""
    depth = ctx.cp_async_depth
    latency = PIPELINED if depth > 0 else SERIAL
    access = ctx.tile_access(op.args["src"], latency=latency, depth=depth)
    nbytes = _bytes(ctx, op.args["dst"].type)
    return CostRecord(reads=(access,), smem_write=nbytes, issue=nbytes / 16.0 / 32.0)


def cp_async_commit(op: Op, ctx: CostContext) -> CostRecord:
    return CostRecord(issue=1.0)


def cp_async_wait(op: Op, ctx: CostContext) -> CostRecord:
    return CostRecord(sync=(("async_wait", 1.0),))


def ldmatrix(op: Op, ctx: CostContext) -> CostRecord:
    """Shared-memory reads into an mma.sync operand, per warp."""
    nbytes = _bytes(ctx, op.args["src"].type) * ctx.replicas(op)
    return CostRecord(smem_read=nbytes, issue=nbytes / 512.0)


def load(op: Op, ctx: CostContext) -> CostRecord:
    """A synchronous load: from a global tile every execution waits for the round trip."""
    src = op.args["src"]
    if isinstance(src.type, TileType):
        return CostRecord(reads=(ctx.tile_access(src, latency=SERIAL),))
    return CostRecord(smem_read=_bytes(ctx, src.type))


def store(op: Op, ctx: CostContext) -> CostRecord:
    """Registers to a global tile (clipped at the edge) or to shared memory."""
    dst = op.args["dst"]
    reps = ctx.replicas(op)
    if isinstance(dst.type, SmemType):
        return CostRecord(smem_write=_bytes(ctx, dst.type) * reps)
    return CostRecord(writes=(ctx.tile_access(dst, latency=SERIAL, replicas=reps),))
