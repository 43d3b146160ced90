"""Tree-sitter expressions -> CAKE AST expressions; spans and reporting for the converter.

`ExpressionConverter` holds what every part of the conversion needs (spans in the user's
text, CK001/CK002 reporting) and converts expressions; `convert.Converter` adds the
statements.  Only kinds that `subset.py` accepts become AST nodes: any other expression is
reported once (CK002) at its range and replaced by `ast.Invalid`.

Recursion is bounded: every expression level adds one to a depth that may not pass
`MAX_DEPTH`, and left-leaning chains (`a + b + c`, `x.y.z`, `f(a)(b)`) are folded in a
loop, so only real nesting counts and a 10,000-deep input cannot exhaust the stack.

Parentheses leave no node: `(a + b)` converts to the BinOp of `a + b` with the span of
`a + b`, as Python's own `ast` does, so spans always start at the expression's first token.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable

from tree_sitter import Node as TSNode

from cake_core.diagnostics.codes import SYNTAX_ERROR, UNSUPPORTED_SYNTAX
from cake_core.diagnostics.model import Diagnostic, Fix
from cake_core.source import Position, SourceFile, Span
from cake_core.syntax import ast
from cake_core.syntax.literals import LiteralError, decode_string_body, parse_float, parse_integer
from cake_core.syntax.positions import PositionIndex
from cake_core.syntax.subset import TRIVIA, Rejection, rejection

MAX_DEPTH = 100
"""The deepest statement/expression nesting converted; deeper subtrees are reported."""

MAX_REPORTED = 1000
"""Past this many findings the text is not a kernel; the rest are not even built."""

_tuple_new = tuple.__new__

SKIP = TRIVIA | {"ERROR"}
"""Children that are never converted (ERROR nodes are reported by `recovery.py`)."""

# Left-leaning chains and the field that continues each one.
_SPINE_FIELD = {
    "binary_operator": "left",
    "boolean_operator": "left",
    "attribute": "object",
    "call": "function",
    "subscript": "value",
}
_STRING_PREFIX_OK = frozenset({"", "r", "u"})
# Comparison operators outside the subset: CAKE values have no containers or identity.
_REJECTED_COMPARISONS = {
    "<>": "python2_not_equal",
    "in": "membership_test",
    "not in": "membership_test",
    "is": "identity_test",
    "is not": "identity_test",
}


class TooDeep(Exception):
    """Unwinds a statement whose nesting passed MAX_DEPTH (reported where it was found)."""


class ExpressionConverter:
    """Spans, reporting and expressions; see `convert.Converter` for the statements.

    `to_original` maps byte offsets of the parsed buffer back to the source text: the
    parser may repair the text (insert a missing `:`) before converting, and every span
    must still point into what the user wrote.
    """

    def __init__(self, source: SourceFile, data: bytes,
                 to_original: Callable[[int], int] | None = None,
                 index: PositionIndex | None = None):
        self.source = source
        self.index = index or PositionIndex(source)
        self.data = data
        """The buffer tree-sitter parsed (the source text, or a repaired copy of it)."""
        self.diagnostics: list[Diagnostic] = []
        self._map = to_original
        # Positions by offset in `data`: many nodes share a start or an end.
        self._positions: dict[int, Position] = {}
        # Fast positions: on an ASCII line the UTF-16 column equals the byte column.  (The
        # buffer differs from the source only by blanked NULs, same length, when unmapped.)
        self._slow_rows: frozenset[int] = frozenset()
        self._starts = source.line_starts
        if to_original is None and not data.isascii():
            self._slow_rows = frozenset(
                row for row, line in enumerate(data.split(b"\n")) if not line.isascii()
            )

    # -- spans and reporting -----------------------------------------------------------------
    def span_bytes(self, start: int, end: int) -> Span:
        if self._map is not None:
            start, end = self._map(start), self._map(end)
        return self.index.span(start, end)

    def span(self, node: TSNode) -> Span:
        # The hottest function of the parse (one call per AST node): keep it flat.
        cache = self._positions
        start = cache.get(node.start_byte)
        if start is None:
            start = self._position(node.start_byte)
        end = cache.get(node.end_byte)
        if end is None:
            end = self._position(node.end_byte)
        if end.offset < start.offset:  # only where a repair map folds the two together
            end = start
        return _tuple_new(Span, (start, end))

    def _position(self, offset: int) -> Position:
        """The position of byte `offset` of `data`, cached."""
        if self._map is not None:
            pos = self.index.position(self._map(offset))
        else:
            starts = self._starts
            row = bisect_right(starts, offset) - 1
            if row in self._slow_rows:
                pos = self.index.position(offset)
            else:
                col = offset - starts[row]
                pos = _tuple_new(Position, (offset, row, col, col))
        self._positions[offset] = pos
        return pos

    def _reject(self, node: TSNode, why: Rejection, span: Span | None = None,
                fixes: tuple[Fix, ...] = ()) -> None:
        if len(self.diagnostics) > MAX_REPORTED:
            return
        self.diagnostics.append(
            UNSUPPORTED_SYNTAX.at(
                span or self.span(node),
                why.message,
                notes=(why.help,) if why.help else (),
                fixes=fixes,
            )
        )

    def _error(self, span: Span, message: str, fixes: tuple[Fix, ...] = ()) -> None:
        if len(self.diagnostics) > MAX_REPORTED:
            return
        self.diagnostics.append(SYNTAX_ERROR.at(span, message, fixes=fixes))

    def _too_deep(self, node: TSNode) -> None:
        self.diagnostics.append(
            UNSUPPORTED_SYNTAX.at(
                self._first_line(node),
                f"nested too deeply (limit {MAX_DEPTH})",
                notes=("split the expression into named steps",),
            )
        )

    def _first_line(self, node: TSNode) -> Span:
        """The node's range cut at the end of its first line (for wide constructs)."""
        return self.span_bytes(node.start_byte, self._first_line_end(node))

    def _first_line_end(self, node: TSNode) -> int:
        end = node.end_byte
        newline = self.data.find(b"\n", node.start_byte, end)
        if newline == -1:
            return end
        return newline - 1 if self.data[newline - 1 : newline] == b"\r" else newline

    def _header(self, node: TSNode, start: TSNode | None = None) -> Span:
        """From the statement's start through the `:` that ends its header."""
        begin = (start or node).start_byte
        for child in node.children:
            if child.type == ":" and not child.is_missing:
                return self.span_bytes(begin, child.end_byte)
            if child.type == "block":
                break
        return self.span_bytes(begin, self._first_line_end(node))

    def _text(self, node: TSNode) -> str:
        return self.data[node.start_byte:node.end_byte].decode("utf-8", errors="replace")

    # -- module and statements -----------------------------------------------------------
    def _field_expr(self, node: TSNode, field: str, depth: int) -> ast.Expr:
        child = node.child_by_field_name(field)
        if child is None:
            return ast.Invalid(self.span(node))
        return self._expr(child, depth + 1)

    def _named(self, node: TSNode) -> list[TSNode]:
        children = node.named_children
        for c in children:
            if c.type in SKIP:
                return [c for c in children if c.type not in SKIP]
        return children

    def _expr(self, node: TSNode, depth: int) -> ast.Expr:
        if depth > MAX_DEPTH:
            self._too_deep(node)
            raise TooDeep
        kind = node.type
        if kind == "identifier":  # the most common node by far
            if node.is_missing:
                return ast.Invalid(self.span(node))
            return ast.Name(self.span(node),
                            self.data[node.start_byte:node.end_byte].decode("utf-8", "replace"))
        if kind in _SPINE_FIELD:
            if node.is_missing:
                return ast.Invalid(self.span(node))
            return self._spine(node, depth)
        if kind == "ERROR" or node.is_missing:
            return ast.Invalid(self.span(node))
        handler = _HANDLERS.get(kind)
        if handler is None:
            span = self.span(node)
            self._reject(node, rejection(kind))
            return ast.Invalid(span)
        return handler(self, node, depth)

    def _spine(self, node: TSNode, depth: int) -> ast.Expr:
        chain: list[TSNode] = [node]
        cur: TSNode | None = node.child_by_field_name(_SPINE_FIELD[node.type])
        while cur is not None:
            field = _SPINE_FIELD.get(cur.type)
            if field is None or cur.is_missing:
                break
            chain.append(cur)
            cur = cur.child_by_field_name(field)
        if cur is None:
            result: ast.Expr = ast.Invalid(self.span(chain[-1]))
        else:
            result = self._expr(cur, depth + 1)
        merge_op: str | None = None
        for link in reversed(chain):
            result, merge_op = self._fold(link, result, depth, merge_op)
        return result

    def _fold(self, node: TSNode, inner: ast.Expr, depth: int,
              merge_op: str | None) -> tuple[ast.Expr, str | None]:
        """Wrap `inner` (the converted left part) in the chain link `node`."""
        kind = node.type
        span = self.span(node)
        if kind == "call":
            return self._call(node, span, inner, depth), None
        if kind == "attribute":
            attr = node.child_by_field_name("attribute")
            if attr is None or attr.is_missing:
                return ast.Invalid(span), None
            return ast.Attribute(span, inner, self._text(attr), self.span(attr)), None
        if kind == "binary_operator":
            op_node = node.child_by_field_name("operator")
            right = self._field_expr(node, "right", depth)
            return ast.BinOp(span, op_node.type if op_node else "?", inner, right), None
        if kind == "boolean_operator":
            op_node = node.child_by_field_name("operator")
            op = op_node.type if op_node else "?"
            right = self._field_expr(node, "right", depth)
            if merge_op == op and isinstance(inner, ast.BoolOp):
                return ast.BoolOp(span, op, (*inner.values, right)), op
            return ast.BoolOp(span, op, (inner, right)), op
        return self._subscript(node, span, inner, depth), None

    def _call(self, node: TSNode, span: Span, func: ast.Expr, depth: int) -> ast.Expr:
        arguments = node.child_by_field_name("arguments")
        if arguments is None:
            return ast.Invalid(span)
        if arguments.type != "argument_list":
            self._reject(arguments, rejection(arguments.type))
            return ast.Invalid(span)
        args: list[ast.Expr] = []
        keywords: list[ast.Keyword] = []
        seen: set[str] = set()
        for arg in self._named(arguments):
            arg_kind = arg.type
            if arg_kind == "keyword_argument":
                name_node = arg.child_by_field_name("name")
                value_node = arg.child_by_field_name("value")
                if name_node is None or name_node.type != "identifier":
                    continue
                name = self._text(name_node)
                if name in seen:
                    self._error(self.span(name_node), f"keyword argument `{name}` repeated")
                seen.add(name)
                value = (
                    self._expr(value_node, depth + 1)
                    if value_node is not None
                    else ast.Invalid(self.span(arg))
                )
                keywords.append(ast.Keyword(self.span(arg), name, self.span(name_node), value))
            else:
                if keywords and arg_kind not in ("list_splat", "dictionary_splat"):
                    self._error(self.span(arg), "positional argument follows keyword argument")
                args.append(self._expr(arg, depth + 1))
        return ast.Call(span, func, tuple(args), tuple(keywords))

    def _subscript(self, node: TSNode, span: Span, value: ast.Expr, depth: int) -> ast.Expr:
        indices = node.children_by_field_name("subscript")
        trailing_comma = any(c.type == "," for c in node.children)
        elts = [self._index(i, depth + 1) for i in indices if i.type not in SKIP]
        if not elts:
            return ast.Subscript(span, value, ast.Invalid(span))
        if len(elts) == 1 and not trailing_comma:
            return ast.Subscript(span, value, elts[0])
        last = max((c for c in node.children if c.type not in ("]",)), key=lambda c: c.end_byte)
        tuple_span = self.span_bytes(indices[0].start_byte, last.end_byte)
        return ast.Subscript(span, value, ast.Tuple(tuple_span, tuple(elts)))

    def _index(self, node: TSNode, depth: int) -> ast.Expr:
        if node.type != "slice":
            return self._expr(node, depth)
        if depth > MAX_DEPTH:
            self._too_deep(node)
            raise TooDeep
        parts: list[ast.Expr | None] = [None, None, None]
        slot = 0
        for child in node.children:
            if child.type == ":":
                slot += 1
            elif child.is_named and child.type not in SKIP and slot < 3:
                parts[slot] = self._expr(child, depth + 1)
        return ast.Slice(self.span(node), parts[0], parts[1], parts[2])


