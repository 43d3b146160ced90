"""Diagnostics for people: rustc-style text with carets under the exact range.

    error[CK104]: expected a tile, found a scalar
     --> kernels/gemm.cake:3:9
      |
    3 |     x = load(1)
      |         ^^^^^^^
      |
      = note: load() takes a global tensor
      = help: Pass the tensor `a`

The `-->` column counts characters (what an editor's status bar shows), while carets
are placed by display cell: tabs go to stops of four, East Asian wide characters and
most emoji take two cells, combining marks none, so the carets stay under the text in
a terminal.  Control and bidirectional-override characters in the source are shown as
visible symbols so that a file cannot move the cursor or hide code in the report.

Colour is plain ANSI: importing rich costs tens of milliseconds, which every
`cake check` would pay even with colour off.  For the same reason the records here are
NamedTuples, which are several times cheaper to define than dataclasses.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable, Mapping
from typing import NamedTuple

from cake_core.diagnostics.codes import lookup
from cake_core.diagnostics.model import Applicability, Diagnostic, Fix, Severity
from cake_core.source import SourceFile, Span

TAB_WIDTH = 4
"""Tab stops every four cells, as in rustc's output."""

MAX_INLINE_EDIT = 40
"""A fix whose old and new text are single lines at most this long is shown inline."""

MAX_FULL_SPAN_LINES = 3
"""A span over more lines shows only its first and last line, with `...` between."""

# --- colour ------------------------------------------------------------------------------
_RESET = "\x1b[0m"
_STYLES = {
    "error": "1;31",
    "warning": "1;33",
    "info": "1;36",
    "hint": "1;32",
    "gutter": "1;34",
    "secondary": "1;34",
    "bold": "1",
    "help": "1;36",
}


class _Paint:
    __slots__ = ("color",)

    def __init__(self, color: bool) -> None:
        self.color = color

    def __call__(self, text: str, style: str) -> str:
        if not self.color or not text:
            return text
        return f"\x1b[{_STYLES[style]}m{text}{_RESET}"


# --- characters and cells ------------------------------------------------------------------
_BIDI_CONTROLS = frozenset(
    "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
)


def _cell(ch: str, col: int) -> tuple[str, int]:
    """What a terminal should be sent for one source character, and its width in cells."""
    code = ord(ch)
    if code < 0x80:
        if ch == "\t":
            width = TAB_WIDTH - col % TAB_WIDTH
            return " " * width, width
        if code < 0x20:
            return chr(0x2400 + code), 1  # the Control Pictures block: visible, one cell
        if code == 0x7F:
            return "\u2421", 1
        return ch, 1
    if code < 0xA0 or 0xD800 <= code <= 0xDFFF:
        return "\ufffd", 1
    category = unicodedata.category(ch)
    if ch in _BIDI_CONTROLS or category in ("Zl", "Zp"):
        shown = f"<U+{code:04X}>"
        return shown, len(shown)
    if category in ("Mn", "Me", "Cf"):
        return ch, 0
    if unicodedata.east_asian_width(ch) in ("W", "F"):
        return ch, 2
    return ch, 1


def _clean(text: str) -> str:
    """Message text made safe for a terminal (no escape sequences, no lone surrogates)."""
    if text.isascii() and text.isprintable():
        return text
    out: list[str] = []
    for ch in text:
        if ch.isprintable() or ch in "\n\t":
            out.append(ch)
        else:
            out.append(_cell(ch, 0)[0] if ord(ch) < 0xA0 else f"<U+{ord(ch):04X}>")
    return "".join(out)


class _Line(NamedTuple):
    """One source line prepared for a terminal."""

    raw: bytes
    shown: str
    cols: tuple[int, ...]
    """cols[i] is the cell where character i starts; cols[-1] is the width of the line."""
    first_nonblank: int

    @property
    def nchars(self) -> int:
        return len(self.cols) - 1


