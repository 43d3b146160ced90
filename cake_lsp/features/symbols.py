"""Document symbols: the outline of a file.

Top-level constants and dims, then each kernel with its parameters, buffers, pipelines
and barriers, and its roles with what they declare (fragments, buffers).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from lsprotocol import types as lsp

from cake_core.ide.index import Symbol, SymbolIndex, SymbolKind
from cake_core.source import SourceFile
from cake_lsp.convert import Codec, symbol_kind

if TYPE_CHECKING:
    from cake_lsp.server import CakeLanguageServer

_KERNEL_LEVEL = {SymbolKind.PARAM, SymbolKind.BUFFER, SymbolKind.PIPELINE, SymbolKind.BARRIER,
                 SymbolKind.FRAGMENT}
_ROLE_LEVEL = {SymbolKind.BUFFER, SymbolKind.PIPELINE, SymbolKind.BARRIER, SymbolKind.FRAGMENT}


async def document_symbols(
    ls: CakeLanguageServer, params: lsp.DocumentSymbolParams
) -> list[lsp.DocumentSymbol] | list[lsp.SymbolInformation]:
    doc, result = await ls.current(params.text_document.uri)
    tree = outline(await ls.index(doc, result), result.source, ls.codec)
    if _hierarchical(ls):
        return tree
    return [lsp.SymbolInformation(name=s.name, kind=s.kind, location=lsp.Location(
        uri=doc.uri, range=s.selection_range), container_name=parent)
        for s, parent in _flatten(tree, None)]


def outline(index: SymbolIndex, source: SourceFile, codec: Codec) -> list[lsp.DocumentSymbol]:
    out = [_node(s, source, codec) for s in index.symbols_of(None)
           if s.kind is not SymbolKind.KERNEL]
    kernels = {s.span.start.offset: s for s in index.symbols_of(None)
               if s.kind is SymbolKind.KERNEL}
    for fn, _ in index.kernels:
        own = [s for s in index.symbols_of(fn.name)
               if fn.span.start.offset <= s.span.start.offset <= fn.span.end.offset]
        roles = [s for s in own if s.kind is SymbolKind.ROLE]
        children = [_node(s, source, codec) for s in own if s.kind in _KERNEL_LEVEL
                    and not any(_inside(s, r) for r in roles)]
        for r in roles:
            inner = [_node(s, source, codec) for s in own
                     if s.kind in _ROLE_LEVEL and _inside(s, r)]
            children.append(_node(r, source, codec, inner))
        children.sort(key=lambda n: (n.range.start.line, n.range.start.character))
        out.append(_node(kernels[fn.name_span.start.offset], source, codec, children))
    return out


def _node(s: Symbol, source: SourceFile, codec: Codec,
          children: list[lsp.DocumentSymbol] | None = None) -> lsp.DocumentSymbol:
    name = s.name if s.kind is not SymbolKind.ROLE else f'role "{s.name}"'
    detail = s.value.type.describe() if s.value is not None else s.kind.value
    return lsp.DocumentSymbol(name=name, kind=symbol_kind(s.kind), detail=detail,
                              range=codec.range(source, s.extent.cover(s.span)),
                              selection_range=codec.range(source, s.span),
                              children=children or None)


def _inside(s: Symbol, role: Symbol) -> bool:
    return role.extent.start.offset <= s.span.start.offset < role.extent.end.offset


def _flatten(nodes: Sequence[lsp.DocumentSymbol], parent: str | None
             ) -> list[tuple[lsp.DocumentSymbol, str | None]]:
    out: list[tuple[lsp.DocumentSymbol, str | None]] = []
    for n in nodes:
        out.append((n, parent))
        out.extend(_flatten(n.children or [], n.name))
    return out


def _hierarchical(ls: CakeLanguageServer) -> bool:
    td = ls.client_capabilities.text_document
    ds = td.document_symbol if td is not None else None
    return ds is not None and bool(ds.hierarchical_document_symbol_support)


def register(server: CakeLanguageServer) -> None:
    server.feature(lsp.TEXT_DOCUMENT_DOCUMENT_SYMBOL)(document_symbols)
