"""Every conversion between CAKE's model and the protocol's, in one place.

CAKE counts in UTF-8 byte offsets with 0-based lines (`SourceFile`, `Span`); the protocol
counts columns in the code units the client and server agreed on at initialization
(UTF-16 unless the client offers UTF-8 or UTF-32).  Lines are split at `\\n` only, as
`SourceFile` does and as VS Code and Neovim do: a `\\r` before the `\\n` belongs to the
line ending, a lone `\\r` or U+2028 is text.  No other module does column arithmetic.

Fixes travel in `Diagnostic.data` so that a code-action request can be answered from
what the client sends back: the edits are already in protocol ranges, stamped with the
document version they apply to.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import unquote, urlparse

from lsprotocol import types as lsp

from cake_core.diagnostics.json_format import docs_path
from cake_core.diagnostics.model import Applicability, Diagnostic, Fix, Severity
from cake_core.ide.index import SymbolKind
from cake_core.shipped import RULES_DIR
from cake_core.source import Position, SourceFile, Span

UTF8 = lsp.PositionEncodingKind.Utf8.value
UTF16 = lsp.PositionEncodingKind.Utf16.value
UTF32 = lsp.PositionEncodingKind.Utf32.value


class PositionError(ValueError):
    """A protocol position that lies outside the document."""


class Codec:
    """Positions and ranges in one negotiated encoding ("utf-8", "utf-16" or "utf-32")."""

    def __init__(self, encoding: str | None = UTF16) -> None:
        self.encoding = str(encoding or UTF16)
        if self.encoding not in (UTF8, UTF16, UTF32):
            self.encoding = UTF16

    # -- CAKE -> protocol ------------------------------------------------------------------
    def position(self, source: SourceFile, pos: Position) -> lsp.Position:
        return lsp.Position(line=pos.line, character=self.column(source, pos))

    def column(self, source: SourceFile, pos: Position) -> int:
        """The column of `pos` in this encoding's units."""
        if self.encoding == UTF16:
            return pos.col_utf16
        if self.encoding == UTF8:
            return pos.col_byte
        start = pos.offset - pos.col_byte
        return len(source.data[start:pos.offset].decode("utf-8", errors="surrogatepass"))

    def range(self, source: SourceFile, span: Span) -> lsp.Range:
        return lsp.Range(start=self.position(source, span.start),
                         end=self.position(source, span.end))

    # -- protocol -> CAKE -------------------------------------------------------------------
    def offset(self, source: SourceFile, pos: lsp.Position, *, strict: bool = True) -> int:
        """The byte offset of a protocol position.

        A column past the end of its line means the end of the line (the protocol's
        rule).  A line past the end of the document is an error when `strict` (a request
        about text that is not there) and the end of the text otherwise (an edit that
        appends).
        """
        line, col = pos.line, pos.character
        if line < 0 or col < 0:
            raise PositionError(f"negative position {line}:{col}")
        if line >= source.line_count:
            if strict:
                raise PositionError(f"line {line} is past the end of the document "
                                    f"({source.line_count} lines)")
            return len(source.data)
        start = source.offset_of(line, 0)
        end = source.offset_of(line + 1, 0) - 1 if line + 1 < source.line_count \
            else len(source.data)
        if end > start and source.data[end - 1:end] == b"\r" and end < len(source.data):
            end -= 1  # the "\r" of a "\r\n" ends the line; a lone "\r" is text
        if self.encoding == UTF8:
            offset = min(start + col, end)
            while start < offset < end and 0x80 <= source.data[offset] < 0xC0:
                offset -= 1  # inside a multi-byte character: its start
            return offset
        text = source.data[start:end].decode("utf-8", errors="surrogatepass")
        if self.encoding == UTF32:
            return start + len(text[:col].encode("utf-8", errors="surrogatepass"))
        units = nbytes = 0
        for ch in text:
            if units >= col:
                break
            units += 2 if ord(ch) > 0xFFFF else 1
            nbytes += len(ch.encode("utf-8", errors="surrogatepass"))
        return start + nbytes

    def span(self, source: SourceFile, rng: lsp.Range, *, strict: bool = True) -> Span:
        start = self.offset(source, rng.start, strict=strict)
        end = self.offset(source, rng.end, strict=strict)
        return source.span(min(start, end), max(start, end))


