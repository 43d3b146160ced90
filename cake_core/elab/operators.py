"""Operators: constant folding first, operator primitives for what is left.

`+`, `<`, `not`, `and` on compile-time ints, stages and floats fold to constants (with the
findings a fold can make: division by zero, `/` on ints); comparisons and boolean operators
on runtime ints become a `Predicate`, which guards and loop bounds read; on fragments an
operator becomes its primitive through `apply`.  The folding rules are the part of
elaboration that is plain arithmetic, so they live apart from names, views and calls.
"""

from __future__ import annotations

import math

from cake_core.diagnostics import codes
from cake_core.diagnostics.model import Applicability, Fix, TextEdit
from cake_core.elab.application import CallEvaluation
from cake_core.elab.scope import BOOL_TYPE, float_value
from cake_core.ir import symbolic as S
from cake_core.ir.kernel import Value
from cake_core.ir.types import (
    ErrorType,
    FragmentType,
    IntType,
    ScalarType,
    StageType,
)
from cake_core.ir.values import Predicate, constant_truth, error_value, sym_of
from cake_core.source import Span
from cake_core.syntax import ast

#: Operator spelling -> primitive, used by the builder for `a + b` and friends.
OPERATORS = {"+": "add", "-": "sub", "*": "mul", "/": "div", "<": "lt", "<=": "le",
             ">": "gt", ">=": "ge", "==": "eq", "!=": "ne"}

_INT_OPS = {"+": S.add, "-": S.sub, "*": S.mul, "//": S.floordiv, "%": S.mod}


