"""Text synchronization: open, change (incremental), save, close."""

from __future__ import annotations

from typing import TYPE_CHECKING

from lsprotocol import types as lsp

from cake_lsp.documents import UnknownDocument

if TYPE_CHECKING:
    from cake_lsp.server import CakeLanguageServer


def did_open(ls: CakeLanguageServer, params: lsp.DidOpenTextDocumentParams) -> None:
    td = params.text_document
    ls.checker.schedule(ls.documents.open(td.uri, td.text, td.version))


def did_change(ls: CakeLanguageServer, params: lsp.DidChangeTextDocumentParams) -> None:
    try:
        doc = ls.documents.get(params.text_document.uri)
    except UnknownDocument:
        return  # a change to a document that was never opened: nothing to update
    doc.apply_changes(params.content_changes, params.text_document.version, ls.codec)
    ls.checker.schedule(doc)


def did_close(ls: CakeLanguageServer, params: lsp.DidCloseTextDocumentParams) -> None:
    doc = ls.documents.close(params.text_document.uri)
    if doc is not None:
        ls.checker.close(doc)


def did_save(ls: CakeLanguageServer, params: lsp.DidSaveTextDocumentParams) -> None:
    if ls.settings.simulate_on_save:
        ls.window_log_message(lsp.LogMessageParams(
            type=lsp.MessageType.Info,
            message="CAKE: simulateOnSave is set, but the simulator is not available in "
                    "this version"))


def register(server: CakeLanguageServer) -> None:
    server.feature(lsp.TEXT_DOCUMENT_DID_OPEN)(did_open)
    server.feature(lsp.TEXT_DOCUMENT_DID_CHANGE)(did_change)
    server.feature(lsp.TEXT_DOCUMENT_DID_CLOSE)(did_close)
    server.feature(lsp.TEXT_DOCUMENT_DID_SAVE)(did_save)
