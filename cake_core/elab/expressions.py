"""Expression evaluation for the IR builder: the `Evaluator`, its names and its dispatch.

Shared by the top level (where only constants and `dim()` are legal) and kernel bodies
(where calls become ops).  The Evaluator is built up in layers, each a module of its own
concern: the builder forms (`forms`), attributes and subscripts (`views`), calls and
primitive application (`application`), operators and constant folding (`operators`).
This module holds what ties them together: name lookup and binding, literals, and the
table that sends each expression node to its handler.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable
from operator import attrgetter
from typing import Any

from cake_core.diagnostics import codes
from cake_core.diagnostics.model import Applicability, Fix, Related, TextEdit
from cake_core.elab.application import HOLDS_VALUES
from cake_core.elab.operators import OperatorEvaluation
from cake_core.elab.scope import (
    BOOL_TYPE,
    INT_TYPE,
    builtin,
    builtin_names,
    float_value,
    int_value,
    str_value,
)
from cake_core.ir import symbolic as S
from cake_core.ir.kernel import Value
from cake_core.ir.types import ErrorType, NoneType, TupleType
from cake_core.ir.values import constant_truth, error_value
from cake_core.source import Span
from cake_core.syntax import ast

_type_of = attrgetter("type")  # in C: no Python frame per element
#: Int literal -> its `Const`, shared: Consts are immutable and the same few literals
#: (0, 1, 4, 128, ...) recur in every kernel.  Bounded, as a long-lived server sees many.
_LITERALS: dict[int, S.Const] = {}


class Evaluator(OperatorEvaluation):
    """Evaluates expressions to values; inside a kernel, calls and operators emit ops."""

    # -- names --------------------------------------------------------------------------
    def lookup(self, name: str, span: Span) -> Value:
        k = self.k
        if k is not None:
            v = k.scope.get(name)
            if v is not None:
                k.note_use(v)
                return v
        v = self.pb.globals.get(name)
        if v is not None:
            return v
        b = builtin(name, span)
        if b is not None:
            return b
        pool = list(self.pb.globals) + builtin_names()
        if self.k is not None:
            pool += list(self.k.scope)
        pool += [p.name for p in self.pb.registry.functions()]
        hit = difflib.get_close_matches(name, pool, n=1, cutoff=0.6)
        fixes = [Fix(f"replace with `{hit[0]}`", (TextEdit(span, hit[0]),),
                     Applicability.UNSAFE)] if hit else []
        self.diags.append(codes.UNKNOWN_NAME.at(
            span, f"`{name}` is not defined" + (f"; did you mean `{hit[0]}`?" if hit else ""),
            fixes=fixes))
        return error_value(span)

    def bind(self, target: ast.Expr, value: Value, *, scope: dict[str, Value],
             stmt: ast.Stmt | None = None) -> None:
        if isinstance(value.type, ErrorType):
            for name in _names_in(target):
                self._set(name, error_value(target.span), scope, stmt)
            return
        if isinstance(target, ast.Name):
            v = value
            if v.name == target.id:
                pass  # e.g. an op's result, already named for its target
            elif self._unnamed.pop(id(v), None) is v:
                v.name = target.id  # `x = a + b`: the op's result is `x`, not a copy of it
            elif not isinstance(v.type, TupleType):
                v = Value(target.id, value.type, target.span, value.sym, value.const)
                if isinstance(value.sym, S.Dim) and scope is self.pb.globals:
                    v = value  # keep the dim's identity for hovers
            self._set(target.id, v, scope, stmt)
        elif isinstance(target, ast.Tuple):
            elts = value.const if isinstance(value.type, TupleType) else None
            if not isinstance(elts, tuple) or len(elts) != len(target.elts):
                n = len(elts) if isinstance(elts, tuple) else 1
                self.diags.append(codes.TYPE_MISMATCH.at(
                    target.span, f"cannot unpack {n} value{'s' if n != 1 else ''} into "
                    f"{len(target.elts)} names"))
                for name in _names_in(target):  # bound, so their uses stay quiet
                    self._set(name, error_value(target.span), scope, stmt)
                return
            for t, e in zip(target.elts, elts, strict=True):
                self.bind(t, e, scope=scope, stmt=stmt)
        else:
            self.diags.append(codes.UNSUPPORTED_SYNTAX.at(
                target.span, "assign to a name or a tuple of names"))

    def _set(self, name: str, v: Value, scope: dict[str, Value], stmt: ast.Stmt | None) -> None:
        if self.k is not None and scope is self.k.scope:
            if v.name != name:
                v = Value(name, v.type, v.span, v.sym, v.const)
            self.k.define(name, v, stmt)
        else:
            if name in scope and not isinstance(scope[name].type, ErrorType):
                self.diags.append(codes.REDEFINITION.at(
                    v.span, f"`{name}` is already defined at the top level",
                    related=[Related(scope[name].span, "defined here")]))
                return
            scope[name] = v

    # -- expressions ---------------------------------------------------------------------
    def expr(self, e: ast.Expr, targets: tuple[str, ...] = ()) -> Value:
        cls = type(e)
        if cls is ast.Name:
            # the most common node: the kernel's and the file's own names and built-ins
            # resolve here, with fewer calls; `lookup` has the whole story (and typos)
            name = e.id  # type: ignore[attr-defined]
            k = self.k
            if k is not None:
                v = k.scope.get(name)
                if v is not None:
                    k.used[id(v)] = v  # `KernelBuilder.note_use`, inlined ...
                    if isinstance(v.const, HOLDS_VALUES):
                        k.note_use(v)  # ... unless the value holds others
                    return v
            v = self.pb.globals.get(name)
            if v is None:
                v = builtin(name, e.span) or self.lookup(name, e.span)
            return v
        # a table keyed by node class instead of an isinstance chain: this runs for
        # every node of every expression
        handler = _EXPR_HANDLERS.get(cls) or _expr_handler(cls)
        return handler(self, e, targets)

    def _invalid(self, e: ast.Invalid, targets: tuple[str, ...]) -> Value:
        return error_value(e.span)  # the parser already reported it

    def _name(self, e: ast.Name, targets: tuple[str, ...]) -> Value:
        return self.lookup(e.id, e.span)

    def _tuple(self, e: ast.Tuple | ast.ListExpr, targets: tuple[str, ...]) -> Value:
        expr, values = self.expr, []
        for x in e.elts:  # a loop, not a comprehension: one call fewer (tuples abound)
            values.append(expr(x))
        elts = tuple(values)
        return Value("tuple", TupleType(tuple(map(_type_of, elts))), e.span, None, elts)

    def _ifexp(self, e: ast.IfExp, targets: tuple[str, ...]) -> Value:
        test = self.expr(e.test)
        truth = constant_truth(test)
        if truth is None:
            if not isinstance(test.type, ErrorType):
                self.diags.append(codes.NOT_CONSTANT.at(
                    e.test.span, "a conditional expression needs a compile-time condition; "
                    "use where() on fragments"))
            return error_value(e.span)
        return self.expr(e.body if truth else e.orelse)

    def _unsupported(self, e: ast.Expr, targets: tuple[str, ...]) -> Value:
        self.diags.append(codes.UNSUPPORTED_SYNTAX.at(e.span, "this expression is not supported"))
        return error_value(e.span)

    def _constant(self, e: ast.Constant, targets: tuple[str, ...] = ()) -> Value:
        c = e.value
        if type(c) is int:  # the common literal first (a bool is an int, but not this)
            sym = _LITERALS.get(c)
            if sym is None:
                sym = S.Const(c)
                if len(_LITERALS) < 4096:
                    _LITERALS[c] = sym
            return Value(str(c), INT_TYPE, e.span, sym)  # `int_value`, inlined
        if type(c) is str:
            return str_value(c, e.span)
        if isinstance(c, bool):
            return Value(str(c), BOOL_TYPE, e.span, None, c)
        if isinstance(c, int):
            return int_value(S.Const(c), e.span)
        if isinstance(c, float):
            return float_value(c, e.span)
        if isinstance(c, str):
            return str_value(c, e.span)
        return Value("None", NoneType(), e.span)


#: The handler of each expression node class.  Every handler takes the names the value
#: is assigned to; only calls use them (to name their results).
_EXPR_HANDLERS: dict[type, Callable[[Evaluator, Any, tuple[str, ...]], Value]] = {
    ast.Invalid: Evaluator._invalid,
    ast.Constant: Evaluator._constant,
    ast.Name: Evaluator._name,
    ast.Tuple: Evaluator._tuple,
    ast.ListExpr: Evaluator._tuple,
    ast.BinOp: Evaluator._binop_node,
    ast.UnaryOp: Evaluator._unary,
    ast.Compare: Evaluator._compare,
    ast.BoolOp: Evaluator._boolop,
    ast.IfExp: Evaluator._ifexp,
    ast.Attribute: Evaluator._attribute,
    ast.Subscript: Evaluator._subscript,
    ast.Call: Evaluator._call,
}


def _expr_handler(cls: type) -> Callable[[Evaluator, Any, tuple[str, ...]], Value]:
    """The handler of a node class missing from the table: that of its nearest base."""
    for base in cls.__mro__:
        handler = _EXPR_HANDLERS.get(base)
        if handler is not None:
            return handler
    return Evaluator._unsupported


def _names_in(t: ast.Expr) -> list[str]:
    if isinstance(t, ast.Name):
        return [t.id]
    if isinstance(t, ast.Tuple):
        return [n for x in t.elts for n in _names_in(x)]
    return []