def _prepare(raw: bytes) -> _Line:
    text = raw.decode("utf-8", errors="replace")
    parts: list[str] = []
    cols: list[int] = []
    col = 0
    for ch in text:
        cols.append(col)
        shown, width = _cell(ch, col)
        parts.append(shown)
        col += width
    cols.append(col)
    stripped = len(text) - len(text.lstrip(" \t"))
    return _Line(raw, "".join(parts), tuple(cols), stripped)


class _Lines:
    """The lines of one source file, prepared on demand."""

    def __init__(self, src: SourceFile) -> None:
        self.src = src
        self._cache: dict[int, _Line] = {}

    @property
    def last(self) -> int:
        return self.src.line_count - 1

    def get(self, line: int) -> _Line:
        line = max(0, min(line, self.last))
        cached = self._cache.get(line)
        if cached is None:
            src = self.src
            start = src.offset_of(line, 0)
            end = src.offset_of(line + 1, 0) if line < self.last else len(src.data)
            raw = src.data[start:end].rstrip(b"\n").rstrip(b"\r")
            cached = self._cache[line] = _prepare(raw)
        return cached

    def char_index(self, line: int, col_byte: int) -> int:
        info = self.get(line)
        prefix = info.raw[: max(0, col_byte)]
        return min(len(prefix.decode("utf-8", errors="replace")), info.nchars)


# --- marks and underline segments -------------------------------------------------------------
class _Mark(NamedTuple):
    span: Span
    label: str
    primary: bool


class _Segment(NamedTuple):
    line: int
    start: int
    end: int
    label: str
    primary: bool


def _segments(lines: _Lines, mark: _Mark) -> list[_Segment]:
    """Split a mark into per-line underlines (character indices, end exclusive)."""
    span = mark.span
    sl = min(span.start.line, lines.last)
    el = min(span.end.line, lines.last)
    sc = lines.char_index(sl, span.start.col_byte)
    ec = lines.char_index(el, span.end.col_byte)
    while el > sl and ec <= lines.get(el).first_nonblank:
        # Nothing but indentation (or a line break) of this line is in the range: end
        # the marking at the end of the previous line instead.
        el -= 1
        ec = lines.get(el).nchars
    if el < sl or (el == sl and ec < sc):
        el, ec = sl, sc
    if el == sl:
        return [_Segment(sl, sc, ec, mark.label, mark.primary)]
    segs = [_Segment(sl, sc, lines.get(sl).nchars, "", mark.primary)]
    if el - sl + 1 <= MAX_FULL_SPAN_LINES:
        for ln in range(sl + 1, el):
            info = lines.get(ln)
            if info.first_nonblank < info.nchars:
                segs.append(_Segment(ln, info.first_nonblank, info.nchars, "", mark.primary))
    segs.append(_Segment(el, lines.get(el).first_nonblank, ec, mark.label, mark.primary))
    return segs


def _location(path: str, span: Span, lines: _Lines | None) -> str:
    if lines is None:
        return f"{path}:{span.start.line + 1}:{span.start.col_utf16 + 1}"
    line = min(span.start.line, lines.last)
    return f"{path}:{line + 1}:{lines.char_index(line, span.start.col_byte) + 1}"


# --- one diagnostic ---------------------------------------------------------------------------
class _Group(NamedTuple):
    path: str
    lines: _Lines | None
    marks: list[_Mark]
    segments: list[_Segment]


def _groups(d: Diagnostic, sources: Mapping[str, SourceFile]) -> list[_Group]:
    by_path: dict[str, list[_Mark]] = {d.path: [_Mark(d.span, "", True)]}
    for rel in d.related:
        by_path.setdefault(rel.path or d.path, []).append(_Mark(rel.span, rel.message, False))
    groups: list[_Group] = []
    for path, marks in by_path.items():
        src = sources.get(path)
        if src is not None and any(_beyond(m.span, src) for m in marks):
            src = None  # the text changed since the check: a snippet would mislead
        lines = _Lines(src) if src is not None else None
        segs = [s for m in marks for s in _segments(lines, m)] if lines is not None else []
        groups.append(_Group(path, lines, marks, segs))
    return groups


