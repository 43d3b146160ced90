"""Element-wise math, casts and row reductions on register fragments.

Operands are whole arrays (a fragment's logical shape) or scalars, combined with numpy
broadcasting; every result is rounded to the dtype its IR type names, so bf16 math
rounds after each op as the hardware's bf16 instructions do.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from cake_core.ir.kernel import Op
from cake_core.ir.types import DType, FragmentType, ScalarType
from cake_core.sim.context import SimContext
from cake_core.sim.dtypes import round_to
from cake_core.sim.state import Fragment

Operand = np.ndarray | float | int | bool


def _result(op: Op, value: Operand, index: int = 0) -> Fragment | float | int | bool:
    t = op.results[index].type
    if isinstance(t, FragmentType):
        return Fragment(np.asarray(round_to(np.asarray(value), t.dtype)), t.dtype)
    if isinstance(t, ScalarType):
        r = round_to(np.asarray(value), t.dtype)
        return bool(r) if t.dtype == DType.BOOL else r.item()
    return value  # type: ignore[return-value]


def _as_float(x: Operand) -> np.ndarray | float:
    return np.asarray(x, dtype=np.float32) if isinstance(x, np.ndarray) else float(x)


def _binary(fn: Callable[[Operand, Operand], Operand]
            ) -> Callable[[Op, SimContext], Fragment | float | int | bool]:
    def facet(op: Op, ctx: SimContext) -> Fragment | float | int | bool:
        with np.errstate(all="ignore"):
            return _result(op, fn(ctx.operand(op, "a"), ctx.operand(op, "b")))

    return facet


def _unary(fn: Callable[[np.ndarray | float], Operand]
           ) -> Callable[[Op, SimContext], Fragment | float | int | bool]:
    def facet(op: Op, ctx: SimContext) -> Fragment | float | int | bool:
        x = ctx.operand(op, "x")
        with np.errstate(all="ignore"):
            return _result(op, fn(x if fn in (np.negative, np.abs) else _as_float(x)))

    return facet


add = _binary(np.add)
sub = _binary(np.subtract)
mul = _binary(np.multiply)
div = _binary(lambda a, b: np.true_divide(a, b))
maximum = _binary(np.maximum)
minimum = _binary(np.minimum)
lt = _binary(np.less)
le = _binary(np.less_equal)
gt = _binary(np.greater)
ge = _binary(np.greater_equal)
eq = _binary(np.equal)
ne = _binary(np.not_equal)

neg = _unary(np.negative)
abs = _unary(np.abs)
exp = _unary(np.exp)
exp2 = _unary(np.exp2)
log = _unary(np.log)
log2 = _unary(np.log2)
sqrt = _unary(np.sqrt)
rsqrt = _unary(lambda x: 1.0 / np.sqrt(x))


def fma(op: Op, ctx: SimContext) -> Fragment | float | int | bool:
    """`a * b` is exact in f64 (two 24-bit significands); the sum is rounded in f64 and then
    to the result's dtype, which is a single rounding except in rare double-rounding ties."""
    a, b, c = (np.asarray(ctx.operand(op, n), dtype=np.float64) for n in ("a", "b", "c"))
    with np.errstate(all="ignore"):
        return _result(op, a * b + c)


def where(op: Op, ctx: SimContext) -> Fragment | float | int | bool:
    c = ctx.operand(op, "cond")
    return _result(op, np.where(np.asarray(c, dtype=bool), ctx.operand(op, "a"),
                                ctx.operand(op, "b")))


def cast(op: Op, ctx: SimContext) -> Fragment | float | int | bool:
    with np.errstate(all="ignore"):
        return _result(op, ctx.operand(op, "x"))


def unsqueeze(op: Op, ctx: SimContext) -> Fragment:
    f = ctx.frag(op, "x")
    return Fragment(np.expand_dims(f.array, ctx.int(op, "dim")), f.dtype)


def cols(op: Op, ctx: SimContext) -> Fragment:
    """A copy of the columns, which remembers the fragment whose registers it names: a
    wgmma reading the slice holds that fragment's registers (a re-binding of its name
    before the wait is the dynamic CK506)."""
    f = ctx.frag(op, "x")
    return Fragment(f.array[:, ctx.int(op, "start"):ctx.int(op, "stop")].copy(), f.dtype,
                    base=f.base or f)


def _rows(ctx: SimContext, op: Op) -> np.ndarray:
    return np.asarray(ctx.operand(op, "x"))


def row_max(op: Op, ctx: SimContext) -> Fragment | float | int | bool:
    return _result(op, _rows(ctx, op).max(axis=1))


def row_min(op: Op, ctx: SimContext) -> Fragment | float | int | bool:
    return _result(op, _rows(ctx, op).min(axis=1))


def row_sum(op: Op, ctx: SimContext) -> Fragment | float | int | bool:
    x = _rows(ctx, op)
    return _result(op, x.sum(axis=1, dtype=x.dtype))


def row_argmin(op: Op, ctx: SimContext) -> tuple[Fragment | float | int | bool, ...]:
    x = _rows(ctx, op)
    return _result(op, x.min(axis=1), 0), _result(op, x.argmin(axis=1).astype(np.int32), 1)


def row_argmax(op: Op, ctx: SimContext) -> tuple[Fragment | float | int | bool, ...]:
    x = _rows(ctx, op)
    return _result(op, x.max(axis=1), 0), _result(op, x.argmax(axis=1).astype(np.int32), 1)



def _coordinate(axis: int) -> Callable[[Op, SimContext], Fragment]:
    """`col_index` / `row_index`: element (r, c) holds (r, c)[axis]."""

    def facet(op: Op, ctx: SimContext) -> Fragment:
        shape = ctx.frag(op, "x").array.shape
        return Fragment(np.indices(shape, dtype=np.int32)[axis], DType.I32)

    return facet


col_index = _coordinate(1)
row_index = _coordinate(0)
