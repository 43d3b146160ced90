"""The source text of what a finding names: a loop's header, the elements of a tuple or
the indices of a subscript as written, the buffer a subscript indexes.

The IR keeps spans, not the text of sub-expressions, and a message that quotes
`kk + 1` (and points at it) is clearer than one that prints the folded symbolic form.
These read the bytes under a span with bracket depth in mind, and give None when the
text is not written out there (a name bound elsewhere), so the caller falls back to the
IR's names.
"""

from __future__ import annotations

from collections.abc import Iterator

from cake_core.ir.kernel import ForOp, Value
from cake_core.source import SourceFile, Span


def _top_level(data: bytes, start: int, end: int) -> Iterator[tuple[int, bytes]]:
    """(offset, byte) of each byte of [start, end) outside any bracket pair."""
    depth = 0
    for i in range(start, min(end, len(data))):
        ch = data[i:i + 1]
        if ch in (b"(", b"["):
            depth += 1
        elif ch in (b")", b"]"):
            depth -= 1
        elif depth == 0:
            yield i, ch


def loop_header_span(source: SourceFile, loop: ForOp) -> Span:
    """The `for x in range(...)` part of a loop (its span covers the body too)."""
    start, end = loop.span.start.offset, loop.span.end.offset
    colon = next((i for i, ch in _top_level(source.data, start, end) if ch == b":"),
                 min(end, len(source.data)))
    return source.span(start, colon)


def loop_header(source: SourceFile, loop: ForOp) -> str:
    return " ".join(source.snippet(loop_header_span(source, loop)).split())


def range_arg_texts(source: SourceFile, loop: ForOp) -> list[tuple[str, Span]] | None:
    """The arguments of a loop's `range(...)` as written, or None when the header is not
    `for x in range(...)`."""
    header = loop_header_span(source, loop)
    a, b = header.start.offset, header.end.offset
    data = source.data
    at = data.find(b"range(", a, b)
    close = data.rfind(b")", a, b)
    if at < 0 or close < at:
        return None
    return _split_top(source, at + len(b"range("), close)


def _split_top(source: SourceFile, start: int, end: int) -> list[tuple[str, Span]]:
    """The comma-separated parts of the bytes [start, end) at bracket depth 0."""
    data = source.data
    parts: list[tuple[int, int]] = []
    first = start
    for i, ch in _top_level(data, start, end):
        if ch == b",":
            parts.append((first, i))
            first = i + 1
    parts.append((first, end))
    out = []
    for a, b in parts:
        while a < b and data[a:a + 1].isspace():
            a += 1
        while b > a and data[b - 1:b].isspace():
            b -= 1
        if a < b:
            sp = source.span(a, b)
            out.append((" ".join(source.snippet(sp).split()), sp))
    return out


def tuple_texts(source: SourceFile, span: Span, n: int) -> list[tuple[str, Span]] | None:
    """Each element of a tuple written at `span`, as text and range; None when the tuple
    is not written out there (a name bound elsewhere)."""
    a, b = span.start.offset, span.end.offset
    data = source.data
    if b - a < 2 or data[a:a + 1] != b"(" or data[b - 1:b] != b")":
        return None
    parts = _split_top(source, a + 1, b - 1)
    return parts if len(parts) == n else None


def index_texts(source: SourceFile, span: Span, n: int) -> list[tuple[str, Span]] | None:
    """The indices of the last subscript written at `span` (`sa[i]` or `sa[i].T`)."""
    a, b = span.start.offset, span.end.offset
    data = source.data
    close = data.rfind(b"]", a, b)
    if close < 0:
        return None
    depth = 0
    i = close
    while i > a:
        ch = data[i:i + 1]
        if ch == b"]":
            depth += 1
        elif ch == b"[":
            depth -= 1
            if depth == 0:
                break
        i -= 1
    if data[i:i + 1] != b"[":
        return None
    parts = _split_top(source, i + 1, close)
    return parts if len(parts) == n else None


def base_text(source: SourceFile, span: Span, base: Value) -> str:
    """The buffer a subscript at `span` indexes, as written (`sa`, `bufs[h]`)."""
    text = source.snippet(span)
    close = text.rfind("]")
    depth = 0
    for i in range(close, -1, -1):
        if text[i] == "]":
            depth += 1
        elif text[i] == "[":
            depth -= 1
            if depth == 0:
                head = text[:i].strip()
                return head or base.name
    return base.name


__all__ = ["base_text", "index_texts", "loop_header", "loop_header_span", "tuple_texts"]
