"""Lower facets of element-wise math, casts and row reductions.

Each op is one unrolled loop nest over the registers of its result.  f32 arithmetic uses
the `__f*_rn` intrinsics so nvcc does not contract `a - 2 * b` into an FMA: every op rounds
once, as the simulator computes it.  16-bit and fp8 math runs in f32 and rounds the result
to the fragment's dtype after each op.  Row reductions scan a thread's columns in order,
then combine the lanes that share the row with `__shfl_xor_sync` (a row never spans two
warps in any register layout the lowering uses, so no shared memory is involved).
"""

from __future__ import annotations

from cake_core.ir.kernel import Op
from cake_core.ir.types import FragmentType, IntType, ScalarType
from cake_core.lower.context import CTYPE, LowerContext, float_literal
from cake_core.lower.emitter import c_identifier
from cake_core.lower.fragments import (
    Operand,
    check_operand,
    coord,
    element,
    frag_result,
    index,
    nest,
)
from cake_core.lower.layouts import COL, ROW
from cake_core.lower.plan import LowerError


def _elementwise(op: Op, ctx: LowerContext) -> str:
    res = op.results[0]
    if isinstance(res.type, ScalarType):
        return _scalar(op, ctx)
    assert isinstance(res.type, FragmentType)
    fv, decl = frag_result(ctx, op)
    n = nest(ctx, fv.dist.loops)
    operands: list[Operand] = []
    for p in op.prim.params:
        if p.name == "dtype":
            continue
        v = op.args[p.name]
        if isinstance(v.type, FragmentType):
            ov = check_operand(ctx, op, p.name, fv.dist, fv.shape)
            operands.append(Operand(f"{ov.cname}[{index(ov.dist, n)}]", ov.dtype))
        else:
            operands.append(Operand(ctx.scalar(v), None, isinstance(v.type, IntType)))
    expr = element(op.prim.name, operands, fv.dtype)
    return f"{decl}{n.header}{fv.cname}[{index(fv.dist, n)}] = {expr};"


def _scalar(op: Op, ctx: LowerContext) -> str:
    """Math on scalars only (`alpha * 2.0` with a scalar parameter): one C++ constant."""
    res = op.results[0]
    assert isinstance(res.type, ScalarType)
    operands = [Operand(ctx.scalar(op.args[p.name]), None,
                        isinstance(op.args[p.name].type, IntType))
                for p in op.prim.params if p.name != "dtype"]
    bound_names = ctx.plan.bindings.names_of(op)
    name = ctx.names.internal(c_identifier(bound_names[0]) if bound_names else "scalar")
    for bound in ctx.plan.bindings.names_of(op) or (res.name,):
        ctx.scalars[bound] = name
    expr = element(op.prim.name, operands, res.type.dtype)
    return f"const {CTYPE[res.type.dtype]} {name} = {expr};"


add = sub = mul = div = maximum = minimum = _elementwise
lt = le = gt = ge = eq = ne = _elementwise
neg = abs = exp = exp2 = log = log2 = sqrt = rsqrt = _elementwise
where = cast = _elementwise


def unsqueeze(op: Op, ctx: LowerContext) -> str:
    fv, decl = frag_result(ctx, op)
    x = ctx.frag(op, "x")
    n = nest(ctx, fv.dist.loops)
    return f"{decl}{n.header}{fv.cname}[{index(fv.dist, n)}] = {x.cname}[{index(x.dist, n)}];"


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


def _row_reduce(kind: str):
    combine = {"max": "maximum", "min": "minimum", "sum": "add"}[kind]

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
        step = element(combine, [Operand(acc, x.dtype), Operand(elem, x.dtype)], x.dtype)
        shuffles = " ".join(
            f"{acc} = " + element(combine, [Operand(acc, x.dtype),
                                            Operand(f"cake_shfl_xor({acc}, {m})", x.dtype)],
                                  x.dtype) + ";"
            for m in p.row_lanes)
        return (f"{decl}{rows.header}{{ {ctype} {acc} = {_identity(kind, ctype)}; "
                f"{cols.header}{acc} = {step}; {shuffles} "
                f"{out.cname}[{index(out.dist, rows)}] = {acc}; }}")

    return facet


row_max = _row_reduce("max")
row_min = _row_reduce("min")
row_sum = _row_reduce("sum")


def _row_arg(kind: str):
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

    return facet


row_argmin = _row_arg("min")
row_argmax = _row_arg("max")

__all__ = [
    "abs",
    "add",
    "cast",
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
    "row_max",
    "row_min",
    "row_sum",
    "rsqrt",
    "sqrt",
    "sub",
    "unsqueeze",
    "where",
]
