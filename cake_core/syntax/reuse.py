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

A parse with a syntax error keeps no records of its own, but the records of the last
clean parse stay valid through it for every line the edits since then did not touch:
`carry` keeps them together with those edits (`Carried`), and the next clean parse looks
a statement up through the whole chain.  So typing through a syntax error (a half-typed
call, an unclosed bracket) converts only what was typed, not the whole file again.

Shifting is the cost that remains: a statement after the edit is rebuilt with moved
spans, node by node (about 2 µs a node).  An edit that moves nothing (a same-length
replacement) hands the records over as they are.
"""

from __future__ import annotations

import bisect
import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tree_sitter import Node as TSNode

from cake_core.diagnostics.model import Diagnostic
from cake_core.shift import LineShift
from cake_core.source import Position, Span
from cake_core.syntax import ast

if TYPE_CHECKING:
    from cake_core.syntax.recovery import PatchMap

__all__ = ["MAX_CHAIN", "Carried", "Edit", "Key", "Origin", "Record", "Reuse", "carry",
           "key_of"]

Key = tuple[int, int, int, int, bool]
"""(start byte, end byte, tree-sitter kind id, depth, top level) of a statement node."""

MAX_CHAIN = 64
"""Edits a `Carried` set of records is seen through at most (past that: convert afresh)."""


Origin = tuple[ast.Stmt, int, int]
"""(a statement as converted, bytes, lines): what a moved statement is a shift of."""


@dataclass(frozen=True, slots=True)
class Record:
    stmt: ast.Stmt | None
    diagnostics: tuple[Diagnostic, ...]
    first_row: int
    last_row: int
    origin: Origin | None = None
    """For a statement shifted from an earlier parse: the one converted, and how far it
    moved since (None: `stmt` itself was converted)."""


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


@dataclass(frozen=True, slots=True)
class Carried:
    """The records of the last clean parse and the edits made since (oldest first)."""

    records: dict[Key, Record]
    edits: tuple[Edit, ...]


def carry(records: dict[Key, Record] | Carried | None, edit: Edit) -> Carried | None:
    """The records of a parse seen through `edit`, for a parse that keeps none itself."""
    if records is None:
        return None
    if isinstance(records, Carried):
        if len(records.edits) >= MAX_CHAIN:
            return None
        return Carried(records.records, (*records.edits, edit))
    return Carried(records, (edit,))


def key_of(node: TSNode, depth: int, top_level: bool) -> Key:
    return (node.start_byte, node.end_byte, node.kind_id, depth, top_level)


class Reuse:
    """The records of a previous parse, seen through the edits made since."""

    def __init__(self, old: dict[Key, Record] | Carried, edit: Edit) -> None:
        if isinstance(old, Carried):
            self._old, self._edits = old.records, (*old.edits, edit)
        else:
            self._old, self._edits = old, (edit,)
        first_row = min(e.start_row for e in self._edits)
        self.kept: dict[Key, Record] = {
            key: rec for key, rec in self._old.items() if rec.last_row < first_row
        }
        """Records of statements before every edit: valid as they are in the new parse."""
        self._first_row = first_row
        self.moved: dict[int, Origin] = {}
        """id(statement) -> its `Record.origin`, for every statement taken that has one:
        a caller holding a statement of an earlier parse can tell, without comparing
        them node by node, that a statement of this one is it moved."""

    def lookup(self, node: TSNode, depth: int, top_level: bool) -> Record | None:
        start_row = node.start_point[0]
        end_row = node.end_point[0]
        if end_row < self._first_row:
            return self._taken(self.kept.get(key_of(node, depth, top_level)))
        return self._find(node.start_byte, node.end_byte, start_row, end_row,
                          (node.kind_id, depth, top_level))

    def _taken(self, rec: Record | None) -> Record | None:
        if rec is not None and rec.origin is not None and rec.stmt is not None:
            self.moved[id(rec.stmt)] = rec.origin
        return rec

    def through(self, patches: PatchMap, data: bytes) -> Reuse:
        """These records as seen by a parse of `data` repaired by `patches` (the parse
        of a text with syntax errors converts a repaired copy of it)."""
        return _Repaired(self, patches, data)

    def _find(self, start: int, end: int, start_row: int, end_row: int,
              kind: tuple[int, int, bool]) -> Record | None:
        """The record of the statement at [start, end), rows [start_row, end_row] of the
        new text, moved there; None unless every edit since missed its lines."""
        new_start, new_row = start, start_row
        for edit in reversed(self._edits):  # back to where the lines stood in the old parse
            if end_row < edit.start_row:
                continue
            if start_row <= edit.new_end_row:
                return None
            start -= edit.delta
            end -= edit.delta
            start_row -= edit.row_delta
            end_row -= edit.row_delta
        old = self._old.get((start, end, *kind))
        if old is None or old.first_row != start_row:
            return None
        delta, rows = new_start - start, new_row - start_row
        if delta == 0 and rows == 0:
            return self._taken(old)
        try:
            return self._taken(_Shifter(delta, rows).record(old))
        except _TooDeepToShift:
            return None


class _Repaired(Reuse):
    """A lookup by node of the repaired buffer: the node is mapped back to the text as
    written, and found only when no repair touches its lines (then its text, and so its
    conversion, is what it is in the written text) and none before it added or removed a
    line (then its rows are the same in both)."""

    def __init__(self, base: Reuse, patches: PatchMap, data: bytes) -> None:
        self._old, self._edits, self._first_row = base._old, base._edits, base._first_row
        self.kept = base.kept
        self.moved = base.moved
        self._patches = patches
        self._data = data
        self._at = [f.at for f in patches.flaws]
        lines = [i for i, f in enumerate(patches.flaws)
                 if b"\n" in f.insert or b"\n" in data[f.at:f.at + f.remove]]
        self._rows_from = patches.flaws[lines[0]].at if lines else len(data) + 1
        """Offset of the first repair that adds or removes a line: rows differ after it."""

    def lookup(self, node: TSNode, depth: int, top_level: bool) -> Record | None:
        if node.has_error:
            return None
        start, end = self._patches(node.start_byte), self._patches(node.end_byte)
        data = self._data
        lo = data.rfind(b"\n", 0, start) + 1
        nl = data.find(b"\n", end)
        hi = len(data) if nl < 0 else nl
        if hi >= self._rows_from:
            return None
        i = bisect.bisect_left(self._at, lo)
        if i < len(self._at) and self._at[i] <= hi:
            return None  # a repair on its lines
        if i > 0:
            f = self._patches.flaws[i - 1]
            if f.at + f.remove >= lo:
                return None
        start_row, end_row = node.start_point[0], node.end_point[0]
        if end_row < self._first_row:
            rec = self.kept.get((start, end, node.kind_id, depth, top_level))
            return self._taken(rec) if rec is not None and rec.first_row == start_row else None
        return self._find(start, end, start_row, end_row, (node.kind_id, depth, top_level))


_tuple_new = tuple.__new__
_object_new = object.__new__


class _Shifter:
    """Rebuilds AST nodes and diagnostics with offsets and rows moved."""

    def __init__(self, delta: int, rows: int) -> None:
        self._delta = delta
        self._rows = rows
        self._positions: dict[int, Position] = {}
        self._findings = LineShift(delta, rows)

    def record(self, old: Record) -> Record:
        stmt = self.node(old.stmt) if old.stmt is not None else None
        diags = tuple(self._findings.diagnostic(d) for d in old.diagnostics)
        origin: Origin | None
        if old.origin is not None:
            root, delta, rows = old.origin
            origin = (root, delta + self._delta, rows + self._rows)
        else:
            origin = (old.stmt, self._delta, self._rows) if old.stmt is not None else None
        return Record(stmt, diags, old.first_row + self._rows, old.last_row + self._rows,
                      origin)

    def position(self, pos: Position) -> Position:
        moved = self._positions.get(pos[0])
        if moved is None:
            moved = _tuple_new(Position, (pos[0] + self._delta, pos[1] + self._rows, pos[2],
                                          pos[3]))
            self._positions[pos[0]] = moved
        return moved

    def node(self, node: Any, depth: int = 0) -> Any:
        """Shift a subtree; a chain deeper than `_MAX_SHIFT_DEPTH` raises `_TooDeepToShift`
        (the statement is then converted afresh rather than recursing without bound)."""
        if depth > _MAX_SHIFT_DEPTH:
            raise _TooDeepToShift
        cls = node.__class__
        slots = _SLOTS.get(cls) or _slots(cls)
        new = _object_new(cls)
        positions = self._positions
        for name, setter in slots:
            value = getattr(node, name)
            kind = value.__class__
            if kind is Span:  # inlined `span`: most fields are spans
                a, b = value
                sa = positions.get(a[0]) or self.position(a)
                sb = positions.get(b[0]) or self.position(b)
                value = _tuple_new(Span, (sa, sb))
            elif kind is tuple:
                if value and isinstance(value[0], ast.Node):
                    value = tuple([self.node(item, depth + 1) for item in value])
            elif isinstance(value, ast.Node):
                value = self.node(value, depth + 1)
            setter(new, value)
        return new


class _TooDeepToShift(Exception):
    pass


_MAX_SHIFT_DEPTH = 150
"""Well past `MAX_DEPTH` nesting; only long flat chains (`a + b + ...`) get there."""

_SLOTS: dict[type, tuple[tuple[str, Any], ...]] = {}


def _slots(cls: type) -> tuple[tuple[str, Any], ...]:
    """(field, slot setter) of an AST node class: filling slots skips the frozen
    dataclass `__init__`, which a shift of thousands of nodes would feel."""
    slots = tuple((f.name, getattr(cls, f.name).__set__) for f in dataclasses.fields(cls))
    _SLOTS[cls] = slots
    return slots