def _beyond(span: Span, src: SourceFile) -> bool:
    return span.end.offset > len(src.data) or span.end.line >= src.line_count


def _fix_text(fix: Fix, src: SourceFile | None) -> str:
    text = fix.title
    if len(fix.edits) == 1:
        edit = fix.edits[0]
        new = edit.new_text
        old = None if src is None or _beyond(edit.span, src) else src.snippet(edit.span)

        def short(s: str) -> bool:
            return "\n" not in s and "\r" not in s and len(s) <= MAX_INLINE_EDIT

        detail = ""
        if short(new) and (old is None or short(old)):
            if edit.span.is_empty or old == "":
                detail = f"insert `{new}`" if new else ""
            elif old is not None:
                detail = f"replace `{old}` with `{new}`" if new else f"remove `{old}`"
            elif new:
                detail = f"replace with `{new}`"
        if detail and detail != text:  # a title that already shows the edit says it once
            text = f"{text}: {detail}"
    if fix.applicability is Applicability.UNSAFE:
        text += " (unsafe fix)"
    return text


def render_diagnostic(
    d: Diagnostic, sources: Mapping[str, SourceFile], *, color: bool = False
) -> str:
    """One diagnostic as a block of lines ending in a newline."""
    paint = _Paint(color)
    level = d.severity.value
    groups = _groups(d, sources)
    shown_max = max((s.line for g in groups for s in g.segments), default=0)
    width = len(str(shown_max + 1))
    pad = " " * width
    gutter = paint(f"{pad} |", "gutter")

    out = [
        paint(f"{level}[{d.code}]", level) + paint(f": {_clean(d.message)}", "bold")
    ]
    for i, group in enumerate(groups):
        if i:
            out.append(gutter)
        if group.lines is None:
            for j, mark in enumerate(group.marks):
                if j:
                    out.append(gutter)
                arrow = paint(f"{pad}-->", "gutter")
                out.append(f"{arrow} {_location(group.path, mark.span, None)}")
                if mark.label:
                    out.append(f"{gutter} " + paint(f"- {_clean(mark.label)}", "secondary"))
            continue
        arrow = paint(f"{pad}-->", "gutter")
        out.append(f"{arrow} {_location(group.path, group.marks[0].span, group.lines)}")
        out.append(gutter)
        out.extend(_snippet(group.lines, group.segments, width, paint, level))

    tail = [f"{pad} {paint('=', 'gutter')} {paint('note', 'bold')}: {_indent(n, width)}"
            for n in d.notes]
    own = sources.get(d.path)
    tail += [f"{pad} {paint('=', 'gutter')} {paint('help', 'help')}: {_clean(_fix_text(f, own))}"
             for f in d.fixes]
    if tail:
        out.append(gutter)
        out.extend(tail)
    return "\n".join(out) + "\n"


def _indent(note: str, width: int) -> str:
    """Continuation lines of a multi-line note line up under its first line."""
    return _clean(note).replace("\n", "\n" + " " * (width + 9))


def _snippet(
    lines: _Lines, segments: list[_Segment], width: int, paint: _Paint, level: str
) -> list[str]:
    gutter = paint(f"{' ' * width} |", "gutter")

    def source_row(ln: int) -> str:
        number = paint(f"{ln + 1:>{width}} |", "gutter")
        shown = lines.get(ln).shown
        return f"{number} {shown}" if shown else number

    out: list[str] = []
    by_line: dict[int, list[_Segment]] = {}
    for seg in segments:
        by_line.setdefault(seg.line, []).append(seg)
    prev: int | None = None
    for ln in sorted(by_line):
        if prev is not None:
            if ln - prev == 2:
                out.append(source_row(prev + 1))
            elif ln - prev > 2:
                out.append(paint("...", "gutter"))
        out.append(source_row(ln))
        cols = lines.get(ln).cols
        for seg in sorted(by_line[ln], key=lambda s: (not s.primary, s.start, s.end)):
            start = cols[seg.start]
            count = max(1, cols[seg.end] - start)
            marker = ("^" if seg.primary else "-") * count
            label = f" {_clean(seg.label)}" if seg.label else ""
            style = level if seg.primary else "secondary"
            out.append(f"{gutter} {' ' * start}" + paint(marker + label, style))
        prev = ln
    return out


