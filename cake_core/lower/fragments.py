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
from cake_core.ir.types import DType
from cake_core.lower.context import CTYPE, FragVar, LowerContext, add, mul
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
    fv, decl = ctx.define(op, index_)
    if fv.dist.opaque and op.prim.name not in ("ldmatrix", "fragment"):
        raise LowerError(op.span, "mma.sync operand fragments can only be fed to mma_sync")
    return fv, decl


# --- element expressions ---------------------------------------------------------------------
_F32_BINARY = {"add": "__fadd_rn({a}, {b})", "sub": "__fsub_rn({a}, {b})",
               "mul": "__fmul_rn({a}, {b})", "div": "__fdiv_rn({a}, {b})",
               "maximum": "fmaxf({a}, {b})", "minimum": "fminf({a}, {b})"}
_INT_BINARY = {"add": "{a} + {b}", "sub": "{a} - {b}", "mul": "{a} * {b}", "div": "{a} / {b}",
               "maximum": "max({a}, {b})", "minimum": "min({a}, {b})"}
_COMPARE = {"lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==", "ne": "!="}
_F32_UNARY = {"neg": "-{x}", "abs": "fabsf({x})",
              "exp": "exp2f(__fmul_rn({x}, 1.44269504088896341f))", "exp2": "exp2f({x})",
              "log": "logf({x})", "log2": "log2f({x})", "sqrt": "sqrtf({x})",
              "rsqrt": "rsqrtf({x})"}


@dataclass(frozen=True)
class Operand:
    expr: str
    dtype: DType | None
    """The fragment's dtype; None for a scalar (int or float literal / parameter)."""
    is_int: bool = False


def as_f32(o: Operand) -> str:
    if o.dtype is None:
        return f"float({o.expr})" if o.is_int else o.expr
    if o.dtype == DType.F32:
        return o.expr
    return f"cake_f32({o.expr})"


def as_type(o: Operand, dtype: DType) -> str:
    if o.dtype == dtype:
        return o.expr
    if dtype.is_float:
        return o.expr if dtype == DType.F32 and o.dtype is None and not o.is_int \
            else f"cake_cvt<{CTYPE[dtype]}>({as_f32(o)})"
    if o.dtype is None:
        return o.expr if o.is_int else f"{CTYPE[dtype]}({o.expr})"
    return f"{CTYPE[dtype]}({o.expr})"


def element(name: str, ops: list[Operand], result: DType) -> str:
    """The C++ expression of one element of `name(ops...)` with a `result` element type."""
    if name in _COMPARE:
        a, b = ops
        floats = any((o.dtype is not None and o.dtype.is_float) or
                     (o.dtype is None and not o.is_int) for o in ops)
        if floats:
            return f"{as_f32(a)} {_COMPARE[name]} {as_f32(b)}"
        return f"{a.expr} {_COMPARE[name]} {b.expr}"
    if name == "where":
        c, a, b = ops
        return f"{c.expr} ? {as_type(a, result)} : {as_type(b, result)}"
    if name == "cast":
        return as_type(ops[0], result)
    if result.is_float:
        if len(ops) == 2:
            e = _F32_BINARY[name].format(a=as_f32(ops[0]), b=as_f32(ops[1]))
        else:
            e = _F32_UNARY[name].format(x=as_f32(ops[0]))
        return e if result == DType.F32 else f"cake_cvt<{CTYPE[result]}>({e})"
    if len(ops) == 2:
        return _INT_BINARY[name].format(a=ops[0].expr, b=ops[1].expr)
    x = ops[0].expr
    if name == "neg":
        return f"-{x}"
    if name == "abs":
        return f"abs({x})"
    raise ValueError(f"`{name}` has no integer form")


__all__ = ["COL", "ROW", "Nest", "Operand", "check_operand", "coord", "element", "frag_result",
           "index", "nest"]
