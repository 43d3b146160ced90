"""Source text and the positions every diagnostic points at.

Tree-sitter counts in UTF-8 bytes, LSP in UTF-16 code units (by default), SARIF in
UTF-16 code units with 1-based lines, and people in characters.  All conversions
live here so that no other module ever does column arithmetic.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

BOM = "\ufeff"


def display_path(path: Path) -> str:
    """The path as a user reads it: relative to the working directory when it lies under
    it (so reports stay short and stable from run to run), else as given."""
    try:
        return path.resolve().relative_to(Path.cwd().resolve()).as_posix()
    except ValueError:
        return path.as_posix()


class Position(NamedTuple):
    """A point in a source file.

    `line` is 0-based; `col_byte` counts UTF-8 bytes and `col_utf16` UTF-16 code units
    from the start of the line; `offset` is the UTF-8 byte offset from the start of
    the text (after any BOM).  A NamedTuple: a parse builds tens of thousands of these,
    and a tuple is several times cheaper to make than a frozen dataclass; ordering is by
    offset first.
    """

    offset: int
    line: int
    col_byte: int
    col_utf16: int


class Span(NamedTuple):
    """A half-open range [start, end) of source text."""

    start: Position
    end: Position

    @property
    def is_empty(self) -> bool:
        return self.start.offset == self.end.offset

    def cover(self, other: Span) -> Span:
        """The smallest span holding both spans."""
        return Span(min(self.start, other.start), max(self.end, other.end))


def _encode(text: str) -> bytes:
    return text.encode("utf-8", errors="surrogatepass")


@dataclass(slots=True)
class SourceFile:
    """A .cake text with its byte encoding and line table.

    `path` is the display path (repository-relative where known); `uri` is kept for
    the language server.  `decode_errors` lists byte offsets of bytes that were not
    valid UTF-8 when the file was read from disk (they became U+FFFD).
    """

    text: str
    path: str = "<input>"
    decode_errors: tuple[int, ...] = ()
    had_bom: bool = False
    data: bytes = field(init=False, repr=False)
    _line_starts: list[int] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if self.text.startswith(BOM):
            self.text = self.text[1:]
            self.had_bom = True
        self.data = _encode(self.text)
        starts = [0]
        data = self.data
        i = data.find(b"\n")
        while i != -1:
            starts.append(i + 1)
            i = data.find(b"\n", i + 1)
        self._line_starts = starts

    # -- construction -------------------------------------------------------------
    @classmethod
    def from_bytes(cls, raw: bytes, path: str = "<input>") -> SourceFile:
        """Decode bytes leniently, remembering where the invalid UTF-8 was."""
        had_bom = raw.startswith(b"\xef\xbb\xbf")
        if had_bom:
            raw = raw[3:]
        try:
            text = raw.decode("utf-8")
            errors: tuple[int, ...] = ()
        except UnicodeDecodeError:
            text, errors = _decode_lenient(raw)
        src = cls(text, path, errors)
        src.had_bom = had_bom
        return src

    @classmethod
    def read(cls, path: Path, display: str | None = None) -> SourceFile:
        return cls.from_bytes(path.read_bytes(), display or str(path))

    # -- queries --------------------------------------------------------------------
    @property
    def line_starts(self) -> list[int]:
        """Byte offset of the start of each line (read-only: shared, not copied)."""
        return self._line_starts

    @property
    def line_count(self) -> int:
        return len(self._line_starts)

    def line_text(self, line: int) -> str:
        """The text of a 0-based line without its line terminator."""
        if line < 0 or line >= len(self._line_starts):
            return ""
        start = self._line_starts[line]
        end = self._line_starts[line + 1] if line + 1 < len(self._line_starts) else len(self.data)
        raw = self.data[start:end].rstrip(b"\n").rstrip(b"\r")
        return raw.decode("utf-8", errors="replace")

    def position(self, offset: int) -> Position:
        """The position of a UTF-8 byte offset (clamped to the text)."""
        offset = max(0, min(offset, len(self.data)))
        line = bisect.bisect_right(self._line_starts, offset) - 1
        start = self._line_starts[line]
        prefix = self.data[start:offset]
        if prefix.isascii():
            utf16 = len(prefix)
        else:
            utf16 = _utf16_len(prefix.decode("utf-8", errors="surrogatepass"))
        return Position(offset, line, offset - start, utf16)

    def span(self, start: int, end: int) -> Span:
        """The span of the UTF-8 byte range [start, end)."""
        return Span(self.position(start), self.position(max(start, end)))

    def offset_of(self, line: int, col_utf16: int) -> int:
        """The byte offset of an LSP (line, UTF-16 column) position, clamped to the line."""
        if line < 0:
            return 0
        if line >= len(self._line_starts):
            return len(self.data)
        start = self._line_starts[line]
        text = self.line_text(line)
        units = 0
        nbytes = 0
        for ch in text:
            if units >= col_utf16:
                break
            units += 2 if ord(ch) > 0xFFFF else 1
            nbytes += len(_encode(ch))
        return start + nbytes

    def offset_of_char(self, char_index: int) -> int:
        """The byte offset of a Python string index into `text`."""
        return len(_encode(self.text[:char_index]))

    def snippet(self, span: Span) -> str:
        return self.data[span.start.offset : span.end.offset].decode("utf-8", errors="replace")

    @property
    def whole(self) -> Span:
        return self.span(0, len(self.data))


def _utf16_len(s: str) -> int:
    return sum(2 if ord(c) > 0xFFFF else 1 for c in s)


def _decode_lenient(raw: bytes) -> tuple[str, tuple[int, ...]]:
    """Decode with U+FFFD replacements and report the byte offsets that were replaced.

    The offsets refer to the decoded text's UTF-8 encoding, which is what every span
    uses after decoding.
    """
    out: list[str] = []
    bad: list[int] = []
    pos = 0
    out_bytes = 0
    while pos < len(raw):
        try:
            chunk = raw[pos:].decode("utf-8")
            out.append(chunk)
            break
        except UnicodeDecodeError as err:
            good = raw[pos : pos + err.start].decode("utf-8")
            out.append(good)
            out_bytes += err.start
            bad.append(out_bytes)
            out.append("\ufffd")
            out_bytes += 3
            pos += err.end
    return "".join(out), tuple(bad)
