"""Tensor-core MMA: mma.sync (synchronous, per warp) and wgmma (asynchronous groups).

Inputs are rounded to the instruction's input format (bf16, f16 or fp8) and the products
accumulate in float32.  A wgmma group reads its shared-memory operands and accumulates
when the scheduler completes it, into the accumulator's shadow (the tensor cores' copy);
the registers show the result only once `wgmma_wait` has retired every group writing
them.  Reading the accumulator before that is a finding, and reads the old values.  An A
operand in registers is read at issue; re-binding its name before the wait that retires
the group is a finding too (the hardware reads those registers until then).
"""

from __future__ import annotations

import numpy as np

from cake_core.ir.kernel import Op
from cake_core.ir.types import DType
from cake_core.sim.context import SimContext
from cake_core.sim.dtypes import decode, round_to
from cake_core.sim.layout import SmemView
from cake_core.sim.state import AsyncOp, Blocked, Fragment
from cake_core.sim.waits import group_wait


def _product(a: np.ndarray, b: np.ndarray, dtype: DType) -> np.ndarray:
    x = np.ascontiguousarray(round_to(a, dtype), dtype=np.float32)
    y = np.ascontiguousarray(round_to(b, dtype), dtype=np.float32)
    return x @ y  # float32 BLAS (passing dtype= to matmul would bypass it)


def mma_sync(op: Op, ctx: SimContext) -> None:
    acc = ctx.frag(op, "acc")
    a, b = ctx.frag(op, "a"), ctx.frag(op, "b")
    acc.array += _product(a.array, b.array, a.dtype)


def wgmma(op: Op, ctx: SimContext) -> None:
    acc = ctx.frag(op, "acc", pending_ok=True)
    flag = op.args.get("accumulate")
    accumulate = flag is None or ctx.truth(flag)
    if accumulate and acc.undefined:
        ctx.frag(op, "acc")  # reports the read of a fragment nothing has written
    acc.undefined = False
    a_src = ctx.arg(op, "a")
    b_view = ctx.view(op, "b")
    dtype = b_view.dtype
    if isinstance(a_src, Fragment):
        if a_src.pending:
            ctx.frag(op, "a")  # reports the read of an unfinished accumulator
        a_regs: np.ndarray | None = a_src.array.copy()
    else:
        assert isinstance(a_src, SmemView)
        a_regs = None
    acc.pending += 1

    def complete(g: AsyncOp) -> None:
        if a_regs is None:
            assert isinstance(a_src, SmemView)
            x = decode(ctx.smem_read(a_src, op, actor=g, proxy="async"), dtype)
        else:
            x = a_regs
        y = decode(ctx.smem_read(b_view, op, actor=g, proxy="async"), dtype)
        product = _product(x, y, dtype)
        if not accumulate:  # scale-d 0: the group overwrites what it does not read
            acc.shadow = product
            return
        base = acc.array if acc.shadow is None else acc.shadow
        acc.shadow = base + product

    g = ctx.issue("wgmma", ("wgmma",), op, complete)
    g.target = acc
    if isinstance(a_src, Fragment):
        held = a_src.base or a_src   # a column slice holds the registers of its base
        held.read_pending += 1   # its registers must hold still until the wait
        g.operand = held
    ctx.proc.wgmma.append(g)


def wgmma_wait(op: Op, ctx: SimContext) -> Blocked | None:
    r = group_wait(ctx, ctx.proc.wgmma, ctx.int(op, "n"), "wgmma groups")
    if isinstance(r, Blocked):
        return r
    for g in r:
        if g.operand is not None:
            g.operand.read_pending -= 1
        acc = g.target
        if acc is not None:
            acc.pending -= 1
            if acc.pending == 0 and acc.shadow is not None:
                acc.array = acc.shadow.astype(acc.array.dtype, copy=False)
                acc.shadow = None
    return None
