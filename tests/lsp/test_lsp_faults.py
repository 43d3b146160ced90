"""A server that must not go down: verifier passes that raise, hang or return junk, and
requests that make no sense, each answered (with an error where one is due) while the
server goes on serving."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Awaitable
from concurrent.futures import Future

import pytest
from lsp_support import (
    GEMM,
    RecordingClient,
    change,
    editor_client,
    new_uri,
    open_doc,
    published,
)
from lsprotocol import types as lsp
from pygls.exceptions import JsonRpcInvalidParams, JsonRpcMethodNotFound

from cake_lsp.guard import TEST_PASSES_ENV

pytestmark = [pytest.mark.asyncio(loop_scope="module"),
              pytest.mark.filterwarnings("error::pytest_lsp.LspSpecificationWarning")]

BAD_PASSES = ["tests.lsp.passes:crash", "tests.lsp.passes:hang",
              "tests.lsp.passes:not_a_list", "os:getcwd", "tests.lsp.passes:quiet"]


client = editor_client("visual-studio-code", env={TEST_PASSES_ENV: ",".join(BAD_PASSES)})


async def hover(client: RecordingClient, uri: str, line: int, character: int) -> lsp.Hover | None:
    return await client.text_document_hover_async(lsp.HoverParams(
        text_document=lsp.TextDocumentIdentifier(uri=uri),
        position=lsp.Position(line=line, character=character)))


async def test_failing_passes_become_ck902_and_are_disabled(client: RecordingClient) -> None:
    uri = new_uri()
    open_doc(client, uri, GEMM)
    diags = await published(client, uri, 1)
    failures = {d.message.split("`")[1]: d for d in diags}
    assert set(failures) == {"tests.lsp.passes:crash", "tests.lsp.passes:hang",
                             "tests.lsp.passes:not_a_list", "os:getcwd"}
    assert all(d.code == "CK902" and d.severity == lsp.DiagnosticSeverity.Warning
               for d in diags)
    assert "raised RuntimeError" in failures["tests.lsp.passes:crash"].message
    assert "ran longer than 1 s" in failures["tests.lsp.passes:hang"].message
    assert "not a list of diagnostics" in failures["tests.lsp.passes:not_a_list"].message
    assert "not a module under tests." in failures["os:getcwd"].message
    shown = " ".join(m.message for m in client.messages)
    assert "tests.lsp.passes:crash" in shown and "disabled" in shown
    # the server goes on: another document, an edit, a hover
    p = lsp.Position(line=2, character=0)
    change(client, uri, 2, [(lsp.Range(start=p, end=p), "# still here\n")])
    assert {d.code for d in await published(client, uri, 2)} == {"CK902"}
    assert await hover(client, uri, 6, 5) is not None


async def test_passes_do_not_run_on_a_file_with_errors(client: RecordingClient) -> None:
    uri = new_uri()
    open_doc(client, uri, GEMM.replace("regs=40", "reg=40"))
    assert [d.code for d in await published(client, uri, 1)] == ["CK103"]


async def test_a_request_about_a_document_that_is_not_open(client: RecordingClient) -> None:
    with pytest.raises(JsonRpcInvalidParams, match="no open document"):
        await hover(client, "file:///nowhere/missing.cake", 0, 0)
    with pytest.raises(JsonRpcInvalidParams):
        await hover(client, "not a uri at all", 0, 0)
    await assert_alive(client)


async def test_positions_past_the_end(client: RecordingClient) -> None:
    uri = new_uri()
    open_doc(client, uri, GEMM)
    with pytest.raises(JsonRpcInvalidParams, match="past the end"):
        await hover(client, uri, 10_000, 0)
    # a column past the end of its line means the end of the line (the protocol's rule)
    assert await hover(client, uri, 2, 500) is None
    with pytest.raises(JsonRpcInvalidParams):
        await client.text_document_definition_async(lsp.DefinitionParams(
            text_document=lsp.TextDocumentIdentifier(uri=uri),
            position=lsp.Position(line=99_999, character=3)))
    await assert_alive(client)


def raw_request(client: RecordingClient, method: str, params: object) -> Awaitable[object]:
    """Send a request as raw JSON, as a buggy client would (the typed client API cannot
    build malformed params); the reply arrives through the client's normal machinery."""
    msg_id = f"raw-{next(_raw_ids)}"
    reply: Future[object] = Future()
    client.protocol._request_futures[msg_id] = reply
    client.protocol._send_data({"jsonrpc": "2.0", "id": msg_id, "method": method,
                                "params": params})
    return asyncio.wrap_future(reply)


def raw_notify(client: RecordingClient, method: str, params: object) -> None:
    client.protocol._send_data({"jsonrpc": "2.0", "method": method, "params": params})


_raw_ids = itertools.count()


async def test_unknown_methods_and_invalid_params(client: RecordingClient) -> None:
    with pytest.raises(JsonRpcMethodNotFound):
        await raw_request(client, "cake/noSuchMethod", {})
    with pytest.raises(JsonRpcInvalidParams):
        await raw_request(client, lsp.TEXT_DOCUMENT_HOVER,
                          {"textDocument": 5, "position": "here"})
    with pytest.raises(JsonRpcInvalidParams):
        await raw_request(client, lsp.TEXT_DOCUMENT_COMPLETION, {})
    with pytest.raises(JsonRpcInvalidParams, match="document URI"):
        await client.workspace_execute_command_async(lsp.ExecuteCommandParams(
            command="cake.check", arguments=[42]))
    await assert_alive(client)


async def test_bad_notifications_are_survived(client: RecordingClient) -> None:
    raw_notify(client, lsp.TEXT_DOCUMENT_DID_OPEN, {"textDocument": {"uri": 3}})
    change(client, "file:///never/opened.cake", 2,
           [(lsp.Range(start=lsp.Position(line=0, character=0),
                       end=lsp.Position(line=0, character=0)), "x")])
    raw_notify(client, "cake/noSuchNotification", {"x": 1})
    await assert_alive(client)


async def assert_alive(client: RecordingClient) -> None:
    uri = new_uri()
    open_doc(client, uri, GEMM)
    await published(client, uri, 1)
    h = await hover(client, uri, 5, 5)
    assert h is not None and "smem" in h.contents.value
