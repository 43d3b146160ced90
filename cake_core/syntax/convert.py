"""Tree-sitter tree -> CAKE AST, enforcing the subset allowlist of `subset.py`.

Only kinds the allowlist names become AST nodes; every other construct is reported once
(CK002) at its range and replaced by `ast.Invalid` (an expression, see `expressions.py`)
or dropped (a statement), so the rest of the file still converts.  ERROR and MISSING nodes
are skipped here: `recovery.py` reports them.

A statement nested deeper than `MAX_DEPTH`, or holding an expression that is, is reported
once and dropped from its block.
"""

from __future__ import annotations

from tree_sitter import Node as TSNode

from cake_core.diagnostics.model import Applicability, Fix, TextEdit
from cake_core.source import Span
from cake_core.syntax import ast
from cake_core.syntax.expressions import (
    MAX_DEPTH,
    SKIP,
    ExpressionConverter,
    TooDeep,
    has_token,
)
from cake_core.syntax.reuse import Key, Record, Reuse, key_of
from cake_core.syntax.subset import TRIVIA, Rejection, rejection

__all__ = ["MAX_DEPTH", "Converter"]

_SIMPLE = frozenset({"expression_statement", "return_statement"})
_DEFINITIONS = frozenset({"function_definition", "decorated_definition", "class_definition"})


def _is_statement(node: TSNode) -> bool:
    kind = node.type
    return kind == "ERROR" or kind.endswith("_statement") or kind in _DEFINITIONS
_PARAMETER_KINDS = {"list_splat_pattern": "star_parameter"}


class Converter(ExpressionConverter):
    """Builds the AST of one parse; collects its CK002 and structural CK001 diagnostics.

    With `record` set it keeps a `reuse.Record` of every statement it converts, and with
    `reuse` it takes statements the last edit did not touch from the previous parse.
    """

    reuse: Reuse | None = None
    records: dict[Key, Record] | None = None

    def module(self, root: TSNode) -> ast.Module:
        if self.reuse is not None and self.records is not None:
            self.records.update(self.reuse.kept)
        body = self._statements(root, 0, top_level=True)
        return ast.Module(self.source.whole, body)

    def _statements(self, parent: TSNode, depth: int, top_level: bool,
                    salvage: list[TSNode] | None = None) -> tuple[ast.Stmt, ...]:
        """The statements of a module or block; `salvage` are ERROR nodes found before
        the block whose statements belong in front of it."""
        out: list[ast.Stmt] = []
        indent: bytes | None = b"" if parent.type == "module" else None
        pending = [(c, True) for c in reversed(parent.children)]
        pending.extend((c, False) for c in reversed(salvage or []))
        while pending:
            child, direct = pending.pop()
            kind = child.type
            if kind == "ERROR":
                # tree-sitter may wrap whole statements into an ERROR around a stray token
                # (an `else` with no `if`); keep those statements, without indentation checks.
                pending.extend((c, False) for c in reversed(child.children) if _is_statement(c))
                continue
            if kind in SKIP or child.is_missing or not child.is_named:
                continue
            if direct:
                indent = self._check_indent(child, indent)
            stmt = self._statement_once(child, depth + 1, top_level)
            if stmt is not None:
                out.append(stmt)
        return tuple(out)

    def _statement_once(self, node: TSNode, depth: int, top_level: bool) -> ast.Stmt | None:
        """Convert a statement, or take it from the previous parse when the edit missed it."""
        if self.reuse is not None:
            found = self.reuse.lookup(node, depth, top_level)
            if found is not None:
                self.diagnostics.extend(found.diagnostics)
                if self.records is not None:
                    self.records[key_of(node, depth, top_level)] = found
                return found.stmt
        mark = len(self.diagnostics)
        try:
            stmt = self._statement(node, depth, top_level)
        except TooDeep:
            stmt = None
        if self.records is not None:
            self.records[key_of(node, depth, top_level)] = Record(
                stmt, tuple(self.diagnostics[mark:]), node.start_point[0], node.end_point[0]
            )
        return stmt

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
            raise TooDeep
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
        salvage = [c for c in owner.children
                   if c.type == "ERROR" and c.end_byte <= block.start_byte]
        body = self._statements(block, depth, top_level=False, salvage=salvage)
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
        if has_token(node, "async"):
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
        if has_token(node, "async"):
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
        if has_token(definition, "async"):
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
