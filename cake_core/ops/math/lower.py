"""Lower facets of element-wise math, casts and row reductions.

Each op is one unrolled loop nest over the registers of its result.  f32 arithmetic uses
the `__f*_rn` intrinsics so nvcc does not contract `a - 2 * b` into an FMA: every op rounds
once, as the simulator computes it.  16-bit and fp8 math runs in f32 and rounds the result
to the fragment's dtype after each op; each op's facet carries its element expression
(`_binary`, `_unary`, `_compare`, ...), the loop nest around it is the same for all.
Row reductions scan a thread's columns in order, then combine the lanes that share the
row with `__shfl_xor_sync` (a row never spans two warps in any register layout the
lowering uses, so no shared memory is involved).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from cake_core.ir.kernel import Op
from cake_core.ir.types import DType, FragmentType, IntType, ScalarType
from cake_core.lower import layout_rules
from cake_core.lower.context import CTYPE, LowerContext, float_literal
from cake_core.lower.context import add as sum_of
from cake_core.lower.emitter import c_identifier
from cake_core.lower.fragments import check_operand, coord, frag_result, index, nest
from cake_core.lower.layout_rules import WithLayouts, with_layouts
from cake_core.lower.layouts import COL, ROW
from cake_core.lower.plan import LowerError


# --- element expressions ---------------------------------------------------------------------
@dataclass(frozen=True)
class _Operand:
    """One operand of an element expression: its C++ expression and element type."""

    expr: str
    dtype: DType | None
    """The fragment's dtype; None for a scalar (int or float literal / parameter)."""
    is_int: bool = False


def _as_f32(o: _Operand) -> str:
    if o.dtype is None:
        return f"float({o.expr})" if o.is_int else o.expr
    if o.dtype == DType.F32:
        return o.expr
    return f"cake_f32({o.expr})"


def _as_type(o: _Operand, dtype: DType) -> str:
    if o.dtype == dtype:
        return o.expr
    if dtype.is_float:
        return o.expr if dtype == DType.F32 and o.dtype is None and not o.is_int \
            else f"cake_cvt<{CTYPE[dtype]}>({_as_f32(o)})"
    if o.dtype is None:
        return o.expr if o.is_int else f"{CTYPE[dtype]}({o.expr})"
    return f"{CTYPE[dtype]}({o.expr})"


_Element = Callable[[list[_Operand], DType], str]
"""The C++ expression of one element of an op, from its operands and the result's dtype."""


def _rounded(f32: str, result: DType) -> str:
    """An f32 expression, rounded to a 16-bit or fp8 result after the op."""
    return f32 if result == DType.F32 else f"cake_cvt<{CTYPE[result]}>({f32})"


def _binary(f32: str, integer: str) -> _Element:
    """Arithmetic: `f32` on f32 operands (`{a}`, `{b}`), `integer` on integer ones."""

    def element(ops: list[_Operand], result: DType) -> str:
        a, b = ops
        if result.is_float:
            return _rounded(f32.format(a=_as_f32(a), b=_as_f32(b)), result)
        return integer.format(a=a.expr, b=b.expr)

    return element


def _unary(f32: str, integer: str | None = None) -> _Element:
    """A function of `{x}`: `f32` in f32, `integer` on integers (None: floats only, which
    the type rule enforces)."""

    def element(ops: list[_Operand], result: DType) -> str:
        (x,) = ops
        if result.is_float:
            return _rounded(f32.format(x=_as_f32(x)), result)
        if integer is None:
            raise ValueError(f"`{f32}` has no integer form")
        return integer.format(x=x.expr)

    return element


def _compare(operator: str) -> _Element:
    """A comparison, in f32 when either side is a float."""

    def element(ops: list[_Operand], result: DType) -> str:
        a, b = ops
        if any((o.dtype is not None and o.dtype.is_float) or (o.dtype is None and not o.is_int)
               for o in ops):
            return f"{_as_f32(a)} {operator} {_as_f32(b)}"
        return f"{a.expr} {operator} {b.expr}"

    return element


