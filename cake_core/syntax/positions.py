"""Fast byte offset -> `Position` conversion for one parse.

`SourceFile.position` measures the UTF-16 column by decoding the line up to the offset,
which is right but quadratic on a long non-ASCII line (a megabyte of junk on one line
makes tens of thousands of spans).  A parse asks for positions mostly in text order, so
this index remembers, per line, the UTF-16 column at offsets it has already measured and
only decodes the stretch from the nearest one; positions are cached by offset since many
nodes share a start or an end.
"""

from __future__ import annotations

import bisect

from cake_core.source import Position, SourceFile, Span

_tuple_new = tuple.__new__


def new_position(offset: int, line: int, col_byte: int, col_utf16: int) -> Position:
    """`Position(...)` without the NamedTuple's Python-level `__new__` (3x cheaper)."""
    return _tuple_new(Position, (offset, line, col_byte, col_utf16))


def new_span(start: Position, end: Position) -> Span:
    """`Span(start, end)`, built the way `new_position` is."""
    return _tuple_new(Span, (start, end))


class PositionIndex:
    """Positions in `source.data`, equal to `source.position` but fast on any input."""

    def __init__(self, source: SourceFile) -> None:
        self._data = source.data
        self._starts: list[int] | None = None
        self._ascii: dict[int, bool] = {}
        self._marks: dict[int, tuple[list[int], list[int]]] = {}
        self._cache: dict[int, Position] = {}

    def span(self, start: int, end: int) -> Span:
        return new_span(self.position(start), self.position(max(start, end)))

    def position(self, offset: int) -> Position:
        data = self._data
        offset = max(0, min(offset, len(data)))
        cached = self._cache.get(offset)
        if cached is not None:
            return cached
        starts = self._line_starts()
        row = bisect.bisect_right(starts, offset) - 1
        line_start = starts[row]
        col = offset - line_start
        if self._line_is_ascii(row):
            utf16 = col
        else:
            # Offsets from a lenient decode can fall inside a character: step back to it.
            while line_start < offset < len(data) and 0x80 <= data[offset] < 0xC0:
                offset -= 1
            col = offset - line_start
            utf16 = self._utf16_col(row, line_start, offset)
        pos = new_position(offset, row, col, utf16)
        self._cache[offset] = pos
        return pos

    def _line_starts(self) -> list[int]:
        if self._starts is None:
            data = self._data
            starts = [0]
            i = data.find(b"\n")
            while i != -1:
                starts.append(i + 1)
                i = data.find(b"\n", i + 1)
            self._starts = starts
        return self._starts

    def _line_is_ascii(self, row: int) -> bool:
        known = self._ascii.get(row)
        if known is None:
            starts = self._line_starts()
            end = starts[row + 1] if row + 1 < len(starts) else len(self._data)
            known = self._ascii[row] = self._data[starts[row] : end].isascii()
        return known

    def _utf16_col(self, row: int, line_start: int, offset: int) -> int:
        offsets, cols = self._marks.setdefault(row, ([line_start], [0]))
        i = bisect.bisect_right(offsets, offset) - 1
        base, base_col = offsets[i], cols[i]
        if base == offset:
            return base_col
        chunk = self._data[base:offset].decode("utf-8", errors="surrogatepass")
        col = base_col + len(chunk.encode("utf-16-le", errors="surrogatepass")) // 2
        offsets.insert(i + 1, offset)
        cols.insert(i + 1, col)
        return col
