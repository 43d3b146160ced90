"""Tree-sitter tree -> CAKE AST, enforcing the subset allowlist of `subset.py`.

Only kinds the allowlist names become AST nodes; every other construct is reported once
(CK002) at its range and replaced by `ast.Invalid` (an expression) or dropped (a
statement), so the rest of the file still converts.  ERROR and MISSING nodes are skipped
here: `recovery.py` reports them.

Recursion is bounded: every statement and expression level adds one to a depth that may
not pass `MAX_DEPTH`, and left-leaning chains (`a + b + c`, `x.y.z`, `f(a)(b)`) are folded
in a loop, so only real nesting counts and a 10,000-deep input cannot exhaust the stack.

Parentheses leave no node: `(a + b)` converts to the BinOp of `a + b` with the span of
`a + b`, as Python's own `ast` does, so spans always start at the expression's first token.
"""

from __future__ import annotations

from collections.abc import Callable

from tree_sitter import Node as TSNode

from cake_core.diagnostics.codes import SYNTAX_ERROR, UNSUPPORTED_SYNTAX
from cake_core.diagnostics.model import Applicability, Diagnostic, Fix, TextEdit
from cake_core.syntax import ast
from cake_core.syntax.literals import LiteralError, decode_string_body, parse_float, parse_integer
from cake_core.syntax.source import Position, SourceFile, Span
from cake_core.syntax.subset import TRIVIA, Rejection, rejection

MAX_DEPTH = 100
"""The deepest statement/expression nesting converted; deeper subtrees are reported."""

_SKIP = TRIVIA | {"ERROR"}
_SIMPLE = frozenset({"expression_statement", "return_statement"})
_COMPOUND_KEYWORDS = {
    "for_statement": "for",
    "if_statement": "if",
    "elif_clause": "elif",
    "else_clause": "else",
    "with_statement": "with",
    "function_definition": "def",
}
# Left-leaning chains and the field that continues each one.
_SPINE_FIELD = {
    "binary_operator": "left",
    "boolean_operator": "left",
    "attribute": "object",
    "call": "function",
    "subscript": "value",
}
_PARAMETER_KINDS = {"list_splat_pattern": "star_parameter"}
_STRING_PREFIX_OK = frozenset({"", "r", "u"})


class _TooDeep(Exception):
    """Unwinds a statement whose nesting passed MAX_DEPTH (reported where it was found)."""


