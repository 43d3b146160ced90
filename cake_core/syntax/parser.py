"""`.cake` text -> CAKE AST + diagnostics, through tree-sitter, never executing the text.

`parse` always returns a `ParseResult`: whatever the input (binary junk, a megabyte,
NULs, invalid UTF-8, 10,000 nested parentheses) problems become diagnostics, never
exceptions.  The steps:

1. Encoding: NUL characters, invalid UTF-8 (`SourceFile.decode_errors`) and lone
   surrogates are CK003; NULs and surrogates are blanked to spaces in the buffer handed
   to tree-sitter (same length, so every offset stays valid).
2. tree-sitter parses the buffer.  If it found errors, `recovery` reports them (CK001) and
   repairs the mechanical ones (missing `:`, brackets, unterminated strings, a comma
   missing from a target list) in a copy of the text that is parsed again, so the
   statements around an error keep their AST.
3. `convert` builds the AST from the tree, reporting constructs outside the subset (CK002).

`ParseResult.tree` is the tree of the text as written (before any repair; with NULs
blanked), which is what incremental re-parsing needs.  `reparse` re-uses it for an edit,
and re-uses the AST of every statement the edit did not touch (`reuse.py`).  When the new
tree has an error it falls back to a full parse, so an incremental result always equals
`parse` of the same text.

Span conventions: a parenthesized expression has the span of what is inside the
parentheses (as in Python's `ast`); a `FunctionDef` spans its decorators too; a rejected
compound statement (`while`, `class`, ...) is reported at its header, up to the colon.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass, field, replace

import tree_sitter_python
from tree_sitter import Language, Parser, Tree
from tree_sitter import Node as TSNode

from cake_core.diagnostics.codes import INTERNAL_ERROR, INVALID_ENCODING, SYNTAX_ERROR
from cake_core.diagnostics.model import Diagnostic, sort_diagnostics
from cake_core.source import SourceFile
from cake_core.syntax import ast
from cake_core.syntax.convert import Converter
from cake_core.syntax.expressions import MAX_REPORTED
from cake_core.syntax.positions import PositionIndex
from cake_core.syntax.recovery import (
    PatchMap,
    apply_repairs,
    error_diagnostics,
    error_ranges,
    find_repairs,
    flaw_diagnostic,
)
from cake_core.syntax.reuse import Carried, Edit, Key, Origin, Record, Reuse, carry
from cake_core.syntax.tokens import Flaw

__all__ = ["Document", "ParseResult", "parse", "reparse"]

MAX_DIAGNOSTICS = 500
"""A parse reports at most this many problems (past it the text is not a kernel anyway)."""
_MAX_ENCODING_DIAGNOSTICS = 20
_MAX_REPAIRS = 200
_BLANKED = re.compile(rb"\x00+|(?:\xed[\xa0-\xbf][\x80-\xbf])+")
"""NUL runs and UTF-8-encoded lone surrogates (which valid UTF-8 never contains)."""

_LANGUAGE = Language(tree_sitter_python.language())
_local = threading.local()


def _parser() -> Parser:
    """One tree-sitter parser per thread (a Parser is not safe to share between threads)."""
    parser: Parser | None = getattr(_local, "parser", None)
    if parser is None:
        parser = Parser(_LANGUAGE)
        _local.parser = parser
    return parser


@dataclass
class ParseResult:
    source: SourceFile
    module: ast.Module
    diagnostics: list[Diagnostic]
    """Syntax (CK001), subset (CK002) and encoding (CK003) problems, sorted by position."""
    tree: Tree
    """The tree-sitter tree of `source` as written, kept for incremental re-parsing."""
    _records: dict[Key, Record] | Carried | None = field(default=None, repr=False, compare=False)
    """What `reparse` may re-use of this parse (kept for clean parses only)."""
    moved: dict[int, Origin] = field(default_factory=dict, repr=False, compare=False)
    """Statements taken from earlier parses and moved: id(statement) -> (the statement
    as converted, bytes, lines).  The type-check cache reads it to know, without
    comparing them node by node, that a kernel is one it checked, only moved."""

    @property
    def has_errors(self) -> bool:
        return any(d.severity.value == "error" for d in self.diagnostics)


def parse(source: SourceFile) -> ParseResult:
    """Parse a whole source file."""
    try:
        return _build(source, None)
    except Exception as err:  # a fault here must be a diagnostic, never a traceback
        return _internal_error(source, err)


def reparse(old: ParseResult, start_byte: int, old_end_byte: int, new_text: str) -> ParseResult:
    """Parse `old.source` with bytes [start_byte, old_end_byte) replaced by `new_text`,
    re-using the old tree (offsets are UTF-8 byte offsets into `old.source.data`)."""
    try:
        return _reparse(old, start_byte, old_end_byte, new_text)
    except Exception:  # a fault in the incremental path: a full parse still gives the answer
        return parse(_edited(old.source, start_byte, old_end_byte, new_text))


class Document:
    """An open file in the language server: its current text and latest parse."""

    def __init__(self, text: str, path: str = "<input>") -> None:
        self.path = path
        self.result: ParseResult = parse(SourceFile(text, path))

    @property
    def text(self) -> str:
        return self.result.source.text

    @property
    def source(self) -> SourceFile:
        return self.result.source

    def apply_change(self, start_line: int, start_utf16: int, end_line: int, end_utf16: int,
                     new_text: str) -> ParseResult:
        """Apply an LSP range edit (0-based lines, UTF-16 columns) incrementally."""
        source = self.result.source
        start = source.offset_of(start_line, start_utf16)
        end = source.offset_of(end_line, end_utf16)
        if end < start:
            start, end = end, start
        self.result = reparse(self.result, start, end, new_text)
        return self.result

    def replace_all(self, text: str) -> ParseResult:
        """Replace the whole text (an LSP full-document sync)."""
        self.result = parse(SourceFile(text, self.path))
        return self.result


# --- implementation -----------------------------------------------------------------------
def _build(source: SourceFile, tree: Tree | None, reuse: Reuse | None = None) -> ParseResult:
    """Parse `source`; `tree` is its already-parsed tree when the caller has one, and
    `reuse` the previous parse's statements when that tree came from an edit."""
    data = source.data
    index = PositionIndex(source)
    diagnostics, blanked = _encoding_problems(source, index)
    parse_data = blanked if blanked is not None else data
    if tree is None:
        tree = _parser().parse(parse_data)
    root = tree.root_node
    records: dict[Key, Record] | None = None
    if not root.has_error:
        converter = Converter(source, parse_data, index=index)
        if blanked is None:
            converter.reuse = reuse
            converter.records = records = {}
        module = converter.module(root)
        diagnostics.extend(converter.diagnostics)
        if len(converter.diagnostics) >= MAX_REPORTED:
            records = None
    else:
        flaws = find_repairs(parse_data, error_ranges(root), root)
        if flaws and len(flaws) <= _MAX_REPAIRS:
            repaired, patch_map = apply_repairs(parse_data, flaws)
            converter = Converter(source, repaired, patch_map, index)
            if reuse is not None and blanked is None:
                converter.reuse = reuse.through(patch_map, parse_data)
            diagnostics.extend(flaw_diagnostic(f, index.span) for f in flaws)
            fixed_root = _parse_repaired(tree, parse_data, repaired, patch_map)
        else:
            # No repair, or so many that the text is not code: one parse is enough.
            diagnostics.extend(flaw_diagnostic(f, index.span) for f in flaws[:MAX_DIAGNOSTICS])
            converter = Converter(source, parse_data, index=index)
            if reuse is not None and blanked is None:
                converter.reuse = reuse.through(PatchMap((), (), ()), parse_data)
            fixed_root = root
        later = error_diagnostics(fixed_root, converter.data, converter.span_bytes)
        module = converter.module(fixed_root)
        diagnostics.extend(_outside_guesses(later + converter.diagnostics, flaws))
    if blanked is not None or source.decode_errors:
        diagnostics = _drop_syntax_errors_on_bad_bytes(diagnostics)
    path = source.path
    final = sort_diagnostics([d if d.path == path else d.with_path(path) for d in diagnostics])
    if len(final) > MAX_DIAGNOSTICS:
        last = final[MAX_DIAGNOSTICS]
        final = final[:MAX_DIAGNOSTICS]
        final.append(replace(last, message="further problems in this file are not shown",
                             notes=(), fixes=(), related=()))
    moved = reuse.moved if reuse is not None else {}
    return ParseResult(source, module, final, tree, records, moved)


