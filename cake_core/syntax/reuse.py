"""Incremental conversion: statements an edit did not touch keep their AST.

After a one-character edit tree-sitter re-parses in well under a millisecond, but building
the AST of a whole kernel again costs much more.  A clean parse therefore keeps a record
of every statement it converted (its AST and the findings made while converting it),
keyed by byte range, kind, depth and whether it sits at the top level.  The next parse
takes a statement's record instead of converting it when the statement's lines all lie
before the edit (then nothing about it changed), or all lie after it (then only its
offsets and line numbers moved, and the record is shifted).  Conversion of a statement
reads nothing outside its own lines, which is what makes this exact: `reparse` and
`parse` give equal results, which the tests check on random edits.
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass
from typing import Any

from tree_sitter import Node as TSNode

from cake_core.diagnostics.model import Diagnostic, Related, TextEdit
from cake_core.syntax import ast
from cake_core.syntax.positions import new_position, new_span
from cake_core.syntax.source import Position, Span

Key = tuple[int, int, int, int, bool]
"""(start byte, end byte, tree-sitter kind id, depth, top level) of a statement node."""


@dataclass(frozen=True, slots=True)
class Record:
    stmt: ast.Stmt | None
    diagnostics: tuple[Diagnostic, ...]
    first_row: int
    last_row: int


@dataclass(frozen=True, slots=True)
class Edit:
    """One text edit in byte offsets and rows (rows of the old text for the old end)."""

    start: int
    old_end: int
    new_end: int
    start_row: int
    old_end_row: int
    new_end_row: int

    @property
    def delta(self) -> int:
        return self.new_end - self.old_end

    @property
    def row_delta(self) -> int:
        return self.new_end_row - self.old_end_row


def key_of(node: TSNode, depth: int, top_level: bool) -> Key:
    return (node.start_byte, node.end_byte, node.kind_id, depth, top_level)


class Reuse:
    """The records of the previous parse, seen through one edit."""

    def __init__(self, old: dict[Key, Record], edit: Edit) -> None:
        self._old = old
        self._edit = edit
        self.kept: dict[Key, Record] = {
            key: rec for key, rec in old.items() if rec.last_row < edit.start_row
        }
        """Records of statements before the edit: valid as they are in the new parse."""

    def lookup(self, node: TSNode, depth: int, top_level: bool) -> Record | None:
        edit = self._edit
        start_row = node.start_point[0]
        end_row = node.end_point[0]
        if end_row < edit.start_row:
            return self.kept.get(key_of(node, depth, top_level))
        if start_row <= edit.new_end_row:
            return None
        delta = edit.delta
        old_key = (node.start_byte - delta, node.end_byte - delta, node.kind_id, depth,
                   top_level)
        old = self._old.get(old_key)
        if old is None or old.first_row != start_row - edit.row_delta:
            return None
        try:
            return _Shifter(delta, edit.row_delta).record(old)
        except _TooDeepToShift:
            return None


class _Shifter:
    """Rebuilds AST nodes and diagnostics with offsets and rows moved."""

    def __init__(self, delta: int, rows: int) -> None:
        self._delta = delta
        self._rows = rows
        self._positions: dict[int, Position] = {}

    def record(self, old: Record) -> Record:
        stmt = self.node(old.stmt) if old.stmt is not None else None
        diags = tuple(self.diagnostic(d) for d in old.diagnostics)
        return Record(stmt, diags, old.first_row + self._rows, old.last_row + self._rows)

    def position(self, pos: Position) -> Position:
        moved = self._positions.get(pos.offset)
        if moved is None:
            moved = new_position(pos.offset + self._delta, pos.line + self._rows, pos.col_byte,
                                 pos.col_utf16)
            self._positions[pos.offset] = moved
        return moved

    def span(self, span: Span) -> Span:
        return new_span(self.position(span.start), self.position(span.end))

    def diagnostic(self, diag: Diagnostic) -> Diagnostic:
        fixes = tuple(
            dataclasses.replace(
                fix, edits=tuple(TextEdit(self.span(e.span), e.new_text) for e in fix.edits)
            )
            for fix in diag.fixes
        )
        related = tuple(Related(self.span(r.span), r.message, r.path) for r in diag.related)
        return dataclasses.replace(diag, span=self.span(diag.span), fixes=fixes,
                                   related=related)

    def node(self, node: Any, depth: int = 0) -> Any:
        """Shift a subtree; a chain deeper than `_MAX_SHIFT_DEPTH` raises `_TooDeepToShift`
        (the statement is then converted afresh rather than recursing without bound)."""
        if depth > _MAX_SHIFT_DEPTH:
            raise _TooDeepToShift
        cls = type(node)
        new = object.__new__(cls)
        for name, setter in _slots(cls):
            value = getattr(node, name)
            if isinstance(value, Span):
                value = self.span(value)
            elif isinstance(value, ast.Node):
                value = self.node(value, depth + 1)
            elif isinstance(value, tuple) and value:
                items = []
                for item in value:
                    items.append(self.node(item, depth + 1) if isinstance(item, ast.Node)
                                 else item)
                value = tuple(items)
            setter(new, value)
        return new


class _TooDeepToShift(Exception):
    pass


_MAX_SHIFT_DEPTH = 150
"""Well past `MAX_DEPTH` nesting; only long flat chains (`a + b + ...`) get there."""


@functools.cache
def _slots(cls: type) -> tuple[tuple[str, Any], ...]:
    """(field, slot setter) of an AST node class: filling slots skips the frozen
    dataclass `__init__`, which a shift of thousands of nodes would feel."""
    return tuple((f.name, getattr(cls, f.name).__set__) for f in dataclasses.fields(cls))