class Converter:
    """Builds the AST of one parse; collects its CK002 and structural CK001 diagnostics.

    `to_original` maps byte offsets of the parsed buffer back to the source text: the
    parser may repair the text (insert a missing `:`) before converting, and every span
    must still point into what the user wrote.
    """

    def __init__(self, source: SourceFile, data: bytes,
                 to_original: Callable[[int], int] | None = None):
        self.source = source
        self.data = data
        """The buffer tree-sitter parsed (the source text, or a repaired copy of it)."""
        self.diagnostics: list[Diagnostic] = []
        self._map = to_original
        # Fast spans: tree-sitter already knows each node's line and byte column, and on
        # an ASCII line the UTF-16 column equals the byte column.
        self._fast = to_original is None
        self._slow_rows: frozenset[int] = frozenset()
        self._positions: dict[int, Position] = {}
        if self._fast and not data.isascii():
            self._slow_rows = frozenset(
                row for row, line in enumerate(data.split(b"\n")) if not line.isascii()
            )

    # -- spans and reporting -----------------------------------------------------------------
    def span_bytes(self, start: int, end: int) -> Span:
        if self._map is not None:
            start, end = self._map(start), self._map(end)
        return self.source.span(start, end)

    def span(self, node: TSNode) -> Span:
        if self._fast:
            start_row, start_col = node.start_point
            end_row, end_col = node.end_point
            slow = self._slow_rows
            if not slow or (start_row not in slow and end_row not in slow):
                cache = self._positions
                start_byte = node.start_byte
                end_byte = node.end_byte
                start = cache.get(start_byte)
                if start is None:
                    start = cache[start_byte] = Position(start_byte, start_row, start_col,
                                                         start_col)
                end = cache.get(end_byte)
                if end is None:
                    end = cache[end_byte] = Position(end_byte, end_row, end_col, end_col)
                return Span(start, end)
        return self.span_bytes(node.start_byte, node.end_byte)

    def _reject(self, node: TSNode, why: Rejection, span: Span | None = None,
                fixes: tuple[Fix, ...] = ()) -> None:
        self.diagnostics.append(
            UNSUPPORTED_SYNTAX.at(
                span or self.span(node),
                why.message,
                notes=(why.help,) if why.help else (),
                fixes=fixes,
            )
        )

    def _error(self, span: Span, message: str, fixes: tuple[Fix, ...] = ()) -> None:
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

    @staticmethod
    def _text(node: TSNode) -> str:
        return (node.text or b"").decode("utf-8", errors="replace")

    # -- module and statements -----------------------------------------------------------
    def module(self, root: TSNode) -> ast.Module:
        body = self._statements(root, 0, top_level=True)
        return ast.Module(self.source.whole, body)

    def _statements(self, parent: TSNode, depth: int, top_level: bool) -> tuple[ast.Stmt, ...]:
        out: list[ast.Stmt] = []
        indent: bytes | None = b"" if parent.type == "module" else None
        for child in parent.children:
            kind = child.type
            if kind in _SKIP or child.is_missing or not child.is_named:
                continue
            indent = self._check_indent(child, indent)
            try:
                stmt = self._statement(child, depth + 1, top_level)
            except _TooDeep:
                stmt = None
            if stmt is not None:
                out.append(stmt)
        return tuple(out)

    def _check_indent(self, node: TSNode, expected: bytes | None) -> bytes:
        """Statements of one block start at one indentation (tree-sitter lets it vary)."""
        data = self._line_prefix(node)
        if data is None:  # not first on its line (`a = 1; b = 2`)
            return expected if expected is not None else b""
        if expected is not None and data != expected:
            more = data.startswith(expected) and len(data) > len(expected)
            self._error(
                self._first_line(node),
                "unexpected indent" if more else "indentation does not match the block",
            )
            return expected
        return data

    def _line_prefix(self, node: TSNode) -> bytes | None:
        col = node.start_point[1]
        if col == 0:
            return b""
        prefix = self.data[node.start_byte - col : node.start_byte]
        return prefix if not prefix.strip(b" \t\f") else None

    def _statement(self, node: TSNode, depth: int, top_level: bool) -> ast.Stmt | None:
        if depth > MAX_DEPTH:
            self._too_deep(node)
            return None
        kind = node.type
        span = self.span(node)
        if kind in _SIMPLE and node.start_point[0] != node.end_point[0] and not node.has_error:
            self._check_line_breaks(node)
        if kind == "expression_statement":
            return self._expression_statement(node, span, depth)
        if kind == "pass_statement":
            return ast.Pass(span)
        if kind == "return_statement":
            values = self._named(node)
            value = self._expr(values[0], depth + 1) if values else None
            return ast.Return(span, value)
        if kind == "if_statement":
            return self._if(node, depth)
        if kind == "for_statement":
            return self._for(node, span, depth)
        if kind == "with_statement":
            return self._with(node, span, depth)
        if kind in ("function_definition", "decorated_definition"):
            return self._definition(node, span, depth, top_level)
        self._reject_statement(node)
        return None

    def _reject_statement(self, node: TSNode) -> None:
        why = rejection(node.type)
        if why.header_only:
            self._reject(node, why, self._header(node))
            return
        fixes: tuple[Fix, ...] = ()
        if node.type in ("import_statement", "import_from_statement", "future_import_statement"):
            fixes = self._delete_line_fix(node, "remove the import")
        self._reject(node, why, fixes=fixes)

    def _delete_line_fix(self, node: TSNode, title: str) -> tuple[Fix, ...]:
        """Delete the statement's lines, when nothing else shares them."""
        span = self.span(node)
        src = self.source
        first, last = span.start.line, span.end.line
        if src.line_text(first)[: span.start.col_utf16].strip():
            return ()
        tail = src.line_text(last)
        rest = _utf16_slice(tail, span.end.col_utf16).strip()
        if rest and not rest.startswith("#"):
            return ()
        start = src.offset_of(first, 0)
        end = src.offset_of(last + 1, 0) if last + 1 < src.line_count else len(src.data)
        edit = TextEdit(src.span(start, end), "")
        return (Fix(title, (edit,), Applicability.SAFE),)

    def _expression_statement(self, node: TSNode, span: Span, depth: int) -> ast.Stmt | None:
        items = self._named(node)
        if not items:
            return None
        first = items[0]
        if first.type == "assignment" and len(items) == 1:
            return self._assignment(first, span, depth)
        if first.type == "augmented_assignment" and len(items) == 1:
            return self._augmented(first, span, depth)
        if len(items) == 1:
            return ast.ExprStmt(span, self._expr(first, depth + 1))
        elts = tuple(self._expr(item, depth + 1) for item in items)
        return ast.ExprStmt(span, ast.Tuple(span, elts))

    def _assignment(self, node: TSNode, span: Span, depth: int) -> ast.Stmt | None:
        annotation_node = node.child_by_field_name("type")
        right = node.child_by_field_name("right")
        if right is None:
            if annotation_node is not None:
                self._reject(node, rejection("bare_annotation"))
            return None
        targets = [node.child_by_field_name("left")]
        while right is not None and right.type == "assignment":
            if right.child_by_field_name("type") is not None or annotation_node is not None:
                self._error(self.span(right), "an annotated assignment cannot be chained")
                return None
            targets.append(right.child_by_field_name("left"))
            right = right.child_by_field_name("right")
        value = self._expr(right, depth + 1) if right is not None else ast.Invalid(span)
        converted = tuple(self._target(t, node, depth + 1) for t in targets)
        annotation = (
            self._expr(annotation_node, depth + 1) if annotation_node is not None else None
        )
        return ast.Assign(span, converted, value, annotation)

    def _check_line_breaks(self, node: TSNode) -> None:
        """A simple statement ends at the first line break outside brackets.

        tree-sitter reads `x = a.` followed by `y = 1` as `x = a.y = 1`; Python, and so
        CAKE, sees an incomplete line there.
        """
        depth = 0
        prev: TSNode | None = None
        escaped = False
        stack = [node]
        while stack:
            leaf = stack.pop()
            kind = leaf.type
            if leaf.child_count and kind not in ("string", "concatenated_string"):
                stack.extend(reversed(leaf.children))
                continue
            if kind == "comment":
                continue
            if kind == "line_continuation":
                escaped = True
                continue
            if prev is not None and depth == 0 and not escaped and \
                    leaf.start_point[0] > prev.end_point[0]:
                token = self._text(prev)
                if prev.is_named:
                    message = f"unexpected line break after `{token}`: the statement goes on " \
                        "in the next line; wrap it in parentheses"
                elif token == ".":
                    message = "expected an attribute name after `.` on the same line"
                else:
                    message = f"expected an expression after `{token}` on the same line"
                self._error(self.span(prev), message)
                return
            escaped = False
            if kind in ("(", "[", "{"):
                depth += 1
            elif kind in (")", "]", "}"):
                depth -= 1
            prev = leaf

    def _augmented(self, node: TSNode, span: Span, depth: int) -> ast.Stmt:
        op_node = node.child_by_field_name("operator")
        op = op_node.type[:-1] if op_node is not None else "?"
        left = node.child_by_field_name("left")
        right = node.child_by_field_name("right")
        target = self._target(left, node, depth + 1, allow_tuple=False)
        value = self._expr(right, depth + 1) if right is not None else ast.Invalid(span)
        return ast.AugAssign(span, target, op, value)

    def _target(self, node: TSNode | None, owner: TSNode, depth: int,
                allow_tuple: bool = True, names_only: bool = False) -> ast.Expr:
        if node is None or node.is_missing:
            return ast.Invalid(self.span(owner))
        if depth > MAX_DEPTH:
            self._too_deep(node)
            raise _TooDeep
        kind = node.type
        span = self.span(node)
        if kind == "identifier":
            return ast.Name(span, self._text(node))
        if kind in ("pattern_list", "tuple_pattern", "tuple", "expression_list") and allow_tuple:
            elts = tuple(
                self._target(c, owner, depth + 1, names_only=names_only)
                for c in self._named(node)
            )
            return ast.Tuple(span, elts)
        if kind in ("list_splat_pattern", "list_splat"):
            self._reject(node, rejection("list_splat_pattern"))
            return ast.Invalid(span)
        if kind == "parenthesized_expression":
            inner = self._named(node)
            if len(inner) == 1:
                return self._target(inner[0], owner, depth + 1, allow_tuple, names_only)
        if names_only:
            self._reject(
                node,
                Rejection("this loop target",
                          "loop over a name or a tuple of names: `for i in ...`"),
            )
            return ast.Invalid(span)
        if kind in ("attribute", "subscript"):
            return self._expr(node, depth)
        if kind in ("list_pattern", "list"):
            self._reject(node, Rejection("a list target", "unpack into a tuple: `a, b = ...`"))
            return ast.Invalid(span)
        self._error(span, f"cannot assign to {_describe(kind)}")
        return ast.Invalid(span)

    def _block(self, owner: TSNode, block: TSNode | None, depth: int,
               keyword: str) -> tuple[ast.Stmt, ...]:
        if block is None:
            return ()
        body = self._statements(block, depth, top_level=False)
        if not body and not owner.has_error and not any(
            c.is_named and c.type not in TRIVIA for c in block.children
        ):
            colon = next((c for c in owner.children if c.type == ":"), None)
            where = colon.end_byte if colon is not None else block.start_byte
            at = self.span_bytes(where, where)
            self._error(
                at,
                f"expected an indented block after `{keyword}`",
                fixes=(Fix("insert `pass`", (TextEdit(at, " pass"),), Applicability.SAFE),),
            )
        return body

    def _if(self, node: TSNode, depth: int) -> ast.If:
        test = self._field_expr(node, "condition", depth)
        body = self._block(node, node.child_by_field_name("consequence"), depth, "if")
        alternatives = node.children_by_field_name("alternative")
        orelse: tuple[ast.Stmt, ...] = ()
        end = node.end_byte
        for alt in reversed(alternatives):
            if alt.type == "else_clause":
                orelse = self._block(alt, alt.child_by_field_name("body"), depth, "else")
            elif alt.type == "elif_clause":
                alt_test = self._field_expr(alt, "condition", depth)
                alt_body = self._block(alt, alt.child_by_field_name("consequence"), depth, "elif")
                orelse = (ast.If(self.span_bytes(alt.start_byte, end), alt_test, alt_body, orelse),)
        return ast.If(self.span(node), test, body, orelse)

    def _for(self, node: TSNode, span: Span, depth: int) -> ast.For | None:
        if _has_token(node, "async"):
            self._reject(node, rejection("async_for"), self._header(node))
            return None
        target = self._target(node.child_by_field_name("left"), node, depth + 1, names_only=True)
        iterable = self._field_expr(node, "right", depth)
        body = self._block(node, node.child_by_field_name("body"), depth, "for")
        alternative = node.child_by_field_name("alternative")
        if alternative is not None:
            self._reject(alternative, rejection("for_else"), self._header(alternative))
        return ast.For(span, target, iterable, body)

    def _with(self, node: TSNode, span: Span, depth: int) -> ast.With | None:
        if _has_token(node, "async"):
            self._reject(node, rejection("async_with"), self._header(node))
            return None
        items: list[ast.WithItem] = []
        clause = next((c for c in node.children if c.type == "with_clause"), None)
        for item in self._named(clause) if clause is not None else []:
            if item.type == "with_item":
                items.append(self._with_item(item, depth + 1))
        body = self._block(node, node.child_by_field_name("body"), depth, "with")
        return ast.With(span, tuple(items), body)

    def _with_item(self, item: TSNode, depth: int) -> ast.WithItem:
        value = item.child_by_field_name("value")
        span = self.span(item)
        if value is None:
            return ast.WithItem(span, ast.Invalid(span), None)
        if value.type != "as_pattern":
            return ast.WithItem(span, self._expr(value, depth + 1), None)
        inner = self._named(value)
        context = self._expr(inner[0], depth + 1) if inner else ast.Invalid(span)
        alias_node = value.child_by_field_name("alias")
        alias: ast.Name | None = None
        if alias_node is not None:
            names = self._named(alias_node)
            if len(names) == 1 and names[0].type == "identifier":
                alias = ast.Name(self.span(names[0]), self._text(names[0]))
            else:
                self._reject(
                    alias_node,
                    Rejection("this `as` target", "bind the context to a single name"),
                )
        return ast.WithItem(span, context, alias)

    def _definition(self, node: TSNode, span: Span, depth: int,
                    top_level: bool) -> ast.FunctionDef | None:
        decorators: list[TSNode] = []
        definition = node
        if node.type == "decorated_definition":
            decorators = [c for c in node.children if c.type == "decorator"]
            found = node.child_by_field_name("definition")
            if found is None:
                return None
            definition = found
            if definition.type == "class_definition":
                self._reject(node, rejection("decorated_class"), self._header(definition, node))
                return None
            if definition.type != "function_definition":
                self._reject_statement(definition)
                return None
        if not top_level:
            self._reject(node, rejection("nested_function"), self._header(definition, node))
            return None
        if _has_token(definition, "async"):
            self._reject(node, rejection("async_function"), self._header(definition, node))
            return None
        name_node = definition.child_by_field_name("name")
        if name_node is None:
            return None
        type_params = definition.child_by_field_name("type_parameters")
        if type_params is not None:
            self._reject(type_params, rejection("type_parameter_list"))
        params = self._parameters(definition.child_by_field_name("parameters"), depth + 1)
        returns_node = definition.child_by_field_name("return_type")
        returns = self._expr(returns_node, depth + 1) if returns_node is not None else None
        decorator_exprs = []
        for deco in decorators:
            inner = self._named(deco)
            if inner:
                decorator_exprs.append(self._expr(inner[0], depth + 1))
        body = self._block(definition, definition.child_by_field_name("body"), depth, "def")
        return ast.FunctionDef(
            span,
            self._text(name_node),
            self.span(name_node),
            params,
            tuple(decorator_exprs),
            body,
            returns,
        )

    def _parameters(self, node: TSNode | None, depth: int) -> tuple[ast.Param, ...]:
        if node is None:
            return ()
        out: list[ast.Param] = []
        for param in self._named(node):
            kind = param.type
            name_node: TSNode | None
            if kind == "identifier":
                name_node = param
            elif kind in ("default_parameter", "typed_default_parameter"):
                name_node = param.child_by_field_name("name")
            elif kind == "typed_parameter":
                name_node = next((c for c in param.children if c.is_named), None)
                if name_node is not None and name_node.type != "identifier":
                    self._reject(param, rejection(_PARAMETER_KINDS.get(name_node.type,
                                                                        name_node.type)))
                    continue
            else:
                self._reject(param, rejection(_PARAMETER_KINDS.get(kind, kind)))
                continue
            if name_node is None or name_node.type != "identifier":
                if name_node is not None:
                    self._reject(name_node, rejection(name_node.type))
                continue
            type_node = param.child_by_field_name("type")
            value_node = param.child_by_field_name("value")
            out.append(
                ast.Param(
                    self.span(param),
                    self._text(name_node),
                    self.span(name_node),
                    self._expr(type_node, depth + 1) if type_node is not None else None,
                    self._expr(value_node, depth + 1) if value_node is not None else None,
                )
            )
        return tuple(out)

    # -- expressions ---------------------------------------------------------------------
    def _field_expr(self, node: TSNode, field: str, depth: int) -> ast.Expr:
        child = node.child_by_field_name(field)
        if child is None:
            return ast.Invalid(self.span(node))
        return self._expr(child, depth + 1)

    def _named(self, node: TSNode) -> list[TSNode]:
        return [c for c in node.named_children if c.type not in _SKIP]

    def _expr(self, node: TSNode, depth: int) -> ast.Expr:
        if depth > MAX_DEPTH:
            self._too_deep(node)
            raise _TooDeep
        kind = node.type
        if node.is_missing or kind == "ERROR":
            return ast.Invalid(self.span(node))
        if kind == "identifier":  # the most common node by far
            return ast.Name(self.span(node), (node.text or b"").decode("utf-8", "replace"))
        if kind in _SPINE_FIELD:
            return self._spine(node, depth)
        handler = _HANDLERS.get(kind)
        if handler is None:
            span = self.span(node)
            self._reject(node, rejection(kind))
            return ast.Invalid(span)
        return handler(self, node, depth)

    def _spine(self, node: TSNode, depth: int) -> ast.Expr:
        chain: list[TSNode] = []
        cur: TSNode | None = node
        while cur is not None and cur.type in _SPINE_FIELD and not cur.is_missing:
            chain.append(cur)
            cur = cur.child_by_field_name(_SPINE_FIELD[cur.type])
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
        if kind == "attribute":
            attr = node.child_by_field_name("attribute")
            if attr is None or attr.is_missing:
                return ast.Invalid(span), None
            return ast.Attribute(span, inner, self._text(attr), self.span(attr)), None
        if kind == "call":
            return self._call(node, span, inner, depth), None
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
            if arg.type == "keyword_argument":
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
                if keywords and arg.type not in ("list_splat", "dictionary_splat"):
                    self._error(self.span(arg), "positional argument follows keyword argument")
                args.append(self._expr(arg, depth + 1))
        return ast.Call(span, func, tuple(args), tuple(keywords))

    def _subscript(self, node: TSNode, span: Span, value: ast.Expr, depth: int) -> ast.Expr:
        indices = node.children_by_field_name("subscript")
        trailing_comma = any(c.type == "," for c in node.children)
        elts = [self._index(i, depth + 1) for i in indices if i.type not in _SKIP]
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
            raise _TooDeep
        parts: list[ast.Expr | None] = [None, None, None]
        slot = 0
        for child in node.children:
            if child.type == ":":
                slot += 1
            elif child.is_named and child.type not in _SKIP and slot < 3:
                parts[slot] = self._expr(child, depth + 1)
        return ast.Slice(self.span(node), parts[0], parts[1], parts[2])