def _reparse(old: ParseResult, start: int, old_end: int, new_text: str) -> ParseResult:
    old_source = old.source
    old_data = old_source.data
    start = _char_boundary(old_data, max(0, min(start, len(old_data))))
    old_end = _char_boundary(old_data, max(start, min(old_end, len(old_data))))
    inserted = new_text.encode("utf-8", errors="surrogatepass")
    new_data = old_data[:start] + inserted + old_data[old_end:]
    delta = len(inserted) - (old_end - start)
    errors = tuple(
        o if o < start else o + delta
        for o in old_source.decode_errors
        if o + 3 <= start or o >= old_end
    )
    new_source = SourceFile(new_data.decode("utf-8", errors="surrogatepass"), old_source.path,
                            errors)
    new_source.had_bom = new_source.had_bom or old_source.had_bom
    if (
        new_source.data != new_data
        or any(d.code == INTERNAL_ERROR.code for d in old.diagnostics)
        or _BLANKED.search(old_data) is not None
        or _BLANKED.search(new_data) is not None
    ):
        return parse(new_source)
    tree = old.tree.copy()
    start_pos = old_source.position(start)
    end_pos = old_source.position(old_end)
    new_end_pos = new_source.position(start + len(inserted))
    tree.edit(
        start_byte=start,
        old_end_byte=old_end,
        new_end_byte=start + len(inserted),
        start_point=(start_pos.line, start_pos.col_byte),
        old_end_point=(end_pos.line, end_pos.col_byte),
        new_end_point=(new_end_pos.line, new_end_pos.col_byte),
    )
    new_tree = _parser().parse(new_data, tree)
    edit = Edit(start, old_end, start + len(inserted), start_pos.line, end_pos.line,
                new_end_pos.line)
    reuse = Reuse(old._records, edit) if old._records is not None else None
    if new_tree.root_node.has_error:
        # Error recovery may differ between incremental and full parses; a full parse
        # keeps `reparse` and `parse` equal.
        result = _build(new_source, None, reuse)
        if result._records is None:
            result._records = carry(old._records, edit)
        return result
    return _build(new_source, new_tree, reuse)


