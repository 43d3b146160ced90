"""Moving findings by whole lines, for the caches that reuse a kernel's findings.

A kernel whose text did not change but which now starts elsewhere has the findings it had,
each range moved by the same bytes and lines: its text, and so every column, is unchanged.
Both the type-check cache (`cake_core/check_cache.py`) and the verifier's
(`cake_core/verify/cache.py`) do this; one shifter keeps them moving ranges alike.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace

from cake_core.diagnostics.model import Diagnostic, Fix, Related, TextEdit
from cake_core.source import Position, Span

__all__ = ["LineShift", "spans_of"]


@dataclass(frozen=True, slots=True)
class LineShift:
    """Moves ranges by `offset` bytes and `lines` lines.

    With `within`, a byte range [lo, hi] of the old text, only ranges that start in it
    move: the others lie in text above the kernel that did not move (top-level constants
    a fix edits, say)."""

    offset: int
    lines: int
    within: tuple[int, int] | None = None

    @property
    def still(self) -> bool:
        return self.offset == 0 and self.lines == 0

    def position(self, p: Position) -> Position:
        return Position(p.offset + self.offset, p.line + self.lines, p.col_byte, p.col_utf16)

    def span(self, s: Span) -> Span:
        w = self.within
        if w is not None and not w[0] <= s.start.offset <= w[1]:
            return s
        return Span(self.position(s.start), self.position(s.end))

    def diagnostic(self, d: Diagnostic) -> Diagnostic:
        if self.still:
            return d
        span = self.span
        return replace(
            d, span=span(d.span),
            related=tuple(Related(span(r.span), r.message, r.path) for r in d.related),
            fixes=tuple(Fix(f.title, tuple(TextEdit(span(e.span), e.new_text)
                                           for e in f.edits), f.applicability)
                        for f in d.fixes))


def spans_of(d: Diagnostic) -> Iterator[Span]:
    """Every range a finding mentions: where it points, its related places, its edits."""
    yield d.span
    for r in d.related:
        yield r.span
    for f in d.fixes:
        for e in f.edits:
            yield e.span
