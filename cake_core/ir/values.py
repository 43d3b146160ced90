"""Small facts about IR values shared by expression evaluation and the builder forms."""

from __future__ import annotations

from dataclasses import dataclass

from cake_core.ir import symbolic as S
from cake_core.ir.kernel import Value
from cake_core.ir.types import ErrorType, IntType, ScalarType, StageType
from cake_core.syntax.source import Span


@dataclass(frozen=True, slots=True)
class ViewOrigin:
    """How a smem view was made: `base[index...]` — the verifier reads stages from it."""

    base: Value
    index: tuple[Value, ...]


@dataclass(frozen=True, slots=True)
class Predicate:
    """A runtime condition on ints (`k + 1 < ktiles`), kept symbolically for analyses."""

    op: str
    operands: tuple[object, ...]


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