# --- expression handlers (kinds that are not chains) --------------------------------------
def _name(c: ExpressionConverter, node: TSNode, depth: int) -> ast.Expr:
    return ast.Name(c.span(node), c._text(node))


def _number(c: ExpressionConverter, node: TSNode, depth: int) -> ast.Expr:
    span = c.span(node)
    text = c._text(node)
    try:
        value: int | float = parse_integer(text) if node.type == "integer" else parse_float(text)
    except LiteralError as err:
        rule = UNSUPPORTED_SYNTAX if err.unsupported else SYNTAX_ERROR
        c.diagnostics.append(rule.at(span, err.message))
        return ast.Invalid(span)
    return ast.Constant(span, value)


def _keyword_constant(c: ExpressionConverter, node: TSNode, depth: int) -> ast.Expr:
    value = {"true": True, "false": False, "none": None}[node.type]
    return ast.Constant(c.span(node), value)


def _string(c: ExpressionConverter, node: TSNode, depth: int) -> ast.Expr:
    span = c.span(node)
    value = _string_value(c, node)
    return ast.Invalid(span) if value is None else ast.Constant(span, value)


def _string_value(c: ExpressionConverter, node: TSNode) -> str | None:
    if node.has_error:
        return None
    start = end = None
    for child in node.children:
        if child.type == "string_start":
            start = child
        elif child.type == "string_end":
            end = child
    if start is None or end is None or end.is_missing:
        return None
    opener = c._text(start)
    prefix = opener.rstrip("'\"").lower()
    if prefix not in _STRING_PREFIX_OK:
        key = "fstring" if "f" in prefix else "bytes" if "b" in prefix else "string_prefix"
        c._reject(node, rejection(key))
        return None
    body = c.data[start.end_byte : end.start_byte].decode("utf-8", errors="replace")
    try:
        return decode_string_body(body, raw="r" in prefix)
    except LiteralError as err:
        c._error(c.span(node), err.message)
        return None