def _fused(ops: list[_Operand], result: DType) -> str:
    """`fma`: one rounding in f32 (the type rule admits floats only)."""
    a, b, c = (_as_f32(o) for o in ops)
    return _rounded(f"__fmaf_rn({a}, {b}, {c})", result)


def _select(ops: list[_Operand], result: DType) -> str:
    c, a, b = ops
    return f"{c.expr} ? {_as_type(a, result)} : {_as_type(b, result)}"


def _convert(ops: list[_Operand], result: DType) -> str:
    return _as_type(ops[0], result)


_ADD = _binary("__fadd_rn({a}, {b})", "{a} + {b}")
_MAX = _binary("fmaxf({a}, {b})", "max({a}, {b})")
_MIN = _binary("fminf({a}, {b})", "min({a}, {b})")


# --- element-wise ops --------------------------------------------------------------------------
def _elementwise(element: _Element) -> WithLayouts:
    """The lower facet of an element-wise op whose elements are `element(operands)`."""

    def facet(op: Op, ctx: LowerContext) -> str:
        res = op.results[0]
        if isinstance(res.type, ScalarType):
            return _scalar(op, ctx, element)
        assert isinstance(res.type, FragmentType)
        fv, decl = frag_result(ctx, op)
        n = nest(ctx, fv.dist.loops)
        operands: list[_Operand] = []
        for p in op.prim.params:
            if p.name == "dtype":
                continue
            v = op.args[p.name]
            if isinstance(v.type, FragmentType):
                ov = check_operand(ctx, op, p.name, fv.dist, fv.shape)
                operands.append(_Operand(f"{ov.cname}[{index(ov.dist, n)}]", ov.dtype))
            else:
                operands.append(_Operand(ctx.scalar(v), None, isinstance(v.type, IntType)))
        expr = element(operands, fv.dtype)
        return f"{decl}{n.header}{fv.cname}[{index(fv.dist, n)}] = {expr};"

    return WithLayouts(facet, layout_rules.elementwise)


def _scalar(op: Op, ctx: LowerContext, element: _Element) -> str:
    """Math on scalars only (`alpha * 2.0` with a scalar parameter): one C++ constant."""
    res = op.results[0]
    assert isinstance(res.type, ScalarType)
    operands = [_Operand(ctx.scalar(op.args[p.name]), None,
                        isinstance(op.args[p.name].type, IntType))
                for p in op.prim.params if p.name != "dtype"]
    bound_names = ctx.plan.bindings.names_of(op)
    name = ctx.names.internal(c_identifier(bound_names[0]) if bound_names else "scalar")
    for bound in ctx.plan.bindings.names_of(op) or (res.name,):
        ctx.scalars[bound] = name
    expr = element(operands, res.type.dtype)
    return f"const {CTYPE[res.type.dtype]} {name} = {expr};"


add = _elementwise(_ADD)
sub = _elementwise(_binary("__fsub_rn({a}, {b})", "{a} - {b}"))
mul = _elementwise(_binary("__fmul_rn({a}, {b})", "{a} * {b}"))
div = _elementwise(_binary("__fdiv_rn({a}, {b})", "{a} / {b}"))
maximum = _elementwise(_MAX)
minimum = _elementwise(_MIN)
lt = _elementwise(_compare("<"))
le = _elementwise(_compare("<="))
gt = _elementwise(_compare(">"))
ge = _elementwise(_compare(">="))
eq = _elementwise(_compare("=="))
ne = _elementwise(_compare("!="))
neg = _elementwise(_unary("-{x}", "-{x}"))
abs = _elementwise(_unary("fabsf({x})", "abs({x})"))
exp = _elementwise(_unary("exp2f(__fmul_rn({x}, 1.44269504088896341f))"))
exp2 = _elementwise(_unary("exp2f({x})"))
log = _elementwise(_unary("logf({x})"))
log2 = _elementwise(_unary("log2f({x})"))
sqrt = _elementwise(_unary("sqrtf({x})"))
rsqrt = _elementwise(_unary("rsqrtf({x})"))
fma = _elementwise(_fused)
where = _elementwise(_select)
cast = _elementwise(_convert)


