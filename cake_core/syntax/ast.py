"""CAKE's own AST: the accepted subset of Python syntax, with exact spans.

The parser (`parser.py`) builds these from the tree-sitter tree; everything after it
(IR building, LSP features, tactics) reads these nodes, never tree-sitter nodes, so the
subset is defined in exactly one place.  Nodes are frozen: a tactic that rewrites a
kernel produces text edits, not mutated trees.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass

from cake_core.source import Span


@dataclass(frozen=True, slots=True)
class Node:
    span: Span


# --- expressions ----------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Expr(Node):
    pass


@dataclass(frozen=True, slots=True)
class Name(Expr):
    id: str


@dataclass(frozen=True, slots=True)
class Constant(Expr):
    """An int, float, str, bool or None literal."""

    value: int | float | str | bool | None


@dataclass(frozen=True, slots=True)
class Attribute(Expr):
    value: Expr
    attr: str
    attr_span: Span


@dataclass(frozen=True, slots=True)
class Slice(Expr):
    """`lower:upper:step` inside a subscript; missing parts are None."""

    lower: Expr | None
    upper: Expr | None
    step: Expr | None


@dataclass(frozen=True, slots=True)
class Subscript(Expr):
    """`value[i]` or `value[i, j:k]`; several indices arrive as one Tuple."""

    value: Expr
    index: Expr


@dataclass(frozen=True, slots=True)
class Keyword(Node):
    name: str
    name_span: Span
    value: Expr


@dataclass(frozen=True, slots=True)
class Call(Expr):
    func: Expr
    args: tuple[Expr, ...]
    keywords: tuple[Keyword, ...]


@dataclass(frozen=True, slots=True)
class BinOp(Expr):
    """Arithmetic: one of + - * / // % ** @ and the bitwise & | ^ << >>."""

    op: str
    left: Expr
    right: Expr


@dataclass(frozen=True, slots=True)
class UnaryOp(Expr):
    """`-x`, `+x`, `~x` or `not x`."""

    op: str
    operand: Expr


@dataclass(frozen=True, slots=True)
class Compare(Expr):
    """A comparison chain `a < b <= c`: ops[i] compares operands[i] and operands[i+1]."""

    ops: tuple[str, ...]
    operands: tuple[Expr, ...]


@dataclass(frozen=True, slots=True)
class BoolOp(Expr):
    """`a and b and c` / `a or b`."""

    op: str
    values: tuple[Expr, ...]


@dataclass(frozen=True, slots=True)
class IfExp(Expr):
    """`body if test else orelse`."""

    test: Expr
    body: Expr
    orelse: Expr


@dataclass(frozen=True, slots=True)
class Tuple(Expr):
    elts: tuple[Expr, ...]


@dataclass(frozen=True, slots=True)
class ListExpr(Expr):
    """`[a, b]`: accepted only where a primitive takes a list (it reads as a tuple)."""

    elts: tuple[Expr, ...]


@dataclass(frozen=True, slots=True)
class Invalid(Expr):
    """A placeholder for an expression the parser could not build and already reported.

    It stands where the text holds an unsupported construct (a lambda), malformed text or
    a subtree nested too deeply, so the enclosing statement survives for the language
    server; consumers skip it without reporting it again.
    """


# --- statements -----------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Stmt(Node):
    pass


@dataclass(frozen=True, slots=True)
class Assign(Stmt):
    """`a = v`, `a, b = v, w`, `a = b = v` (targets[i] each receive value)."""

    targets: tuple[Expr, ...]
    value: Expr
    annotation: Expr | None = None


@dataclass(frozen=True, slots=True)
class AugAssign(Stmt):
    """`a += v` and the other augmented operators (op without the `=`)."""

    target: Expr
    op: str
    value: Expr


@dataclass(frozen=True, slots=True)
class ExprStmt(Stmt):
    value: Expr


@dataclass(frozen=True, slots=True)
class Pass(Stmt):
    pass


@dataclass(frozen=True, slots=True)
class Return(Stmt):
    value: Expr | None


@dataclass(frozen=True, slots=True)
class If(Stmt):
    """`if/elif/else`: an elif arrives as an If nested alone in `orelse`."""

    test: Expr
    body: tuple[Stmt, ...]
    orelse: tuple[Stmt, ...]


@dataclass(frozen=True, slots=True)
class For(Stmt):
    target: Expr
    iter: Expr
    body: tuple[Stmt, ...]


@dataclass(frozen=True, slots=True)
class WithItem(Node):
    context: Expr
    alias: Name | None


@dataclass(frozen=True, slots=True)
class With(Stmt):
    items: tuple[WithItem, ...]
    body: tuple[Stmt, ...]


@dataclass(frozen=True, slots=True)
class Param(Node):
    name: str
    name_span: Span
    annotation: Expr | None
    default: Expr | None


@dataclass(frozen=True, slots=True)
class FunctionDef(Stmt):
    name: str
    name_span: Span
    params: tuple[Param, ...]
    decorators: tuple[Expr, ...]
    body: tuple[Stmt, ...]
    returns: Expr | None = None


@dataclass(frozen=True, slots=True)
class Module(Node):
    body: tuple[Stmt, ...]


# --- traversal ------------------------------------------------------------------------
def children(node: Node) -> list[Node]:
    """Direct child nodes in source order (for generic walks: LSP symbols, lints)."""
    out: list[Node] = []
    for name in _child_fields(type(node)):
        _collect(getattr(node, name), out)
    return sorted(out, key=lambda n: n.span.start.offset)


_CHILD_FIELDS: dict[type[Node], tuple[str, ...]] = {}


def _child_fields(cls: type[Node]) -> tuple[str, ...]:
    fields = _CHILD_FIELDS.get(cls)
    if fields is None:
        fields = tuple(f.name for f in dataclasses.fields(cls) if not f.name.endswith("span"))
        _CHILD_FIELDS[cls] = fields
    return fields


def _collect(value: object, out: list[Node]) -> None:
    if isinstance(value, Node):
        out.append(value)
    elif isinstance(value, tuple):
        for v in value:
            _collect(v, out)


def walk(node: Node) -> Iterator[Node]:
    """Every node below and including `node`, in pre-order."""
    stack = [node]
    while stack:
        n = stack.pop()
        yield n
        stack.extend(reversed(children(n)))