# --- expression handlers (kinds that are not chains) --------------------------------------
def _name(c: Converter, node: TSNode, depth: int) -> ast.Expr:
    return ast.Name(c.span(node), c._text(node))


def _number(c: Converter, node: TSNode, depth: int) -> ast.Expr:
    span = c.span(node)
    text = c._text(node)
    try:
        value: int | float = parse_integer(text) if node.type == "integer" else parse_float(text)
    except LiteralError as err:
        rule = UNSUPPORTED_SYNTAX if err.unsupported else SYNTAX_ERROR
        c.diagnostics.append(rule.at(span, err.message))
        return ast.Invalid(span)
    return ast.Constant(span, value)


def _keyword_constant(c: Converter, node: TSNode, depth: int) -> ast.Expr:
    value = {"true": True, "false": False, "none": None}[node.type]
    return ast.Constant(c.span(node), value)


def _string(c: Converter, node: TSNode, depth: int) -> ast.Expr:
    span = c.span(node)
    value = _string_value(c, node)
    return ast.Invalid(span) if value is None else ast.Constant(span, value)


def _string_value(c: Converter, node: TSNode) -> str | None:
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


def _concatenated(c: Converter, node: TSNode, depth: int) -> ast.Expr:
    span = c.span(node)
    parts = [_string_value(c, part) for part in c._named(node) if part.type == "string"]
    if not parts or any(p is None for p in parts):
        return ast.Invalid(span)
    return ast.Constant(span, "".join(p for p in parts if p is not None))


