"""Cost facets of tensor-core MMAs: FLOPs, instruction shape, operand traffic."""

from __future__ import annotations

from cake_core.cost.record import CostContext, CostRecord, TensorWork
from cake_core.ir.kernel import Op
from cake_core.ir.types import SmemType


def _mnk(op: Op, ctx: CostContext) -> tuple[int, int, int]:
    acc, a = op.args["acc"].type, op.args["a"].type
    m, n = (ctx.eval(d) for d in acc.shape)  # type: ignore[attr-defined]
    k = ctx.eval(a.shape[-1])  # type: ignore[attr-defined]
    return m, n, k


def wgmma(op: Op, ctx: CostContext) -> CostRecord:
    """One wgmma group: `M // 64` instructions of m64nNk16 (k32 for 8-bit) per K step.

    Operands come from shared memory (A may come from registers): every m64 slab reads
    its A rows once and the whole B tile once, which is what makes narrow-N or
    register-starved tiles shared-memory bound rather than tensor bound.
    """
    m, n, k = _mnk(op, ctx)
    a = op.args["a"].type
    dtype = a.dtype  # type: ignore[attr-defined]
    kstep = 32 if dtype.bits == 8 else 16
    slabs = max(1, m // 64)
    instructions = float(slabs * max(1, k // kstep))
    smem_read = float(slabs * n * k * dtype.bytes)
    if isinstance(a, SmemType):
        smem_read += float(m * k * dtype.bytes)
    work = TensorWork(2.0 * m * n * k, dtype.value, "wgmma", (64, n, kstep), instructions)
    return CostRecord(tensor=work, smem_read=smem_read, issue=instructions)


def wgmma_wait(op: Op, ctx: CostContext) -> CostRecord:
    """`wgmma_wait(0)` drains the tensor pipe: the next group cannot overlap this one."""
    n = op.args["n"].sym.const if op.args["n"].sym is not None else 0
    return CostRecord(sync=(("wgmma_wait0" if not n else "async_wait", 1.0),))


def mma_sync(op: Op, ctx: CostContext) -> CostRecord:
    """m16n8k16 instructions over per-warp fragments (operands already in registers)."""
    m, n, k = _mnk(op, ctx)
    warps = ctx.replicas(op)
    dtype = op.args["a"].type.dtype  # type: ignore[attr-defined]
    instructions = float((m // 16) * (n // 8) * (k // 16) * warps)
    work = TensorWork(2.0 * m * n * k * warps, dtype.value, "mma_sync", (16, 8, 16),
                      instructions)
    return CostRecord(tensor=work, issue=instructions)

