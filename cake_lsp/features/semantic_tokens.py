"""Semantic tokens: roles, buffers, pipelines and barriers, primitives, as the compiler
sees them (a grammar cannot tell a buffer from a fragment, or `"load"` from a string).

Standard token types keep the default colours of any theme; the modifiers say what kind
of CAKE value a variable is, so a theme or an editor extension can colour buffers,
pipelines and barriers apart.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from lsprotocol import types as lsp

from cake_core.ide.index import SymbolIndex, SymbolKind
from cake_core.source import SourceFile, Span
from cake_lsp.convert import Codec

if TYPE_CHECKING:
    from cake_lsp.server import CakeLanguageServer

TOKEN_TYPES = ["namespace", "variable", "parameter", "function", "method", "event"]
TOKEN_MODIFIERS = ["declaration", "readonly", "defaultLibrary", "buffer", "pipeline",
                   "barrier", "fragment"]
LEGEND = lsp.SemanticTokensLegend(token_types=TOKEN_TYPES, token_modifiers=TOKEN_MODIFIERS)

_T = {name: i for i, name in enumerate(TOKEN_TYPES)}
_M = {name: 1 << i for i, name in enumerate(TOKEN_MODIFIERS)}

_BY_KIND: dict[SymbolKind, tuple[str, int]] = {
    SymbolKind.ROLE: ("namespace", 0),
    SymbolKind.KERNEL: ("function", 0),
    SymbolKind.PARAM: ("parameter", 0),
    SymbolKind.CONSTANT: ("variable", _M["readonly"]),
    SymbolKind.DIM: ("variable", _M["readonly"]),
    SymbolKind.BUFFER: ("variable", _M["buffer"]),
    SymbolKind.PIPELINE: ("event", _M["pipeline"]),
    SymbolKind.BARRIER: ("event", _M["barrier"]),
    SymbolKind.FRAGMENT: ("variable", _M["fragment"]),
    SymbolKind.STAGE: ("variable", 0),
    SymbolKind.LOOP: ("variable", 0),
    SymbolKind.VALUE: ("variable", 0),
}


async def semantic_tokens(ls: CakeLanguageServer,
                          params: lsp.SemanticTokensParams) -> lsp.SemanticTokens:
    doc, result = await ls.current(params.text_document.uri)
    index = await ls.index(doc, result)
    return lsp.SemanticTokens(data=encode(index, result.source, ls.codec))


def encode(index: SymbolIndex, source: SourceFile, codec: Codec) -> list[int]:
    """The protocol's relative encoding: 5 integers per token, in source order."""
    tokens: list[tuple[Span, int, int]] = []
    for o in index.occurrences:
        kind, mods = _BY_KIND[o.symbol.kind]
        tokens.append((o.span, _T[kind], mods | (_M["declaration"] if o.definition else 0)))
    for c in index.calls:
        kind = "method" if c.method else "function"
        tokens.append((c.span, _T[kind], _M["defaultLibrary"]))
    tokens.sort(key=lambda t: t[0].start.offset)
    data: list[int] = []
    prev_line = prev_col = 0
    last_end = -1
    for span, ttype, mods in tokens:
        if span.start.line != span.end.line or span.start.offset < last_end or span.is_empty:
            continue  # tokens are single-line and must not overlap
        last_end = span.end.offset
        line, col = span.start.line, codec.column(source, span.start)
        delta_col = col - prev_col if line == prev_line else col
        data += [line - prev_line, delta_col, codec.column(source, span.end) - col, ttype, mods]
        prev_line, prev_col = line, col
    return data


def register(server: CakeLanguageServer) -> None:
    server.feature(lsp.TEXT_DOCUMENT_SEMANTIC_TOKENS_FULL, LEGEND)(semantic_tokens)