# --- diagnostics -----------------------------------------------------------------------------
_SEVERITY = {
    Severity.ERROR: lsp.DiagnosticSeverity.Error,
    Severity.WARNING: lsp.DiagnosticSeverity.Warning,
    Severity.INFO: lsp.DiagnosticSeverity.Information,
    Severity.HINT: lsp.DiagnosticSeverity.Hint,
}


def severity(s: Severity) -> lsp.DiagnosticSeverity:
    return _SEVERITY[s]


def docs_base_uri() -> str | None:
    """The folder of rule pages this installation ships (the checkout's `docs/rules/`, or the
    wheel's copy of it), as a URI; None when neither is there."""
    return RULES_DIR.as_uri() + "/" if RULES_DIR.is_dir() else None


def docs_url(code: str, base: str | None) -> str | None:
    """The page of a built-in code under `base`, the folder of rule pages."""
    path = docs_path(code)
    if path is None or base is None:
        return None
    return base.rstrip("/") + "/" + PurePosixPath(path).name


def path_of_uri(uri: str) -> str:
    """The file system path of a `file:` URI; other URIs stand for themselves."""
    parsed = urlparse(uri)
    if parsed.scheme == "file":
        return unquote(parsed.path)
    return uri


def uri_of_path(path: str, doc_path: str, doc_uri: str) -> str:
    if path in ("", doc_path):
        return doc_uri
    p = Path(path)
    return p.as_uri() if p.is_absolute() else doc_uri


def diagnostic(d: Diagnostic, source: SourceFile, codec: Codec, *, uri: str, version: int,
               docs_base: str | None, related_support: bool = True) -> lsp.Diagnostic:
    """One CAKE diagnostic as the protocol's, its fixes serialized into `data`."""
    message = d.message
    related: list[lsp.DiagnosticRelatedInformation] | None = None
    if d.related:
        if related_support:
            related = [lsp.DiagnosticRelatedInformation(
                location=lsp.Location(uri=uri_of_path(r.path or d.path, source.path, uri),
                                      range=codec.range(source, r.span)),
                message=r.message) for r in d.related]
        else:
            message += "".join(f"\n{r.message} (line {r.span.start.line + 1})"
                               for r in d.related)
    if d.notes:
        message += "".join(f"\nnote: {n}" for n in d.notes)
    href = docs_url(d.code, docs_base)
    return lsp.Diagnostic(
        range=codec.range(source, d.span),
        message=message,
        severity=severity(d.severity),
        code=d.code,
        code_description=lsp.CodeDescription(href=href) if href else None,
        source=d.source,
        related_information=related,
        data=fix_data(d.fixes, source, codec, version) if d.fixes else None,
    )


def fix_data(fixes: Iterable[Fix], source: SourceFile, codec: Codec,
             version: int) -> dict[str, Any]:
    """Fixes as plain JSON (`Diagnostic.data`): the client hands them back unchanged."""
    return {
        "version": version,
        "fixes": [{
            "title": f.title,
            "applicability": f.applicability.value,
            "edits": [{"range": _range_json(codec.range(source, e.span)), "newText": e.new_text}
                      for e in f.edits],
        } for f in fixes],
    }


def _range_json(r: lsp.Range) -> dict[str, dict[str, int]]:
    return {"start": {"line": r.start.line, "character": r.start.character},
            "end": {"line": r.end.line, "character": r.end.character}}


class FixData:
    """A fix read back from `Diagnostic.data` (validated: the client may send anything)."""

    def __init__(self, title: str, applicability: Applicability,
                 edits: list[lsp.TextEdit]) -> None:
        self.title = title
        self.applicability = applicability
        self.edits = edits


def read_fix_data(data: object) -> tuple[int | None, list[FixData]]:
    """(document version, fixes) from a diagnostic's `data`; ([], None) if it holds none."""
    if not isinstance(data, Mapping):
        return None, []
    version = data.get("version")
    out: list[FixData] = []
    raw_fixes = data.get("fixes")
    for raw in raw_fixes if isinstance(raw_fixes, list) else ():
        try:
            edits = [lsp.TextEdit(range=_read_range(e["range"]), new_text=str(e["newText"]))
                     for e in raw["edits"]]
            out.append(FixData(str(raw["title"]), Applicability(raw["applicability"]), edits))
        except (KeyError, TypeError, ValueError):
            continue
    return (version if isinstance(version, int) else None), out