# --- many diagnostics -----------------------------------------------------------------------
def render_text(
    diags: Iterable[Diagnostic],
    sources: Mapping[str, SourceFile] | None = None,
    *,
    color: bool = False,
) -> str:
    """All diagnostics, in the order given, separated by blank lines ("" for none).

    `sources` maps a diagnostic's path to its text; a path without one still renders,
    without the snippet.
    """
    srcs = sources or {}
    return "\n".join(render_diagnostic(d, srcs, color=color) for d in diags)


class Summary(NamedTuple):
    """Counts shared by the text summary line and the JSON `summary` object."""

    errors: int = 0
    warnings: int = 0
    infos: int = 0
    hints: int = 0
    files: int = 0
    fixable: int = 0
    """Diagnostics with at least one safe fix, which can be applied without review."""

    @property
    def total(self) -> int:
        return self.errors + self.warnings + self.infos + self.hints


def summarize(diags: Iterable[Diagnostic]) -> Summary:
    counts = dict.fromkeys(Severity, 0)
    paths: set[str] = set()
    fixable = 0
    for d in diags:
        counts[d.severity] += 1
        paths.add(d.path)
        if any(f.applicability is Applicability.SAFE for f in d.fixes):
            fixable += 1
    return Summary(
        errors=counts[Severity.ERROR],
        warnings=counts[Severity.WARNING],
        infos=counts[Severity.INFO],
        hints=counts[Severity.HINT],
        files=len(paths),
        fixable=fixable,
    )


def _plural(n: int, word: str, plural: str | None = None) -> str:
    return f"{n} {word if n == 1 else (plural or word + 's')}"


def render_summary(diags: Iterable[Diagnostic], *, color: bool = False) -> str:
    """One line such as `error: 2 errors, 1 warning in 3 files` (no trailing newline).

    The prefix is the most severe level present, so a CI log shows at a glance
    whether the run failed.
    """
    s = summarize(diags)
    if s.total == 0:
        return "no problems found"
    parts = [
        _plural(n, word, plural)
        for n, word, plural in (
            (s.errors, "error", None),
            (s.warnings, "warning", None),
            (s.infos, "info", "info"),
            (s.hints, "hint", None),
        )
        if n
    ]
    if s.errors:
        level = "error"
    elif s.warnings:
        level = "warning"
    elif s.infos:
        level = "info"
    else:
        level = "hint"
    paint = _Paint(color)
    return f"{paint(level, level)}{paint(':', 'bold')} {', '.join(parts)} in " + _plural(
        s.files, "file"
    )


def render_statistics(diags: Iterable[Diagnostic]) -> str:
    """A count per code, most frequent first, as `ruff --statistics` prints it.

        3  CK306  [*] wgmma-not-waited
        1  CK201      smem-overflow

    `[*]` marks a code whose every finding here has a safe fix (`cake check --fix` removes
    them all).  Empty when there is nothing to count.
    """
    counts: dict[str, int] = {}
    fixable: dict[str, bool] = {}
    for d in diags:
        counts[d.code] = counts.get(d.code, 0) + 1
        safe = any(f.applicability is Applicability.SAFE and f.edits for f in d.fixes)
        fixable[d.code] = fixable.get(d.code, True) and safe
    if not counts:
        return ""
    width = len(str(max(counts.values())))
    code_width = max(len(c) for c in counts)
    rows = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    lines = []
    for code, n in rows:
        rule = lookup(code)
        mark = "[*]" if fixable[code] else "   "
        lines.append(f"{n:>{width}}  {code:<{code_width}}  {mark} "
                     f"{rule.name if rule else ''}".rstrip())
    return "\n".join(lines)
