"""The server under load: a burst of edits is checked once, at its last version, and a
document over the size limit is refused with a message instead of filling memory.

A burst is sent as one write to the server's stdin, as an editor's queued keystrokes
arrive together: the server then holds every version of the burst before its first check
may start, so what it publishes does not depend on how fast either side runs.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import pytest
from lsp_support import (
    GEMM,
    RecordingClient,
    change,
    editor_client,
    new_uri,
    open_doc,
    pos,
    published,
)
from lsprotocol import types as lsp

from cake_core.check import check_text
from cake_lsp.documents import MAX_DOCUMENT_BYTES

pytestmark = [pytest.mark.asyncio(loop_scope="module"),
              pytest.mark.filterwarnings("error::pytest_lsp.LspSpecificationWarning")]

client = editor_client("visual-studio-code")

RSS_LIMIT_MB = 300.0


class _Held:
    """Stands in for the client's writer and keeps what is sent."""

    def __init__(self) -> None:
        self.chunks: list[bytes] = []

    def write(self, data: bytes) -> None:
        self.chunks.append(data)


@contextlib.contextmanager
def one_write(client: RecordingClient) -> Iterator[None]:
    """Send every message of the block in a single write."""
    writer = client.protocol.writer
    held = _Held()
    client.protocol.writer = held  # type: ignore[assignment]
    try:
        yield
    finally:
        client.protocol.writer = writer
        writer.write(b"".join(held.chunks))  # type: ignore[union-attr]


def type_at(text: str, offset: int, typed: str) -> str:
    return text[:offset] + typed + text[offset:]


def rss_mb(client: RecordingClient) -> float | None:
    try:
        status = Path(f"/proc/{client._server.pid}/status").read_text()  # type: ignore[union-attr]
    except OSError:
        return None
    return next(int(line.split()[1]) / 1024 for line in status.splitlines()
                if line.startswith("VmRSS:"))


async def test_a_burst_publishes_only_its_last_version(client: RecordingClient) -> None:
    uri = new_uri("burst")
    open_doc(client, uri, GEMM)
    assert await published(client, uri, 1) == []
    start = len(client.published)
    at = pos(GEMM, "STAGES, BM, BK)", 6)  # just after the first STAGES in `sa`
    typed = "_TYPO"
    with one_write(client):
        for i, ch in enumerate(typed):
            p = lsp.Position(line=at.line, character=at.character + i)
            change(client, uri, 2 + i, [(lsp.Range(start=p, end=p), ch)])
    last = 1 + len(typed)
    final = await published(client, uri, last, after=start)
    assert [p.version for p in client.published[start:] if p.uri == uri] == [last]
    text = type_at(GEMM, GEMM.index("STAGES, BM, BK)") + 6, typed)
    expected = check_text(text).diagnostics
    assert [(d.code, d.range.start.line, d.message) for d in final] == \
        [(d.code, d.span.start.line, d.message) for d in expected]
    assert [d.code for d in final] == ["CK101"] and "STAGES_TYPO" in final[0].message


async def test_bursts_back_to_back_publish_each_last_version(client: RecordingClient) -> None:
    """Typing a name wrong and then back: two bursts, one publication each, the second
    clean."""
    uri = new_uri("bursts")
    open_doc(client, uri, GEMM)
    assert await published(client, uri, 1) == []
    start = len(client.published)
    at = pos(GEMM, "STAGES, BM, BK)", 6)
    with one_write(client):
        for i, ch in enumerate("XYZ"):
            p = lsp.Position(line=at.line, character=at.character + i)
            change(client, uri, 2 + i, [(lsp.Range(start=p, end=p), ch)])
    [d] = await published(client, uri, 4, after=start)
    assert d.code == "CK101"
    with one_write(client):
        for i in range(3):
            p = lsp.Position(line=at.line, character=at.character + 2 - i)
            end = lsp.Position(line=at.line, character=p.character + 1)
            change(client, uri, 5 + i, [(lsp.Range(start=p, end=end), "")])
    assert await published(client, uri, 7, after=start) == []
    assert [p.version for p in client.published[start:] if p.uri == uri] == [4, 7]


def oversized() -> str:
    """About 5 MB of valid CAKE: the sample kernel repeated under fresh names."""
    header, _, body = GEMM.partition("@kernel")
    copies = []
    n = 0
    while sum(map(len, copies)) < 5_000_000:
        copies.append("@kernel" + body.replace("def gemm(", f"def gemm_{n}(", 1))
        n += 1
    return header + "".join(copies)


async def test_a_document_over_the_limit_is_refused_and_memory_stays_low(
        client: RecordingClient) -> None:
    text = oversized()
    assert len(text.encode()) > 4 * MAX_DOCUMENT_BYTES
    uri = new_uri("huge")
    before = len(client.messages)
    open_doc(client, uri, text)
    [d] = await published(client, uri, 1)
    assert d.code == "document-too-large" and d.range.start.line == 0
    assert "MiB" in d.message and "not checked" in d.message
    shown = [m for m in client.messages[before:] if "limit" in m.message]
    assert len(shown) == 1 and shown[0].type == lsp.MessageType.Warning
    rss = rss_mb(client)
    if rss is not None:
        assert rss < RSS_LIMIT_MB, f"server at {rss:.0f} MB with a 5 MB document open"

    # An edit keeps it refused without a second message; cutting it down checks it again.
    change(client, uri, 2, [(lsp.Range(start=lsp.Position(line=0, character=0),
                                       end=lsp.Position(line=0, character=0)), "# x\n")])
    [d] = await published(client, uri, 2)
    assert d.code == "document-too-large"
    assert len([m for m in client.messages[before:] if "limit" in m.message]) == 1
    client.text_document_did_change(lsp.DidChangeTextDocumentParams(
        text_document=lsp.VersionedTextDocumentIdentifier(uri=uri, version=3),
        content_changes=[lsp.TextDocumentContentChangeWholeDocument(text=GEMM)]))
    assert await published(client, uri, 3) == []
    hover = await client.text_document_hover_async(lsp.HoverParams(
        text_document=lsp.TextDocumentIdentifier(uri=uri), position=pos(GEMM, "sa")))
    assert hover is not None


async def test_requests_on_a_refused_document_are_answered(client: RecordingClient) -> None:
    uri = new_uri("huge")
    open_doc(client, uri, oversized())
    await published(client, uri, 1)
    hover = await client.text_document_hover_async(lsp.HoverParams(
        text_document=lsp.TextDocumentIdentifier(uri=uri), position=pos(GEMM, "sa")))
    symbols = await client.text_document_document_symbol_async(
        lsp.DocumentSymbolParams(text_document=lsp.TextDocumentIdentifier(uri=uri)))
    assert hover is None and not symbols