def _concatenated(c: ExpressionConverter, node: TSNode, depth: int) -> ast.Expr:
    span = c.span(node)
    parts = [_string_value(c, part) for part in c._named(node) if part.type == "string"]
    if not parts or any(p is None for p in parts):
        return ast.Invalid(span)
    return ast.Constant(span, "".join(p for p in parts if p is not None))


def _unary(c: ExpressionConverter, node: TSNode, depth: int) -> ast.Expr:
    op_node = node.child_by_field_name("operator")
    operand = c._field_expr(node, "argument", depth)
    return ast.UnaryOp(c.span(node), op_node.type if op_node else "?", operand)


def _not(c: ExpressionConverter, node: TSNode, depth: int) -> ast.Expr:
    return ast.UnaryOp(c.span(node), "not", c._field_expr(node, "argument", depth))


def _compare(c: ExpressionConverter, node: TSNode, depth: int) -> ast.Expr:
    ops: list[str] = []
    operands: list[ast.Expr] = []
    rejected = False
    for i, child in enumerate(node.children):
        if node.field_name_for_child(i) == "operators":
            op = child.type
            why = _REJECTED_COMPARISONS.get(op)
            if why is not None:
                c._reject(child, rejection(why))
                rejected = True
            ops.append(op)
        elif child.is_named and child.type not in SKIP:
            operands.append(c._expr(child, depth + 1))
    if rejected or len(operands) != len(ops) + 1:
        return ast.Invalid(c.span(node))
    return ast.Compare(c.span(node), tuple(ops), tuple(operands))