def _outside_guesses(found: list[Diagnostic], flaws: list[Flaw]) -> list[Diagnostic]:
    """Drop what was found between an unclosed bracket and the closer put in for it:
    where the author meant it to close is a guess, and a wrong guess (`f(a, (b, c=1)`
    closed at the end) makes echoes of the one slip already reported."""
    guessed = [(f.start, f.at) for f in flaws if f.kind == "unclosed"]
    if not guessed:
        return found
    return [d for d in found
            if not any(lo <= d.span.start.offset <= hi for lo, hi in guessed)]


def _parse_repaired(tree: Tree, data: bytes, repaired: bytes, patches: PatchMap) -> TSNode:
    """The tree of the repaired buffer, parsed incrementally from the tree of `data`.

    A few inserted brackets or colons leave most of the tree valid, so tree-sitter
    re-parses only around them.  Where the repaired text still holds an error a full
    parse is made instead: error recovery may differ between the two, and `reparse`
    must equal `parse`.
    """
    edited = tree.copy()
    for at, flaw in zip(patches.starts, patches.flaws, strict=True):
        removed = data[flaw.at : flaw.at + flaw.remove]
        start = _point(repaired, at)
        lines = removed.count(b"\n")
        old_col = (len(removed) - removed.rfind(b"\n") - 1) if lines else start[1] + len(removed)
        edited.edit(
            start_byte=at,
            old_end_byte=at + flaw.remove,
            new_end_byte=at + len(flaw.insert),
            start_point=start,
            old_end_point=(start[0] + lines, old_col),
            new_end_point=_point(repaired, at + len(flaw.insert)),
        )
    root = _parser().parse(repaired, edited).root_node
    if root.has_error:
        root = _parser().parse(repaired).root_node
    return root


