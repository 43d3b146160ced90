"""Small facts about IR values shared by expression evaluation and the builder forms."""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

from cake_core.ir import symbolic as S
from cake_core.ir.kernel import Value
from cake_core.ir.types import ErrorType, IntType, ScalarType, StageType, TupleType
from cake_core.source import Span


@dataclass(frozen=True, slots=True)
class ViewOrigin:
    """How a smem view was made: `base[index...]` — the verifier reads stages from it."""

    base: Value
    index: tuple[Value, ...]


@dataclass(frozen=True, slots=True)
class Predicate:
    """A runtime condition on ints (`k + 1 < ktiles`), kept symbolically for analyses.

    `op` is "not", "and" or "or" over boolean values, or "compare": a chain of
    comparisons, whose `operands` are the operators and the compared integer expressions
    (or values, for a scalar).  The accessors below give each form its type."""

    op: str
    operands: tuple[object, ...]

    @property
    def conditions(self) -> tuple[Value, ...]:
        """The boolean values a "not", "and" or "or" combines."""
        return cast("tuple[Value, ...]", self.operands)

    @property
    def chain(self) -> tuple[tuple[str, ...], tuple[S.SymExpr | Value, ...]]:
        """The operators of a "compare" and the n + 1 terms they compare."""
        return cast("tuple[tuple[str, ...], tuple[S.SymExpr | Value, ...]]", self.operands)


def elements(v: Value) -> tuple[Value, ...]:
    """The values of a tuple (kept in its `const`), or the value alone: shapes, grids and
    coordinates may be written as one int or as a tuple of them."""
    if isinstance(v.type, TupleType) and isinstance(v.const, tuple):
        return v.const
    return (v,)


def range_bounds(v: Value) -> tuple[S.SymExpr, S.SymExpr, S.SymExpr]:
    """start, stop and step of a `range(...)` value (kept in its `const`)."""
    return cast("tuple[S.SymExpr, S.SymExpr, S.SymExpr]", v.const)


def role_spec(v: Value) -> tuple[str, int, int, int | None]:
    """name, first warp, stop warp and `regs` of a `role(...)` value (kept in its
    `const`)."""
    return cast("tuple[str, int, int, int | None]", v.const)


def constant_truth(v: Value) -> bool | None:
    if isinstance(v.type, IntType) and v.sym is not None and v.sym.const is not None:
        return bool(v.sym.const)
    if isinstance(v.type, ScalarType) and isinstance(v.const, bool):
        return v.const
    return None


def error_value(span: Span) -> Value:
    return Value("<error>", ErrorType(), span)


def sym_of(v: Value) -> S.SymExpr:
    if v.sym is not None:
        return v.sym
    if isinstance(v.type, StageType):
        return S.Var(v.name, S.Const(0), S.Const(v.type.stages))
    return S.Var(v.name)