def _unary(c: Converter, node: TSNode, depth: int) -> ast.Expr:
    op_node = node.child_by_field_name("operator")
    operand = c._field_expr(node, "argument", depth)
    return ast.UnaryOp(c.span(node), op_node.type if op_node else "?", operand)


def _not(c: Converter, node: TSNode, depth: int) -> ast.Expr:
    return ast.UnaryOp(c.span(node), "not", c._field_expr(node, "argument", depth))


def _compare(c: Converter, node: TSNode, depth: int) -> ast.Expr:
    ops: list[str] = []
    operands: list[ast.Expr] = []
    for i, child in enumerate(node.children):
        if node.field_name_for_child(i) == "operators":
            if child.type == "<>":
                c._reject(child, rejection("python2_not_equal"))
            ops.append(child.type)
        elif child.is_named and child.type not in _SKIP:
            operands.append(c._expr(child, depth + 1))
    if len(operands) != len(ops) + 1:
        return ast.Invalid(c.span(node))
    return ast.Compare(c.span(node), tuple(ops), tuple(operands))


def _conditional(c: Converter, node: TSNode, depth: int) -> ast.Expr:
    parts = c._named(node)
    if len(parts) != 3:
        return ast.Invalid(c.span(node))
    body, test, orelse = (c._expr(p, depth + 1) for p in parts)
    return ast.IfExp(c.span(node), test, body, orelse)


