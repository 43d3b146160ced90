"""IR shapes of ops: what a promoted rule matches.

A failure signature keeps the *text* shape of the line a finding pointed at.  A rule must
not match text (formatting, comments and line breaks differ between kernels), so
promotion turns the op on that line into an **IR shape**: the primitive applied, and for
each argument written at the call, the shape of what was written there, read from the
typed IR rather than the text:

- an op written inline in the argument (`sa[s].tile(...)` inside `ldmatrix(...)`) is
  expanded recursively: `ldmatrix(src=tile(self=smem[_], shape=(N, N), coords=(_, _ + N)))`;
- a stage view `buf[i]` is `smem[<index>]`, `.T` marks a transposed view;
- an integer is compared by its folded expression: constants (named or not) are `N`,
  loop, stage and other runtime variables `_`, launch indices (`block.x`, `warp.id`)
  keep their names, so `kk + 1` is `_ + N` and `BK // 16` is `N`;
- a value defined on another line is only its kind (`fragment`, `smem`, `pipeline`,
  `tensor`, ...): what it is, not how it was made;
- dtypes and layouts keep their names (`bf16`, `swizzle(N)`).

Two ops have the same IR shape when a person would say they are "the same construct",
whatever the kernel's names and constants.  Generated rules import `op_shape` and
`find_matches` from here, so a promoted plugin and the miner agree on what matches.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from enum import Enum

from cake_core.ir.kernel import Kernel, Op, Value
from cake_core.ir.symbolic import BinExpr, Const, Dim, SymExpr, Var
from cake_core.ir.types import IntType, SmemType, TupleType
from cake_core.ir.values import ViewOrigin
from cake_core.source import Span

MAX_DEPTH = 6
_DIGITS = re.compile(r"\d+")


def within(inner: Span, outer: Span) -> bool:
    return outer.start.offset <= inner.start.offset and inner.end.offset <= outer.end.offset


def kind_of(value: Value) -> str:
    """`FragmentType` -> `fragment`: the kind of a value defined elsewhere."""
    name = type(value.type).__name__
    return name.removesuffix("Type").lower() or "value"


def sym_shape(expr: SymExpr) -> str:
    if isinstance(expr, Const):
        return "N"
    if isinstance(expr, Var):
        return expr.name if "." in expr.name else "_"
    if isinstance(expr, Dim):
        return "_"
    if isinstance(expr, BinExpr):
        parts = []
        for side in (expr.left, expr.right):
            s = sym_shape(side)
            parts.append(f"({s})" if isinstance(side, BinExpr) else s)
        return f"{parts[0]} {expr.op} {parts[1]}"
    return "_"


class _Defs:
    """Which op produced a value (by identity, or by name for `.T` views of temporaries)."""

    def __init__(self, kernel: Kernel) -> None:
        self.by_id: dict[int, Op] = {}
        self.by_name: dict[str, Op] = {}
        for op in kernel.ops():
            for r in op.results:
                self.by_id[id(r)] = op
                self.by_name.setdefault(r.name, op)

    def producer(self, value: Value) -> Op | None:
        op = self.by_id.get(id(value))
        if op is None and value.name.endswith(".T"):
            op = self.by_name.get(value.name.removesuffix(".T"))
        return op


def _value_shape(value: Value, outer: Op, defs: _Defs, depth: int) -> str:
    inline = within(value.span, outer.span)
    transposed = ".T" if isinstance(value.type, SmemType) and value.type.transposed else ""
    producer = defs.producer(value)
    if inline and producer is not None and producer is not outer and depth < MAX_DEPTH \
            and within(producer.span, outer.span):
        return _op_shape(producer, defs, depth + 1) + transposed
    const = value.const
    if isinstance(const, ViewOrigin) and inline:
        index = ", ".join(_value_shape(i, outer, defs, depth + 1) for i in const.index)
        return f"smem[{index}]{transposed}"
    if isinstance(const, tuple) and inline and all(isinstance(e, Value) for e in const):
        return "(" + ", ".join(_value_shape(e, outer, defs, depth + 1) for e in const) + ")"
    if isinstance(value.type, IntType) or value.sym is not None:
        if value.sym is None:
            return "_"
        if isinstance(value.sym, Const):
            return "N"
        return sym_shape(value.sym) if inline else "_"
    if isinstance(const, Enum):  # dtypes, fragment layouts: built-in names
        return str(const.value)
    if isinstance(const, bool) or (const is None and not isinstance(value.type, TupleType)):
        if const is None:
            return kind_of(value) + transposed
        return str(const)
    if isinstance(const, int | float):
        return "N"
    if isinstance(const, str):
        return "'_'"
    if const is not None and not isinstance(const, tuple | ViewOrigin):
        return _DIGITS.sub("N", str(const))
    return kind_of(value) + transposed


def _op_shape(op: Op, defs: _Defs, depth: int = 0) -> str:
    args = [f"{name}={_value_shape(v, op, defs, depth)}" for name, v in op.args.items()
            if name in op.arg_spans]
    return f"{op.name}({', '.join(args)})"


class ShapeIndex:
    """IR shapes of every op of one kernel, computed once."""

    def __init__(self, kernel: Kernel) -> None:
        self.kernel = kernel
        self._defs = _Defs(kernel)
        self._cache: dict[int, str] = {}

    def shape(self, op: Op) -> str:
        key = id(op)
        if key not in self._cache:
            self._cache[key] = _op_shape(op, self._defs)
        return self._cache[key]

    def roots_at_line(self, line: int) -> list[Op]:
        """The outermost ops that start on `line` (not written inside another op there)."""
        ops = [op for op in self.kernel.ops() if op.span.start.line == line]
        return [op for op in ops
                if not any(o is not op and within(op.span, o.span) and o.span != op.span
                           for o in ops)]


def op_shape(kernel: Kernel, op: Op) -> str:
    """The IR shape of one op of `kernel` (see the module docstring)."""
    return ShapeIndex(kernel).shape(op)


def find_matches(kernel: Kernel, patterns: Iterable[str]) -> Iterator[Op]:
    """Every op of `kernel` whose IR shape is one of `patterns`, in program order."""
    wanted = frozenset(patterns)
    if not wanted:
        return
    index = ShapeIndex(kernel)
    for op in kernel.ops():
        if index.shape(op) in wanted:
            yield op


def shapes_at_line(kernel: Kernel, line: int) -> list[str]:
    """IR shapes of the outermost ops on a source line (what a finding there points at)."""
    index = ShapeIndex(kernel)
    return [index.shape(op) for op in index.roots_at_line(line)]