def _read_range(r: Mapping[str, Mapping[str, int]]) -> lsp.Range:
    return lsp.Range(start=lsp.Position(line=int(r["start"]["line"]),
                                        character=int(r["start"]["character"])),
                     end=lsp.Position(line=int(r["end"]["line"]),
                                      character=int(r["end"]["character"])))


def range_key(r: lsp.Range) -> tuple[int, int, int, int]:
    return (r.start.line, r.start.character, r.end.line, r.end.character)


# --- symbols ---------------------------------------------------------------------------------
_SYMBOL_KIND = {
    SymbolKind.KERNEL: lsp.SymbolKind.Function,
    SymbolKind.CONSTANT: lsp.SymbolKind.Constant,
    SymbolKind.DIM: lsp.SymbolKind.Constant,
    SymbolKind.PARAM: lsp.SymbolKind.Variable,
    SymbolKind.BUFFER: lsp.SymbolKind.Array,
    SymbolKind.PIPELINE: lsp.SymbolKind.Event,
    SymbolKind.BARRIER: lsp.SymbolKind.Event,
    SymbolKind.FRAGMENT: lsp.SymbolKind.Variable,
    SymbolKind.STAGE: lsp.SymbolKind.Variable,
    SymbolKind.LOOP: lsp.SymbolKind.Variable,
    SymbolKind.VALUE: lsp.SymbolKind.Variable,
    SymbolKind.ROLE: lsp.SymbolKind.Namespace,
}

_COMPLETION_KIND = {
    SymbolKind.KERNEL: lsp.CompletionItemKind.Function,
    SymbolKind.CONSTANT: lsp.CompletionItemKind.Constant,
    SymbolKind.DIM: lsp.CompletionItemKind.Constant,
    SymbolKind.PARAM: lsp.CompletionItemKind.Variable,
    SymbolKind.BUFFER: lsp.CompletionItemKind.Variable,
    SymbolKind.PIPELINE: lsp.CompletionItemKind.Event,
    SymbolKind.BARRIER: lsp.CompletionItemKind.Event,
    SymbolKind.FRAGMENT: lsp.CompletionItemKind.Variable,
    SymbolKind.STAGE: lsp.CompletionItemKind.Variable,
    SymbolKind.LOOP: lsp.CompletionItemKind.Variable,
    SymbolKind.VALUE: lsp.CompletionItemKind.Variable,
    SymbolKind.ROLE: lsp.CompletionItemKind.Module,
}


def symbol_kind(kind: SymbolKind) -> lsp.SymbolKind:
    return _SYMBOL_KIND[kind]


def completion_kind(kind: SymbolKind) -> lsp.CompletionItemKind:
    return _COMPLETION_KIND[kind]


def markup(text: str, markdown: bool) -> lsp.MarkupContent:
    """Markdown where the client renders it; the same text as plain text otherwise."""
    if markdown:
        return lsp.MarkupContent(kind=lsp.MarkupKind.Markdown, value=text)
    plain = text.replace("```cake\n", "").replace("```\n", "").replace("```", "")
    return lsp.MarkupContent(kind=lsp.MarkupKind.PlainText, value=plain.replace("`", ""))


def format_bytes(n: int) -> str:
    """A byte count for people: exact, with KiB where that reads better."""
    if n >= 1024 and n % 1024 == 0:
        return f"{n:,} bytes ({n // 1024} KiB)"
    if n >= 1024:
        return f"{n:,} bytes ({n / 1024:.1f} KiB)"
    return f"{n} bytes"


__all__ = ["UTF8", "UTF16", "UTF32", "Codec", "FixData", "PositionError", "completion_kind",
           "diagnostic", "docs_base_uri", "docs_url", "fix_data", "format_bytes", "markup",
           "path_of_uri", "range_key", "read_fix_data", "severity", "symbol_kind",
           "uri_of_path"]
