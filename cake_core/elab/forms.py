"""The builder's own forms: calls that make types and constants, not ops.

`dim`, `cdiv`, `min`/`max`, `range`, `swizzle`, `padded` and `role` (and, in `tile_forms`,
`sm_count` and `tile_coords`) are evaluated at compile time by the IR builder; `kernel`
and `Tensor` are only legal as a decorator and an annotation.  They live apart from
expression evaluation so each reads as one concern.
"""

from __future__ import annotations

import difflib

from cake_core.diagnostics import codes
from cake_core.diagnostics.model import Applicability, Diagnostic, Fix, TextEdit
from cake_core.elab.scope import int_value
from cake_core.elab.state import KernelState, ProgramState
from cake_core.elab.tile_forms import TileForms
from cake_core.ir import symbolic as S
from cake_core.ir.kernel import Value
from cake_core.ir.types import (
    ErrorType,
    FragmentType,
    IntType,
    LayoutType,
    RangeType,
    RoleType,
    SmemLayout,
    StageType,
)
from cake_core.ir.values import error_value, range_bounds, sym_of
from cake_core.source import Span
from cake_core.syntax import ast

_INT_KINDS = (IntType, StageType)  # a tuple, not `IntType | StageType`: built once
_ZERO, _ONE = S.Const(0), S.Const(1)  # immutable, so shared
_RANGE, _LAYOUT = RangeType(), LayoutType()


