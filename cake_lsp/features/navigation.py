"""Go to definition, find references and document highlights, for every kind of symbol:
constants, dims, parameters, buffers, pipelines, barriers, fragments and roles."""

from __future__ import annotations

from typing import TYPE_CHECKING

from lsprotocol import types as lsp

from cake_core.ide.index import Occurrence
from cake_core.source import SourceFile

if TYPE_CHECKING:
    from cake_lsp.server import CakeLanguageServer


async def _lookup(ls: CakeLanguageServer, uri: str, pos: lsp.Position
                  ) -> tuple[SourceFile, Occurrence | None, list[Occurrence]]:
    """The occurrence under the cursor and every occurrence of its symbol."""
    doc, result = await ls.current(uri)
    index = await ls.index(doc, result)
    occ = index.occurrence_at(ls.offset(result.source, pos))
    return result.source, occ, index.references(occ.symbol) if occ is not None else []


async def definition(ls: CakeLanguageServer,
                     params: lsp.DefinitionParams) -> lsp.Location | None:
    source, occ, _ = await _lookup(ls, params.text_document.uri, params.position)
    if occ is None:
        return None
    return lsp.Location(uri=params.text_document.uri,
                        range=ls.codec.range(source, occ.symbol.span))


async def references(ls: CakeLanguageServer,
                     params: lsp.ReferenceParams) -> list[lsp.Location]:
    uri = params.text_document.uri
    source, _, occs = await _lookup(ls, uri, params.position)
    return [lsp.Location(uri=uri, range=ls.codec.range(source, o.span)) for o in occs
            if params.context.include_declaration or not o.definition]


async def highlight(ls: CakeLanguageServer,
                    params: lsp.DocumentHighlightParams) -> list[lsp.DocumentHighlight]:
    source, _, occs = await _lookup(ls, params.text_document.uri, params.position)
    return [lsp.DocumentHighlight(range=ls.codec.range(source, o.span),
                                  kind=lsp.DocumentHighlightKind.Write if o.definition
                                  else lsp.DocumentHighlightKind.Read) for o in occs]


def register(server: CakeLanguageServer) -> None:
    server.feature(lsp.TEXT_DOCUMENT_DEFINITION)(definition)
    server.feature(lsp.TEXT_DOCUMENT_REFERENCES)(references)
    server.feature(lsp.TEXT_DOCUMENT_DOCUMENT_HIGHLIGHT)(highlight)
