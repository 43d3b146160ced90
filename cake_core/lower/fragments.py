"""Code shapes shared by the fragment facets: register loop nests, indices, coordinates.

A fragment op lowers to one unrolled loop nest over the registers of its result,
`CAKE_FOR(j, 16) CAKE_FOR(i, 2) CAKE_FOR(c, 2) out[j * 4 + i * 2 + c] = ...;`, where each
operand is indexed with the loops of the axes it has.  nvcc unrolls the nest and every
array access becomes a register.
"""

from __future__ import annotations

from dataclasses import dataclass

from cake_core.ir.kernel import Op
from cake_core.ir.symbolic import Const, SymExpr
from cake_core.ir.symbolic import add as sadd
from cake_core.ir.symbolic import mul as smul
from cake_core.lower.context import FragVar, LowerContext, add, mul
from cake_core.lower.layouts import COL, ROW, Dist, Loop, cvar
from cake_core.lower.plan import LowerError


@dataclass(frozen=True)
class Nest:
    """A loop nest over some parent loops: the `CAKE_FOR` prefix and the variable names."""

    loops: tuple[Loop, ...]
    names: dict[str, str]

    @property
    def header(self) -> str:
        return "".join(f"CAKE_FOR({self.names[lp.var]}, {lp.extent}) "
                       for lp in self.loops if lp.extent > 1)


def nest(ctx: LowerContext, loops: tuple[Loop, ...]) -> Nest:
    return Nest(loops, {lp.var: ctx.loop_var(lp.var) for lp in loops})


def index(dist: Dist, n: Nest, fixed: dict[str, int] | None = None) -> str:
    """Register index of the element the nest's variables (or `fixed` values) select."""
    loops = dist.parent.loops if dist.opaque else dist.loops
    terms: list[str] = []
    const = 0
    stride = 1
    for lp in reversed(loops):
        if lp.extent > 1:
            if fixed is not None and lp.var in fixed:
                const += fixed[lp.var] * stride
            else:
                terms.append(mul(n.names[lp.var], stride))
        stride *= lp.extent
    terms.reverse()
    if const:
        terms.append(str(const))
    return add(*terms)


def coord(dist: Dist, axis: int, n: Nest, fixed: dict[str, int] | None = None) -> SymExpr:
    """The logical coordinate along parent `axis` of the element the nest selects."""
    p = dist.parent
    e: SymExpr = p.row_base if axis == ROW else p.col_base
    for lp in p.axis_loops(axis):
        if lp.extent <= 1:
            continue
        if fixed is not None and lp.var in fixed:
            e = sadd(e, Const(fixed[lp.var] * lp.step))
        else:
            e = sadd(e, smul(cvar(n.names[lp.var]), Const(lp.step)))
    return e


def check_operand(ctx: LowerContext, op: Op, arg: str, result: Dist,
                  result_shape: tuple[int, ...]) -> FragVar:
    """The operand's variable, verified to broadcast into `result`'s layout."""
    fv = ctx.frag(op, arg)
    off = len(result_shape) - len(fv.shape)
    axes: list[int | None] = []
    for i, n in enumerate(fv.shape):
        big = result_shape[off + i]
        axes.append(result.axes[off + i] if n == big else None)
    want = result.project(tuple(axes))
    if fv.dist.opaque or not fv.dist.compatible(want):
        raise LowerError(op.arg_spans.get(arg, op.span),
                         f"`{op.args[arg].name}` is held in a {fv.dist.parent.kind} register "
                         f"layout that does not line up with the {result.parent.kind} layout "
                         f"of the result; the lowering cannot move elements between threads")
    return fv


def frag_result(ctx: LowerContext, op: Op, index_: int = 0) -> tuple[FragVar, str]:
    """The result of an op that computes its elements one by one (math, a load).

    Such an op cannot produce an mma.sync operand layout, whose registers pack elements
    opaquely: only an allocation or an `ldmatrix` does, and those call `ctx.define`.
    """
    fv, decl = ctx.define(op, index_)
    if fv.dist.opaque:
        raise LowerError(op.span, "mma.sync operand fragments can only be fed to mma_sync")
    return fv, decl


__all__ = ["COL", "ROW", "Nest", "check_operand", "coord", "frag_result", "index", "nest"]