def _tuple(c: Converter, node: TSNode, depth: int) -> ast.Expr:
    return ast.Tuple(c.span(node), tuple(c._expr(e, depth + 1) for e in c._named(node)))


def _list(c: Converter, node: TSNode, depth: int) -> ast.Expr:
    return ast.ListExpr(c.span(node), tuple(c._expr(e, depth + 1) for e in c._named(node)))


def _unwrap(c: Converter, node: TSNode, depth: int) -> ast.Expr:
    inner = c._named(node)
    if len(inner) != 1:
        return ast.Invalid(c.span(node))
    return c._expr(inner[0], depth + 1)


def _generic_type(c: Converter, node: TSNode, depth: int) -> ast.Expr:
    named = c._named(node)
    if len(named) != 2 or named[1].type != "type_parameter":
        return ast.Invalid(c.span(node))
    base = c._expr(named[0], depth + 1)
    params = named[1]
    elts = [c._expr(t, depth + 1) for t in c._named(params)]
    if not elts:
        return ast.Invalid(c.span(node))
    if len(elts) == 1 and not _has_token(params, ","):
        return ast.Subscript(c.span(node), base, elts[0])
    inner = [ch for ch in params.children if ch.type not in ("[", "]")]
    tuple_span = c.span_bytes(inner[0].start_byte, inner[-1].end_byte)
    return ast.Subscript(c.span(node), base, ast.Tuple(tuple_span, tuple(elts)))