def _point(data: bytes, offset: int) -> tuple[int, int]:
    """tree-sitter's (row, byte column) of `offset`."""
    return data.count(b"\n", 0, offset), offset - (data.rfind(b"\n", 0, offset) + 1)


def _edited(source: SourceFile, start: int, end: int, new_text: str) -> SourceFile:
    data = source.data
    start = _char_boundary(data, max(0, min(start, len(data))))
    end = _char_boundary(data, max(start, min(end, len(data))))
    new = data[:start] + new_text.encode("utf-8", errors="surrogatepass") + data[end:]
    try:
        text = new.decode("utf-8", errors="surrogatepass")
    except UnicodeDecodeError:
        text = new.decode("utf-8", errors="replace")
    return SourceFile(text, source.path)


def _char_boundary(data: bytes, offset: int) -> int:
    """Move an offset back to the start of the UTF-8 character it falls in."""
    while 0 < offset < len(data) and 0x80 <= data[offset] < 0xC0:
        offset -= 1
    return offset


def _encoding_problems(source: SourceFile,
                       index: PositionIndex) -> tuple[list[Diagnostic], bytes | None]:
    """CK003 diagnostics, and the buffer with NULs and surrogates blanked (None if clean)."""
    data = source.data
    runs: list[tuple[int, int, str]] = []
    blanked: bytes | None = None
    if b"\x00" in data or b"\xed" in data:
        buf = bytearray(data)
        for m in _BLANKED.finditer(data):
            buf[m.start() : m.end()] = b" " * (m.end() - m.start())
            what = "NUL character" if data[m.start()] == 0 else "unpaired surrogate"
            runs.append((m.start(), m.end(), what))
        if runs:
            blanked = bytes(buf)
    for start, end in _runs(source.decode_errors):
        runs.append((start, end, "invalid UTF-8"))
    runs.sort()
    out: list[Diagnostic] = []
    for start, end, what in runs[:_MAX_ENCODING_DIAGNOSTICS]:
        message = (
            "invalid UTF-8 bytes (shown as U+FFFD)" if what == "invalid UTF-8"
            else f"{what}{'s' if end - start > (1 if what.startswith('NUL') else 3) else ''} "
            "in the text"
        )
        out.append(INVALID_ENCODING.at(index.span(start, end), message))
    if len(runs) > _MAX_ENCODING_DIAGNOSTICS:
        start, end, _ = runs[_MAX_ENCODING_DIAGNOSTICS]
        out.append(INVALID_ENCODING.at(
            index.span(start, end),
            f"{len(runs) - _MAX_ENCODING_DIAGNOSTICS} more encoding problems not shown",
        ))
    return out, blanked


def _runs(offsets: tuple[int, ...]) -> list[tuple[int, int]]:
    """Merge the 3-byte U+FFFD replacements that follow each other into ranges."""
    out: list[tuple[int, int]] = []
    for offset in sorted(offsets):
        if out and out[-1][1] == offset:
            out[-1] = (out[-1][0], offset + 3)
        else:
            out.append((offset, offset + 3))
    return out


def _drop_syntax_errors_on_bad_bytes(diagnostics: list[Diagnostic]) -> list[Diagnostic]:
    """A CK001 inside a CK003 range repeats the encoding problem; keep only the CK003."""
    bad = [(d.span.start.offset, d.span.end.offset) for d in diagnostics
           if d.code == INVALID_ENCODING.code]
    if not bad:
        return diagnostics
    def covered(d: Diagnostic) -> bool:
        s = d.span.start.offset
        return any(lo <= s < hi for lo, hi in bad)
    return [d for d in diagnostics if d.code != SYNTAX_ERROR.code or not covered(d)]


def _internal_error(source: SourceFile, err: BaseException) -> ParseResult:
    diag = INTERNAL_ERROR.at(
        source.span(0, 0),
        f"the parser failed on this input ({type(err).__name__}); please report it",
    ).with_path(source.path)
    empty = ast.Module(source.whole, ())
    return ParseResult(source, empty, [diag], _parser().parse(b""))
