"""Pull diagnostics (`textDocument/diagnostic`), for clients that declare they pull.

The answer always matches the document's current text: the request waits for the
check of the latest version.  A client that sends back the result id it already holds
gets an "unchanged" report.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from lsprotocol import types as lsp

from cake_lsp.checking import result_id

if TYPE_CHECKING:
    from cake_lsp.server import CakeLanguageServer


async def diagnostic(
    ls: CakeLanguageServer, params: lsp.DocumentDiagnosticParams
) -> lsp.RelatedFullDocumentDiagnosticReport | lsp.RelatedUnchangedDocumentDiagnosticReport:
    doc, result = await ls.current(params.text_document.uri)
    rid = result_id(doc.stamp)
    if rid is not None and params.previous_result_id == rid:
        return lsp.RelatedUnchangedDocumentDiagnosticReport(result_id=rid)
    return lsp.RelatedFullDocumentDiagnosticReport(items=ls.lsp_diagnostics(doc, result),
                                                   result_id=rid)


def register(server: CakeLanguageServer) -> None:
    options = lsp.DiagnosticOptions(identifier="cake", inter_file_dependencies=False,
                                    workspace_diagnostics=False)
    server.feature(lsp.TEXT_DOCUMENT_DIAGNOSTIC, options)(diagnostic)