def _union_type(c: Converter, node: TSNode, depth: int) -> ast.Expr:
    parts = c._named(node)
    if len(parts) != 2:
        return ast.Invalid(c.span(node))
    left, right = (c._expr(p, depth + 1) for p in parts)
    return ast.BinOp(c.span(node), "|", left, right)


def _member_type(c: Converter, node: TSNode, depth: int) -> ast.Expr:
    parts = c._named(node)
    if len(parts) != 2 or parts[1].type != "identifier":
        return ast.Invalid(c.span(node))
    value = c._expr(parts[0], depth + 1)
    return ast.Attribute(c.span(node), value, c._text(parts[1]), c.span(parts[1]))


_HANDLERS: dict[str, Callable[[Converter, TSNode, int], ast.Expr]] = {
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
def _has_token(node: TSNode, token: str) -> bool:
    return any(c.type == token for c in node.children)


def _describe(kind: str) -> str:
    return {
        "call": "a function call",
        "integer": "a literal",
        "float": "a literal",
        "string": "a literal",
        "true": "a literal",
        "false": "a literal",
        "none": "a literal",
    }.get(kind, f"`{kind.replace('_', ' ')}`")


def _utf16_slice(text: str, start_units: int) -> str:
    units = 0
    for i, ch in enumerate(text):
        if units >= start_units:
            return text[i:]
        units += 2 if ord(ch) > 0xFFFF else 1
    return ""
