"""The server as Neovim 0.11 (recorded capabilities) sees it: pulled diagnostics, never
pushed ones, and UTF-8 columns."""

from __future__ import annotations

import pytest
from lsp_support import (
    GEMM,
    RecordingClient,
    change,
    editor_client,
    new_uri,
    open_doc,
    pos,
    pulled,
)
from lsprotocol import types as lsp

from cake_lsp.documents import MAX_DOCUMENT_BYTES

pytestmark = [pytest.mark.asyncio(loop_scope="module"),
              pytest.mark.filterwarnings("error::pytest_lsp.LspSpecificationWarning")]


client = editor_client("neovim")


async def test_neovim_negotiates_utf8_positions(client: RecordingClient) -> None:
    assert client.init_result.capabilities.position_encoding == lsp.PositionEncodingKind.Utf8


async def test_diagnostics_are_pulled_on_open_and_after_edits(client: RecordingClient):
    uri = new_uri()
    open_doc(client, uri, GEMM)
    assert await pulled(client, uri) == []
    at = pos(GEMM, "regs=40", 4, encoding="utf-8")
    change(client, uri, 2, [(lsp.Range(start=at, end=at), "x")])
    [d] = await pulled(client, uri)
    assert d.code == "CK103" and "regsx" in d.message
    change(client, uri, 3, [(lsp.Range(start=at, end=lsp.Position(
        line=at.line, character=at.character + 1)), "")])
    assert await pulled(client, uri) == []
    assert client.published == [], "a client that pulls must never get pushed diagnostics"


async def test_an_unchanged_document_gets_an_unchanged_report(client: RecordingClient):
    uri = new_uri()
    open_doc(client, uri, GEMM.replace("regs=40", "reg=40"))
    first = await client.text_document_diagnostic_async(lsp.DocumentDiagnosticParams(
        text_document=lsp.TextDocumentIdentifier(uri=uri)))
    assert isinstance(first, lsp.RelatedFullDocumentDiagnosticReport) and first.result_id
    again = await client.text_document_diagnostic_async(lsp.DocumentDiagnosticParams(
        text_document=lsp.TextDocumentIdentifier(uri=uri), previous_result_id=first.result_id))
    assert isinstance(again, lsp.RelatedUnchangedDocumentDiagnosticReport)
    assert again.result_id == first.result_id


async def test_columns_after_non_ascii_text_are_utf8_bytes(client: RecordingClient) -> None:
    text = GEMM.replace('"load"', '"lõad🚀"').replace("regs=40", "reg=40")
    uri = new_uri()
    open_doc(client, uri, text)
    [d] = await pulled(client, uri)
    start = pos(text, "reg=40", encoding="utf-8")
    assert d.range.start == start
    assert start.character != pos(text, "reg=40").character  # UTF-8 is not UTF-16 here
    actions = await client.text_document_code_action_async(lsp.CodeActionParams(
        text_document=lsp.TextDocumentIdentifier(uri=uri), range=d.range,
        context=lsp.CodeActionContext(diagnostics=[d])))
    assert actions
    [action] = actions
    assert isinstance(action, lsp.CodeAction) and action.edit is not None
    edits = (action.edit.changes or {}).get(uri) or action.edit.document_changes[0].edits
    change(client, uri, 2, [(e.range, e.new_text) for e in edits])
    assert await pulled(client, uri) == []


async def test_hover_after_non_ascii_text(client: RecordingClient) -> None:
    text = GEMM.replace('"load"', '"lõad🚀"')
    uri = new_uri()
    open_doc(client, uri, text)
    h = await client.text_document_hover_async(lsp.HoverParams(
        text_document=lsp.TextDocumentIdentifier(uri=uri),
        position=pos(text, "regs=40", 1, encoding="utf-8")))
    assert h is None  # a keyword name: nothing to say, but the position was understood
    h = await client.text_document_hover_async(lsp.HoverParams(
        text_document=lsp.TextDocumentIdentifier(uri=uri),
        position=pos(text, 'role("lõad🚀"', 7, encoding="utf-8")))
    assert h is not None and "warps 0..3" in h.contents.value


async def test_multi_byte_edits_keep_text_in_step(client: RecordingClient) -> None:
    """Insert and delete characters of 1 to 4 bytes; the server's text must track."""
    uri = new_uri()
    text = GEMM.replace('"load"', '"ld"')
    open_doc(client, uri, text)
    version = 1
    for piece in ("é", "€", "🚀", "a"):
        at = pos(text, 'role("ld"', 7, encoding="utf-8")
        version += 1
        change(client, uri, version, [(lsp.Range(start=at, end=at), piece)])
        text = text.replace('role("ld"', f'role("l{piece}d"')
        diags = await pulled(client, uri)
        assert any(f"l{piece}d" in d.message for d in diags), diags
        version += 1
        end = lsp.Position(line=at.line, character=at.character + len(piece.encode()))
        change(client, uri, version, [(lsp.Range(start=at, end=end), "")])
        text = text.replace(f'role("l{piece}d"', 'role("ld"')
        assert not any(f"l{piece}d" in d.message for d in await pulled(client, uri))


async def test_a_document_over_the_size_limit_is_refused_in_the_pulled_report(
        client: RecordingClient) -> None:
    uri = new_uri("huge")
    open_doc(client, uri, GEMM + "#" * (MAX_DOCUMENT_BYTES + 1) + "\n")
    [d] = await pulled(client, uri)
    assert d.code == "document-too-large" and d.range.start.line == 0
