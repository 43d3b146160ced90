"""Integer evaluation of `SymExpr` for given launch sizes.

The cost model needs numbers where the IR keeps symbols: loop trip counts, grid extents and
tensor sizes are evaluated with the dims a prediction is asked for.  Runtime indices (a
loop variable, `block.x`) have no single value; where one is needed (a loop bound that
depends on an outer loop variable) the middle of the index's range stands in for it, which
is what an average over the iterations sees.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from cake_core.ir.symbolic import BinExpr, Const, Dim, SymExpr, Var, apply_op

if TYPE_CHECKING:
    import numpy as np


class MissingDimError(KeyError):
    """A dim the expression needs has no value; `name` says which."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.name = name

    def __str__(self) -> str:
        return f"no value for dim {self.name!r}"


def evaluate(expr: SymExpr, env: Mapping[str, int]) -> int:
    """The value of `expr` with dims (and optionally runtime indices) taken from `env`.

    Dims are looked up by name and must be present (MissingDimError otherwise).  A `Var`
    absent from `env` evaluates to the midpoint of its range `[lo, hi)`; one without a known
    range raises MissingDimError as well.  Division by zero raises ZeroDivisionError.
    """
    if isinstance(expr, Const):
        return expr.value
    if isinstance(expr, Dim):
        if expr.name not in env:
            raise MissingDimError(expr.name)
        return int(env[expr.name])
    if isinstance(expr, Var):
        if expr.name in env:
            return int(env[expr.name])
        if expr.lo is None or expr.hi is None:
            raise MissingDimError(expr.name)
        lo, hi = evaluate(expr.lo, env), evaluate(expr.hi, env)
        return (lo + max(lo, hi - 1)) // 2
    if isinstance(expr, BinExpr):
        a, b = evaluate(expr.left, env), evaluate(expr.right, env)
        return _apply(expr.op, a, b)
    raise TypeError(f"cannot evaluate {type(expr).__name__}")


_apply = apply_op


def evaluate_array(expr: SymExpr, env: Mapping[str, Any]) -> int | np.ndarray:
    """`evaluate` where some indices are numpy arrays (one entry per block or tile).

    Counting the distinct tiles a wave of blocks reads needs the tile coordinates of
    every block at once; evaluating them element-wise in Python would cost a few
    milliseconds per op.  Integer arrays follow Python's floor semantics for `//` and
    `%`, as `evaluate` does.
    """
    if isinstance(expr, Const):
        return expr.value
    if isinstance(expr, Dim):
        if expr.name not in env:
            raise MissingDimError(expr.name)
        return env[expr.name]
    if isinstance(expr, Var):
        if expr.name in env:
            return env[expr.name]
        if expr.lo is None or expr.hi is None:
            raise MissingDimError(expr.name)
        lo, hi = evaluate_array(expr.lo, env), evaluate_array(expr.hi, env)
        return _apply_array("//", _apply_array("+", lo, _apply_array("max", lo, hi - 1)), 2)
    if isinstance(expr, BinExpr):
        a, b = evaluate_array(expr.left, env), evaluate_array(expr.right, env)
        return _apply_array(expr.op, a, b)
    raise TypeError(f"cannot evaluate {type(expr).__name__}")


def _apply_array(op: str, a: Any, b: Any) -> Any:
    import numpy as np  # start-up: `cake check` loads this module, not numpy (~40 ms)

    if not isinstance(a, np.ndarray) and not isinstance(b, np.ndarray):
        return _apply(op, int(a), int(b))
    if op in ("//", "%", "cdiv") and np.any(np.asarray(b) == 0):
        raise ZeroDivisionError(f"{op} by zero")
    if op == "cdiv":
        return -(-a // b)
    if op == "min":
        return np.minimum(a, b)
    if op == "max":
        return np.maximum(a, b)
    return _apply(op, a, b)


def dims_needed(exprs: list[SymExpr]) -> set[str]:
    """Names of the dims the expressions depend on (what `--dims` must provide)."""
    out: set[str] = set()
    for e in exprs:
        for a in e.atoms():
            if isinstance(a, Dim):
                out.add(a.name)
    return out