def _conditional(c: ExpressionConverter, node: TSNode, depth: int) -> ast.Expr:
    parts = c._named(node)
    if len(parts) != 3:
        return ast.Invalid(c.span(node))
    body, test, orelse = (c._expr(p, depth + 1) for p in parts)
    return ast.IfExp(c.span(node), test, body, orelse)


def _tuple(c: ExpressionConverter, node: TSNode, depth: int) -> ast.Expr:
    return ast.Tuple(c.span(node), tuple(c._expr(e, depth + 1) for e in c._named(node)))


def _list(c: ExpressionConverter, node: TSNode, depth: int) -> ast.Expr:
    return ast.ListExpr(c.span(node), tuple(c._expr(e, depth + 1) for e in c._named(node)))


def _unwrap(c: ExpressionConverter, node: TSNode, depth: int) -> ast.Expr:
    inner = c._named(node)
    if len(inner) != 1:
        return ast.Invalid(c.span(node))
    return c._expr(inner[0], depth + 1)


def _generic_type(c: ExpressionConverter, node: TSNode, depth: int) -> ast.Expr:
    named = c._named(node)
    if len(named) != 2 or named[1].type != "type_parameter":
        return ast.Invalid(c.span(node))
    base = c._expr(named[0], depth + 1)
    params = named[1]
    elts = [c._expr(t, depth + 1) for t in c._named(params)]
    if not elts:
        return ast.Invalid(c.span(node))
    if len(elts) == 1 and not has_token(params, ","):
        return ast.Subscript(c.span(node), base, elts[0])
    inner = [ch for ch in params.children if ch.type not in ("[", "]")]
    tuple_span = c.span_bytes(inner[0].start_byte, inner[-1].end_byte)
    return ast.Subscript(c.span(node), base, ast.Tuple(tuple_span, tuple(elts)))