@with_layouts(layout_rules.unsqueeze)
def unsqueeze(op: Op, ctx: LowerContext) -> str:
    fv, decl = frag_result(ctx, op)
    x = ctx.frag(op, "x")
    n = nest(ctx, fv.dist.loops)
    return f"{decl}{n.header}{fv.cname}[{index(fv.dist, n)}] = {x.cname}[{index(x.dist, n)}];"


@with_layouts(layout_rules.column_slice)
def cols(op: Op, ctx: LowerContext) -> str:
    """Register `4 * j + 2 * i + c` of column chunk `j` of the slice is register
    `4 * (j + start / 8) + 2 * i + c` of the operand, in every 64-row slab: a copy nvcc
    folds into the operand's registers once the nest is unrolled."""
    fv, decl = frag_result(ctx, op)
    x = ctx.frag(op, "x")
    if fv.dist.parent.kind != "wgmma_acc" or x.dist.parent.kind != "wgmma_acc":
        raise LowerError(op.span, "a column slice is lowered for wgmma accumulator and A-operand "
                         "layouts only")
    start = op.args["start"].sym.const if op.args["start"].sym is not None else None
    if start is None:
        raise LowerError(op.span, "a column slice needs a constant start")
    n = nest(ctx, fv.dist.loops)
    src = sum_of(index(x.dist, n), str(start // 2)) if start else index(x.dist, n)
    return f"{decl}{n.header}{fv.cname}[{index(fv.dist, n)}] = {x.cname}[{src}];"


# --- element coordinates ----------------------------------------------------------------------
def _coordinate(axis: int) -> WithLayouts:
    """`col_index` / `row_index`: each register gets its element's logical coordinate,
    the same expression the layout uses to place it (a constant plus the lane's offset)."""

    def facet(op: Op, ctx: LowerContext) -> str:
        fv, decl = frag_result(ctx, op)
        if fv.dist.opaque or fv.dist.axes != (ROW, COL):
            raise LowerError(op.span, f"`{op.prim.name}` is lowered for fragments whose rows "
                             "and columns are those of an accumulator or of the generic layout")
        n = nest(ctx, fv.dist.parent.loops)
        return (f"{decl}{n.header}{fv.cname}[{index(fv.dist, n)}] = "
                f"{ctx.linear(coord(fv.dist, axis, n))};")

    return WithLayouts(facet, layout_rules.elementwise)


col_index = _coordinate(COL)
row_index = _coordinate(ROW)


# --- row reductions ----------------------------------------------------------------------------
def _reduce_input(op: Op, ctx: LowerContext):
    x = ctx.frag(op, "x")
    if x.dist.opaque or x.dist.axes != (ROW, COL):
        raise LowerError(op.arg_spans.get("x", op.span),
                         "row reductions are lowered for fragments whose rows and columns "
                         "are those of an accumulator or of the generic layout")
    return x


def _identity(kind: str, ctype: str) -> str:
    if kind == "sum":
        if ctype in ("float", "int", "uint32_t"):
            return f"{ctype}(0)"
        return f"cake_cvt<{ctype}>(0.0f)"
    big = "INFINITY" if kind == "min" else "-INFINITY"
    if ctype == "float":
        return big
    if ctype == "int":
        return "0x7fffffff" if kind == "min" else "(-0x7fffffff - 1)"
    return f"cake_cvt<{ctype}>({big})"


def _row_reduce(kind: str) -> WithLayouts:
    combine = {"max": _MAX, "min": _MIN, "sum": _ADD}[kind]

    def facet(op: Op, ctx: LowerContext) -> str:
        x = _reduce_input(op, ctx)
        out, decl = frag_result(ctx, op)
        p = x.dist.parent
        rows = nest(ctx, p.axis_loops(ROW))
        cols = nest(ctx, p.axis_loops(COL))
        full = nest(ctx, p.loops)
        ctype = CTYPE[x.dtype]
        acc = ctx.names.internal("red")
        elem = f"{x.cname}[{index(x.dist, full)}]"
        if not p.col_valid:
            elem = f"({ctx.sym(coord(x.dist, COL, full))} < {p.shape[1]} ? {elem} : " \
                   f"{_identity(kind, ctype)})"
        step = combine([_Operand(acc, x.dtype), _Operand(elem, x.dtype)], x.dtype)
        shuffles = " ".join(
            f"{acc} = " + combine([_Operand(acc, x.dtype),
                                   _Operand(f"cake_shfl_xor({acc}, {m})", x.dtype)],
                                  x.dtype) + ";"
            for m in p.row_lanes)
        return (f"{decl}{rows.header}{{ {ctype} {acc} = {_identity(kind, ctype)}; "
                f"{cols.header}{acc} = {step}; {shuffles} "
                f"{out.cname}[{index(out.dist, rows)}] = {acc}; }}")

    return WithLayouts(facet, layout_rules.row_reduction)


row_max = _row_reduce("max")
row_min = _row_reduce("min")
row_sum = _row_reduce("sum")


def _row_arg(kind: str) -> WithLayouts:
    cmp = "<" if kind == "min" else ">"

    def facet(op: Op, ctx: LowerContext) -> str:
        x = _reduce_input(op, ctx)
        vals, decl_v = frag_result(ctx, op, 0)
        idxs, decl_i = frag_result(ctx, op, 1)
        p = x.dist.parent
        rows = nest(ctx, p.axis_loops(ROW))
        cols = nest(ctx, p.axis_loops(COL))
        full = nest(ctx, p.loops)
        ctype = CTYPE[x.dtype]
        bv, bi, e = (ctx.names.internal(b) for b in ("best", "best_col", "e"))
        first = {lp.var: 0 for lp in p.axis_loops(COL)}
        col = ctx.linear(coord(x.dist, COL, full))
        guard = f"{col} < {p.shape[1]} && " if not p.col_valid else ""
        scan = (f"{cols.header}{{ const {ctype} {e} = {x.cname}[{index(x.dist, full)}]; "
                f"if ({guard}cake_f32({e}) {cmp} cake_f32({bv})) "
                f"{{ {bv} = {e}; {bi} = {col}; }} }}")
        shuffles = " ".join(f"cake_arg{kind}_xor({bv}, {bi}, {m});" for m in p.row_lanes)
        init_v = f"{x.cname}[{index(x.dist, full, first)}]"
        init_i = ctx.linear(coord(x.dist, COL, full, first))
        if not p.col_valid:  # the thread's first column may lie past the fragment
            init_v, init_i = _identity(kind, ctype), "0x7fffffff"
        # the scan starts from the thread's first column; strict comparison keeps the
        # smallest column among equal values, as the shuffles do across lanes
        return (f"{decl_v}{decl_i}{rows.header}{{ {ctype} {bv} = {init_v}; int {bi} = {init_i}; "
                f"{scan} {shuffles} {vals.cname}[{index(vals.dist, rows)}] = {bv}; "
                f"{idxs.cname}[{index(idxs.dist, rows)}] = {bi}; }}")

    return WithLayouts(facet, layout_rules.row_reduction)


row_argmin = _row_arg("min")
row_argmax = _row_arg("max")

__all__ = [
    "abs",
    "add",
    "cast",
    "col_index",
    "cols",
    "div",
    "eq",
    "exp",
    "exp2",
    "float_literal",
    "ge",
    "gt",
    "le",
    "log",
    "log2",
    "lt",
    "maximum",
    "minimum",
    "mul",
    "ne",
    "neg",
    "row_argmax",
    "row_argmin",
    "row_index",
    "row_max",
    "row_min",
    "row_sum",
    "rsqrt",
    "sqrt",
    "sub",
    "unsqueeze",
    "where",
]