class OperatorEvaluation(CallEvaluation):
    """The Evaluator's operators, over its calls (an operator on fragments is a primitive)."""

    def _binop_node(self, e: ast.BinOp, targets: tuple[str, ...]) -> Value:
        # `a + b + c + ...` is a left-leaning chain as deep as it is long (the parser
        # allows long flat chains): walk down its left side in a loop, then fold upwards,
        # so that its length never meets Python's recursion limit.
        chain = [e]
        left = e.left
        while type(left) is ast.BinOp:
            chain.append(left)
            left = left.left
        acc = self.expr(left)
        for node in reversed(chain):
            acc = self._binop_values(node.op, acc, node.left, node.right, node.span)
        return acc

    def binop(self, op: str, left: ast.Expr, right: ast.Expr, span: Span) -> Value:
        return self._binop_values(op, self.expr(left), left, right, span)

    def _binop_values(self, op: str, a: Value, left: ast.Expr, right: ast.Expr,
                      span: Span) -> Value:
        """`a op right`, where `a` is the value of `left` (already evaluated)."""
        b = self.expr(right)
        if isinstance(a.type, ErrorType) or isinstance(b.type, ErrorType):
            return error_value(span)
        ints = isinstance(a.type, IntType | StageType) and isinstance(b.type, IntType | StageType)
        if ints:
            sa, sb = sym_of(a), sym_of(b)
            if op in _INT_OPS:
                try:
                    return self.bounded_int(_INT_OPS[op](sa, sb), span)
                except ZeroDivisionError:
                    self.diags.append(codes.DIVISION_BY_ZERO.at(span, "division by zero"))
                    return error_value(span)
            if op == "**" and sa.const is not None and sb.const is not None and sb.const >= 0:
                x, y = sa.const, sb.const
                if abs(x) >= 2 and y * (abs(x).bit_length() - 1) > S.MAX_CONST_BITS:
                    # refused before it is computed: 10**10**10 would take hours
                    return self._out_of_range(
                        span, f"`{x} ** {y}` needs more than {S.MAX_CONST_BITS} bits")
                return self.bounded_int(S.Const(x ** y), span)
            if op == "/":
                fix = self._op_fix(left, right, "/", "//")
                self.diags.append(codes.TYPE_MISMATCH.at(
                    span, "`/` on ints: integer division is `//`", fixes=fix))
                return error_value(span)
            if op in ("<<", ">>", "&", "|", "^") and sa.const is not None and sb.const is not None:
                x, y = sa.const, sb.const
                if op in ("<<", ">>") and y < 0:
                    return self._out_of_range(span, f"negative shift count {y}")
                if op == "<<" and x != 0 and y > S.MAX_CONST_BITS:
                    return self._out_of_range(
                        span, f"`{x} << {y}` needs more than {S.MAX_CONST_BITS} bits")
                if op == ">>":
                    val = x >> y
                else:
                    val = {"<<": x << y if op == "<<" else 0, "&": x & y, "|": x | y,
                           "^": x ^ y}[op]
                return self.bounded_int(S.Const(val), span)
        if _is_number(a) and _is_number(b):
            folded = _fold_float(op, _pyval(a), _pyval(b))
            if folded is not None:
                return float_value(folded, span)
        prim_name = OPERATORS.get(op)
        if prim_name is None or self.k is None:
            self.diags.append(codes.TYPE_MISMATCH.at(
                span, f"`{op}` is not defined for {a.type.describe()} and {b.type.describe()}"))
            return error_value(span)
        return self.apply(prim_name, [(a, left.span), (b, right.span)], {}, span)

    def _fragment_columns(self, e: ast.Subscript, base: Value,
                          raw: tuple[ast.Expr, ...]) -> Value:
        """`x[:, a:b]`: the columns a..b of a 2-D fragment, as the `cols` primitive.

        Only the column axis is sliced, with constant bounds and no step: a slice of a
        wgmma fragment on k16 boundaries renames registers, anything else would move
        elements between threads, which no register layout does for free.
        """
        rows = raw[0] if len(raw) == 2 else None
        cols = raw[1] if len(raw) == 2 else None
        if not (isinstance(rows, ast.Slice) and rows.lower is None and rows.upper is None
                and rows.step is None) or not isinstance(cols, ast.Slice):
            self.diags.append(codes.BAD_INDEX.at(
                e.index.span, "a fragment is sliced along its columns only, keeping every "
                "row: `x[:, start:stop]`"))
            return error_value(e.span)
        if cols.step is not None:
            self.diags.append(codes.BAD_INDEX.at(
                cols.step.span, "a column slice has no step: `x[:, start:stop]`"))
            return error_value(e.span)
        t = base.type
        assert isinstance(t, FragmentType)
        width = t.shape[1] if len(t.shape) == 2 else None
        bounds: list[tuple[Value, Span]] = []
        for bound, default in ((cols.lower, S.Const(0)), (cols.upper, width)):
            if bound is None:
                if default is None:
                    self.diags.append(codes.SHAPE_MISMATCH.at(
                        e.value.span, f"a column slice takes a 2-D fragment, not "
                        f"{t.describe()}"))
                    return error_value(e.span)
                bounds.append((self.bounded_int(default, cols.span), cols.span))
                continue
            v = self.expr(bound)
            if isinstance(v.type, ErrorType):
                return error_value(e.span)
            bounds.append((v, bound.span))
        return self.apply("cols", [(base, e.value.span), *bounds], {}, e.span)

    def _op_fix(self, left: ast.Expr, right: ast.Expr, old: str, new: str) -> list[Fix]:
        src = self.pb.source
        between = src.data[left.span.end.offset:right.span.start.offset]
        i = between.find(old.encode())
        if i < 0:
            return []
        start = left.span.end.offset + i
        return [Fix(f"use `{new}`", (TextEdit(src.span(start, start + len(old)), new),),
                    Applicability.UNSAFE)]

    def _unary(self, e: ast.UnaryOp, targets: tuple[str, ...] = ()) -> Value:
        v = self.expr(e.operand)
        if isinstance(v.type, ErrorType):
            return error_value(e.span)
        if e.op == "not":
            t = constant_truth(v)
            if t is not None:
                return Value(str(not t), BOOL_TYPE, e.span, None, not t)
            return Value("not", BOOL_TYPE, e.span, None, Predicate("not", (v,)))
        if isinstance(v.type, IntType) and v.sym is not None:
            if e.op == "-":
                return self.bounded_int(S.sub(S.Const(0), v.sym), e.span)
            if e.op == "+":
                return v
            if e.op == "~" and v.sym.const is not None:
                return self.bounded_int(S.Const(~v.sym.const), e.span)
        if isinstance(v.type, ScalarType) and isinstance(v.const, float) and e.op in "+-":
            return float_value(-v.const if e.op == "-" else v.const, e.span)
        if isinstance(v.type, FragmentType) and e.op == "-" and self.k is not None:
            return self.apply("neg", [(v, e.operand.span)], {}, e.span)
        self.diags.append(codes.TYPE_MISMATCH.at(
            e.span, f"`{e.op}` is not defined for {v.type.describe()}"))
        return error_value(e.span)

    def _compare(self, e: ast.Compare, targets: tuple[str, ...] = ()) -> Value:
        vals = [self.expr(x) for x in e.operands]
        if any(isinstance(v.type, ErrorType) for v in vals):
            return error_value(e.span)
        if any(isinstance(v.type, FragmentType) for v in vals):
            if len(e.ops) != 1:
                self.diags.append(codes.TYPE_MISMATCH.at(
                    e.span, "chained comparisons are not defined on fragments"))
                return error_value(e.span)
            return self.apply(OPERATORS[e.ops[0]], [(vals[0], e.operands[0].span),
                                                    (vals[1], e.operands[1].span)], {},
                              e.span)
        results: list[bool | None] = []
        for op, a, b in zip(e.ops, vals, vals[1:], strict=False):
            results.append(_compare_const(op, a, b))
        if all(r is not None for r in results):
            val = all(results)
            return Value(str(val), BOOL_TYPE, e.span, None, val)
        for v, x in zip(vals, e.operands, strict=True):
            if not isinstance(v.type, IntType | StageType | ScalarType):
                self.diags.append(codes.TYPE_MISMATCH.at(
                    x.span, f"cannot compare {v.type.describe()}"))
                return error_value(e.span)
        return Value("cond", BOOL_TYPE, e.span, None,
                     Predicate("compare", (e.ops, tuple(_sym_or(v) for v in vals))))

    def _boolop(self, e: ast.BoolOp, targets: tuple[str, ...] = ()) -> Value:
        vals = [self.expr(x) for x in e.values]
        if any(isinstance(v.type, ErrorType) for v in vals):
            return error_value(e.span)
        truths = [constant_truth(v) for v in vals]
        if all(t is not None for t in truths):
            val = all(truths) if e.op == "and" else any(truths)
            return Value(str(val), BOOL_TYPE, e.span, None, val)
        return Value(e.op, BOOL_TYPE, e.span, None, Predicate(e.op, tuple(vals)))