def _union_type(c: ExpressionConverter, node: TSNode, depth: int) -> ast.Expr:
    parts = c._named(node)
    if len(parts) != 2:
        return ast.Invalid(c.span(node))
    left, right = (c._expr(p, depth + 1) for p in parts)
    return ast.BinOp(c.span(node), "|", left, right)


def _member_type(c: ExpressionConverter, node: TSNode, depth: int) -> ast.Expr:
    parts = c._named(node)
    if len(parts) != 2 or parts[1].type != "identifier":
        return ast.Invalid(c.span(node))
    value = c._expr(parts[0], depth + 1)
    return ast.Attribute(c.span(node), value, c._text(parts[1]), c.span(parts[1]))


_HANDLERS: dict[str, Callable[[ExpressionConverter, TSNode, int], ast.Expr]] = {
    "identifier": _name,
    "integer": _number,
    "float": _number,
    "true": _keyword_constant,
    "false": _keyword_constant,
    "none": _keyword_constant,
    "string": _string,
    "concatenated_string": _concatenated,
    "unary_operator": _unary,
    "not_operator": _not,
    "comparison_operator": _compare,
    "conditional_expression": _conditional,
    "tuple": _tuple,
    "expression_list": _tuple,
    "list": _list,
    "parenthesized_expression": _unwrap,
    "type": _unwrap,
    "generic_type": _generic_type,
    "union_type": _union_type,
    "member_type": _member_type,
}


# --- small helpers ---------------------------------------------------------------------------
def has_token(node: TSNode, token: str) -> bool:
    return any(c.type == token for c in node.children)
