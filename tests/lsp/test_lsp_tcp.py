"""`cake lsp --tcp`: one connection after another, a bare connect-and-close included."""

from __future__ import annotations

import asyncio
import sys

import pytest
import pytest_asyncio
from lsp_support import GEMM, HANG_GUARD_S, ROOT, new_uri, server_env
from lsprotocol import types as lsp
from pygls.lsp.client import LanguageClient

CAPS = lsp.ClientCapabilities(text_document=lsp.TextDocumentClientCapabilities(
    diagnostic=lsp.DiagnosticClientCapabilities()))


@pytest_asyncio.fixture
async def tcp_server():
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "cake_lsp", "--tcp", "127.0.0.1:0", env=server_env(),
        stderr=asyncio.subprocess.PIPE)
    assert proc.stderr is not None
    line = await asyncio.wait_for(proc.stderr.readline(), HANG_GUARD_S)
    assert b"listening on" in line, line
    host, port = line.decode().split()[-1].rsplit(":", 1)
    yield host, int(port)
    proc.terminate()
    await proc.wait()


async def session(host: str, port: int, text: str) -> list[lsp.Diagnostic]:
    client = LanguageClient("tcp-test", "1")
    await client.start_tcp(host, port)
    await client.initialize_async(lsp.InitializeParams(capabilities=CAPS,
                                                       root_uri=ROOT.as_uri()))
    client.initialized(lsp.InitializedParams())
    uri = new_uri("tcp")
    client.text_document_did_open(lsp.DidOpenTextDocumentParams(
        text_document=lsp.TextDocumentItem(uri=uri, language_id="cake", version=1, text=text)))
    report = await client.text_document_diagnostic_async(lsp.DocumentDiagnosticParams(
        text_document=lsp.TextDocumentIdentifier(uri=uri)))
    await client.shutdown_async(None)
    client.exit(None)
    await client.stop()
    return list(report.items)


@pytest.mark.asyncio
async def test_tcp_serves_one_connection_after_another(tcp_server: tuple[str, int]) -> None:
    host, port = tcp_server
    _, writer = await asyncio.open_connection(host, port)  # a health check: connect, leave
    writer.close()
    await writer.wait_closed()
    assert await asyncio.wait_for(session(host, port, GEMM), HANG_GUARD_S) == []
    second = await asyncio.wait_for(session(host, port, GEMM.replace("regs=40", "reg=40")),
                                    HANG_GUARD_S)
    assert [d.code for d in second] == ["CK103"]