class BuilderForms(TileForms):
    """The base of the Evaluator's layers: `_form_<name>` handles a call to `<name>`."""

    pb: ProgramState
    k: KernelState | None
    diags: list[Diagnostic]

    def expr(self, e: ast.Expr, targets: tuple[str, ...] = ()) -> Value:
        raise NotImplementedError

    def _int_args(self, e: ast.Call, lo: int, hi: int, what: str) -> list[Value] | None:
        if e.keywords or not lo <= len(e.args) <= hi:
            self.diags.append(codes.BAD_ARGUMENTS.at(e.span, f"{what}"))
            return None
        expr, vals = self.expr, []
        for a in e.args:  # a loop, not a comprehension: one call fewer
            vals.append(expr(a))
        for v in vals:
            if isinstance(v.type, ErrorType):
                return None
        for i, v in enumerate(vals):
            if not isinstance(v.type, _INT_KINDS):
                self.diags.append(codes.TYPE_MISMATCH.at(
                    e.args[i].span, f"expected an int, got {v.type.describe()}"))
                return None
        return vals

    def bounded_int(self, sym: S.SymExpr, span: Span) -> Value:
        """An int value, or a finding at `span` when `sym` is past the limits of
        `cake_core.ir.symbolic` (a constant over 64 bits, an expression too large)."""
        problem = S.limit_problem(sym)
        if problem is None:
            return int_value(sym, span)
        if sym.const is not None:
            return self._out_of_range(span, problem)
        self.diags.append(codes.EXPRESSION_TOO_COMPLEX.at(
            span, f"expression too complex: {problem}",
            notes=("compute it in fewer steps, or from fewer names",)))
        return error_value(span)

    def _out_of_range(self, span: Span, why: str) -> Value:
        self.diags.append(codes.CONSTANT_OUT_OF_RANGE.at(
            span, f"constant out of range: {why}",
            notes=(f"compile-time integers are limited to {S.MAX_CONST_BITS} bits, like "
                   "integer literals",)))
        return error_value(span)

    def _form_cdiv(self, e: ast.Call) -> Value:
        vals = self._int_args(e, 2, 2, "cdiv(a, b) takes two ints")
        if vals is None:
            return error_value(e.span)
        try:
            a, b = vals
            return self.bounded_int(S.cdiv(a.sym if a.sym is not None else sym_of(a),
                                           b.sym if b.sym is not None else sym_of(b)),
                                    e.span)
        except ZeroDivisionError:
            self.diags.append(codes.DIVISION_BY_ZERO.at(e.span, "cdiv by zero"))
            return error_value(e.span)

    def _form_min(self, e: ast.Call) -> Value:
        return self._minmax(e, S.smin, "minimum")

    def _form_max(self, e: ast.Call) -> Value:
        return self._minmax(e, S.smax, "maximum")

    def _minmax(self, e: ast.Call, fn, frag_name: str) -> Value:
        vals = [self.expr(a) for a in e.args]
        if any(isinstance(v.type, FragmentType) for v in vals):
            self.diags.append(codes.UNKNOWN_PRIMITIVE.at(
                e.func.span, f"min/max fold ints; element-wise on fragments use {frag_name}()",
                fixes=[Fix(f"use {frag_name}()", (TextEdit(e.func.span, frag_name),))]))
            return error_value(e.span)
        ints = self._int_args(e, 2, 8, "min/max take two or more ints")
        if ints is None:
            return error_value(e.span)
        acc = sym_of(ints[0])
        for v in ints[1:]:
            acc = fn(acc, sym_of(v))
        return self.bounded_int(acc, e.span)

    def _form_range(self, e: ast.Call) -> Value:
        vals = self._int_args(e, 1, 3, "range(stop), range(start, stop) or "
                                       "range(start, stop, step)")
        if vals is None:
            return error_value(e.span)
        syms = []
        for v in vals:  # `sym_of`, inlined for the common case
            syms.append(v.sym if v.sym is not None else sym_of(v))
        start, stop, step = (_ZERO, syms[0], _ONE) if len(syms) == 1 else \
            (syms[0], syms[1], syms[2] if len(syms) == 3 else _ONE)
        if (step.const is None and not step.is_launch_constant) or \
                (step.const is not None and step.const <= 0):
            # a launch-time step (`sm_count()`, a grid extent) is what a persistent tile
            # loop strides by; it is positive whenever the grid holds a block at all
            self.diags.append(codes.NOT_CONSTANT.at(
                e.span, "a range step must be a positive constant or a launch-time size "
                        "(a dim, `sm_count()`)"))
            return error_value(e.span)
        return Value("range", _RANGE, e.span, None, (start, stop, step))

    def _form_dim(self, e: ast.Call) -> Value:
        if self.k is not None:
            self.diags.append(codes.INVALID_TOPLEVEL.at(
                e.span, "declare dims at the top level: `M = dim(\"M\")`"))
            return error_value(e.span)
        if len(e.args) != 1:
            self.diags.append(codes.BAD_ARGUMENTS.at(e.span, 'dim takes a name: dim("M")'))
            return error_value(e.span)
        name = self.expr(e.args[0])
        if not isinstance(name.const, str) or not name.const.isidentifier():
            self.diags.append(codes.TYPE_MISMATCH.at(
                e.args[0].span, "a dim's name is an identifier string, e.g. dim(\"M\")"))
            return error_value(e.span)
        if name.const == S.SM_COUNT:
            self.diags.append(codes.BAD_ARGUMENTS.at(
                e.args[0].span, f"`{S.SM_COUNT}` is the device's SM count: write "
                "`sm_count()`, or give this dim another name"))
            return error_value(e.span)
        multiple, maxv = 1, None
        for kw in e.keywords:
            v = self.expr(kw.value)
            c = v.sym.const if v.sym is not None else None
            if kw.name not in ("multiple_of", "max"):
                self.diags.append(codes.BAD_ARGUMENTS.at(
                    kw.name_span, f"dim has no parameter `{kw.name}` (multiple_of=, max=)"))
                return error_value(e.span)
            if c is None or c < 1:
                self.diags.append(codes.NOT_CONSTANT.at(
                    kw.value.span, f"`{kw.name}` must be a positive constant"))
                return error_value(e.span)
            if kw.name == "multiple_of":
                multiple = c
            else:
                maxv = c
        return int_value(S.Dim(name.const, multiple, maxv), e.span, name.const)

    def _form_swizzle(self, e: ast.Call) -> Value:
        if len(e.args) != 1:
            self.diags.append(codes.BAD_ARGUMENTS.at(e.span, "swizzle takes the span in bytes: "
                                                     "swizzle(128)"))
            return error_value(e.span)
        v = self.expr(e.args[0])
        c = v.sym.const if v.sym is not None else None
        if c not in (32, 64, 128):
            hit = min((32, 64, 128), key=lambda x: abs(x - (c or 0)))
            self.diags.append(codes.BAD_ARGUMENTS.at(
                e.args[0].span, f"swizzle spans are 32, 64 or 128 bytes, not {c}",
                fixes=[Fix(f"use swizzle({hit})", (TextEdit(e.args[0].span, str(hit)),),
                           Applicability.UNSAFE)]))
            return error_value(e.span)
        order = "row"
        for kw in e.keywords:
            ov = self.expr(kw.value)
            if kw.name != "order" or ov.const not in ("row", "col"):
                self.diags.append(codes.BAD_ARGUMENTS.at(
                    kw.span, 'swizzle takes order="row" or order="col"'))
                return error_value(e.span)
            order = str(ov.const)
        return Value(f"swizzle({c})", _LAYOUT, e.span, None, SmemLayout(order, c))

    def _form_padded(self, e: ast.Call) -> Value:
        v = self.expr(e.args[0]) if len(e.args) == 1 else None
        c = v.sym.const if v is not None and v.sym is not None else None
        if c is None or c <= 0:
            self.diags.append(codes.BAD_ARGUMENTS.at(
                e.span, "padded(n) takes a positive constant number of elements per row"))
            return error_value(e.span)
        return Value(f"padded({c})", _LAYOUT, e.span, None, SmemLayout("row", 0, c))

    def _form_role(self, e: ast.Call) -> Value:
        if self.k is None:
            self.diags.append(codes.INVALID_TOPLEVEL.at(e.span, "roles are declared in kernels"))
            return error_value(e.span)
        name_v = self.expr(e.args[0]) if e.args else None
        if name_v is None or not isinstance(name_v.const, str) or len(e.args) > 1:
            self.diags.append(codes.BAD_ROLE.at(
                e.span, 'a role has a name and warps: role("load", warps=range(0, 4))'))
            return error_value(e.span)
        warps = None
        regs = None
        for kw in e.keywords:
            if kw.name == "warps":
                warps = self.expr(kw.value)
                wspan = kw.value.span
            elif kw.name == "regs":
                rv = self.expr(kw.value)
                regs = rv.sym.const if rv.sym is not None else None
                if regs is None:
                    self.diags.append(codes.NOT_CONSTANT.at(
                        kw.value.span, "`regs` must be a constant register count"))
                    return error_value(e.span)
            else:
                hit = difflib.get_close_matches(kw.name, ["warps", "regs"], 1)
                self.diags.append(codes.BAD_ARGUMENTS.at(
                    kw.name_span, f"role has no parameter `{kw.name}`"
                    + (f"; did you mean `{hit[0]}`?" if hit else ""),
                    fixes=[Fix(f"rename to `{hit[0]}`", (TextEdit(kw.name_span, hit[0]),))]
                    if hit else []))
                return error_value(e.span)
        if warps is None:
            self.diags.append(codes.BAD_ROLE.at(
                e.span, "a role needs warps=range(first, last + 1)"))
            return error_value(e.span)
        if isinstance(warps.type, ErrorType):
            return error_value(e.span)
        if not isinstance(warps.type, RangeType):
            self.diags.append(codes.BAD_ROLE.at(wspan, "warps=range(first, stop)"))
            return error_value(e.span)
        start, stop, step = range_bounds(warps)
        if start.const is None or stop.const is None or step.const != 1 or \
                start.const >= stop.const or start.const < 0:
            self.diags.append(codes.BAD_ROLE.at(
                wspan, "a role's warps are a constant, non-empty, contiguous range"))
            return error_value(e.span)
        return Value(name_v.const, RoleType(name_v.const), e.span, None,
                     (name_v.const, start.const, stop.const, regs))

    def _form_kernel(self, e: ast.Call) -> Value:
        self.diags.append(codes.BAD_KERNEL_SIGNATURE.at(
            e.span, "kernel(...) is a decorator: `@kernel(arch=..., grid=..., warps=...)`"))
        return error_value(e.span)

    def _form_Tensor(self, e: ast.Call) -> Value:
        self.diags.append(codes.BAD_KERNEL_SIGNATURE.at(
            e.span, "Tensor[...] is a parameter annotation, not a call"))
        return error_value(e.span)