def _sym_or(v: Value) -> object:
    """A compared term as an expression where it is an int: an op's int result
    (`n = load_scalar(...)`) becomes the variable its arithmetic uses (`cdiv(n, BN)` holds
    `Var("n")`), so every pass evaluates `x < n` as it evaluates `cdiv(n, BN)`."""
    if v.sym is not None:
        return v.sym
    return sym_of(v) if isinstance(v.type, IntType) else v


def _is_number(v: Value) -> bool:
    return isinstance(v.type, IntType | ScalarType)


def _pyval(v: Value) -> float | int | None:
    if isinstance(v.type, IntType) and v.sym is not None:
        return v.sym.const
    if isinstance(v.type, ScalarType) and isinstance(v.const, int | float) and \
            not isinstance(v.const, bool):
        return v.const
    return None


def _fold_float(op: str, a: float | int | None, b: float | int | None) -> float | None:
    if a is None or b is None:
        return None
    try:
        if op == "+":
            return float(a + b)
        if op == "-":
            return float(a - b)
        if op == "*":
            return float(a * b)
        if op == "/":
            return float(a / b)
        if op == "**":
            return float(a ** b)
    except (ZeroDivisionError, OverflowError):
        return math.nan
    return None


def _compare_const(op: str, a: Value, b: Value) -> bool | None:
    x, y = _pyval(a), _pyval(b)
    if x is None or y is None:
        return None
    return {"<": x < y, "<=": x <= y, ">": x > y, ">=": x >= y, "==": x == y,
            "!=": x != y}.get(op)
