"""Source ranges that verifier fixes rewrite, found from the AST.

The IR keeps the spans diagnostics point at, but a fix often edits a neighbour: the
literal behind a constant, the `regs=` of a role, the `layout=` of a buffer.  Those are
looked up here in the parsed module, which is parsed again only when a fix needs it
(error paths only), so clean kernels pay nothing.
"""

from __future__ import annotations

from cake_core.diagnostics.model import TextEdit
from cake_core.ir.kernel import Kernel, Program, Role
from cake_core.source import SourceFile, Span
from cake_core.syntax import ast
from cake_core.syntax.parser import parse


class SourceIndex:
    def __init__(self, program: Program, source: SourceFile) -> None:
        self.program = program
        self.source = source
        self._module: ast.Module | None = None
        self._calls: dict[tuple[int, int], ast.Call] = {}
        self._withs: dict[tuple[int, int], ast.With] = {}

    # -- the tree -----------------------------------------------------------------------
    def module(self) -> ast.Module:
        if self._module is None:
            self._module = parse(self.source).module
            for node in ast.walk(self._module):
                key = (node.span.start.offset, node.span.end.offset)
                if isinstance(node, ast.Call):
                    self._calls[key] = node
                elif isinstance(node, ast.With):
                    self._withs[key] = node
        return self._module

    def call_at(self, span: Span) -> ast.Call | None:
        self.module()
        return self._calls.get((span.start.offset, span.end.offset))

    def role_call(self, role: Role) -> ast.Call | None:
        """The `role(...)` call of a `with` statement."""
        self.module()
        w = self._withs.get((role.span.start.offset, role.span.end.offset))
        if w is None or not w.items or not isinstance(w.items[0].context, ast.Call):
            return None
        return w.items[0].context

    def decorator_call(self, kernel: Kernel) -> ast.Call | None:
        for stmt in self.module().body:
            if isinstance(stmt, ast.FunctionDef) and stmt.name_span == kernel.name_span:
                deco = stmt.decorators[0] if stmt.decorators else None
                return deco if isinstance(deco, ast.Call) else None
        return None

    def dim_call(self, name: str) -> ast.Call | None:
        """The top-level `dim("name", ...)` call that declares dim `name`."""
        self.module()
        for call in self._calls.values():
            if isinstance(call.func, ast.Name) and call.func.id == "dim" and call.args and \
                    isinstance(call.args[0], ast.Constant) and call.args[0].value == name:
                return call
        return None

    # -- constants ----------------------------------------------------------------------
    def constant_literal(self, name: str) -> Span | None:
        """Where the value of top-level constant `name` is written."""
        spans = getattr(self.program, "constant_spans", None) or {}
        if name in spans:
            return spans[name]
        for stmt in self.module().body:
            if not isinstance(stmt, ast.Assign):
                continue
            for target in stmt.targets:
                if isinstance(target, ast.Name) and target.id == name:
                    return stmt.value.span
                if isinstance(target, ast.Tuple) and isinstance(stmt.value, ast.Tuple) and \
                        len(target.elts) == len(stmt.value.elts):
                    for t, v in zip(target.elts, stmt.value.elts, strict=True):
                        if isinstance(t, ast.Name) and t.id == name:
                            return v.span
        return None

    # -- keyword edits ------------------------------------------------------------------
    def span(self, start: int, end: int) -> Span:
        return self.source.span(start, end)

    def text(self, span: Span) -> str:
        return self.source.snippet(span)

    def insert_keyword(self, call: ast.Call, text: str) -> TextEdit | None:
        """Insert `, text` before the closing parenthesis of `call`."""
        end = call.span.end.offset
        if self.source.data[end - 1:end] != b")":
            return None
        last = call.keywords[-1].span if call.keywords else (
            call.args[-1].span if call.args else None)
        if last is None:
            return TextEdit(self.span(end - 1, end - 1), text)
        return TextEdit(self.span(last.end.offset, last.end.offset), f", {text}")

    def remove_keyword(self, call: ast.Call, kw: ast.Keyword) -> TextEdit:
        """Delete `, name=value` (or `name=value, ` when it is the first argument)."""
        items = sorted([*call.args, *call.keywords], key=lambda n: n.span.start.offset)
        i = next(i for i, n in enumerate(items) if n is kw)
        if i > 0:
            return TextEdit(self.span(items[i - 1].span.end.offset, kw.span.end.offset), "")
        if len(items) > 1:
            return TextEdit(self.span(kw.span.start.offset, items[1].span.start.offset), "")
        return TextEdit(kw.span, "")


def keyword(call: ast.Call | None, name: str) -> ast.Keyword | None:
    if call is None:
        return None
    return next((k for k in call.keywords if k.name == name), None)


def dim_multiple_edit(index: SourceIndex, call: ast.Call, multiple: int) -> TextEdit | None:
    """Make `dim("N", ...)` declare `multiple_of=multiple` (replacing a smaller one)."""
    kw = keyword(call, "multiple_of")
    if kw is not None:
        return TextEdit(kw.value.span, str(multiple))
    return index.insert_keyword(call, f"multiple_of={multiple}")


__all__ = ["SourceIndex", "dim_multiple_edit", "keyword"]
