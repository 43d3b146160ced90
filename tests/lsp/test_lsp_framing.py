"""One malformed frame costs one message: the server resynchronises at the next header.

These talk raw bytes to a real `cake lsp` process, because a client library would never
send what they send: a Content-Length shorter than its body (before, every later request
went unanswered), a body that is not JSON (before, a logged traceback and no answer) and
params that do not fit the method (a one-line log, an InvalidParams answer)."""

from __future__ import annotations

import asyncio
import json
import os
import select
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest
from pygls.protocol import JsonRPCProtocol

from cake_lsp import framing

ROOT = Path(__file__).resolve().parents[2]
GEMM = (ROOT / "examples" / "gemm_sm80.cake").read_text()
URI = "file:///framing/gemm.cake"


def frame(body: bytes, length: int | None = None) -> bytes:
    return f"Content-Length: {len(body) if length is None else length}\r\n\r\n".encode() + body


class Raw:
    """A client that writes bytes and reads framed answers, nothing more."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        self.proc = proc
        self.buffer = b""
        self.next_id = 1

    def send(self, raw: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(raw)
        self.proc.stdin.flush()

    def request(self, method: str, params: object) -> int:
        rid, self.next_id = self.next_id, self.next_id + 1
        self.send(frame(json.dumps({"jsonrpc": "2.0", "id": rid, "method": method,
                                    "params": params}).encode()))
        return rid

    def notify(self, method: str, params: object) -> None:
        self.send(frame(json.dumps({"jsonrpc": "2.0", "method": method,
                                    "params": params}).encode()))

    def answer(self, rid: int | None, timeout: float = 30.0) -> dict[str, Any]:
        """The response whose id is `rid` (None: a response with a null id)."""
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        while True:
            while b"\r\n\r\n" in self.buffer:
                head, _, rest = self.buffer.partition(b"\r\n\r\n")
                length = next(int(h.split(b":")[1]) for h in head.split(b"\r\n")
                              if h.lower().startswith(b"content-length"))
                if len(rest) < length:
                    break
                msg = json.loads(rest[:length])
                self.buffer = rest[length:]
                if "method" not in msg and msg.get("id") == rid:
                    return cast(dict[str, Any], msg)
                if "method" in msg and "id" in msg:
                    self.send(frame(json.dumps({"jsonrpc": "2.0", "id": msg["id"],
                                                "result": None}).encode()))
            ready, _, _ = select.select([fd], [], [], timeout)
            assert ready, f"no answer to request {rid} within {timeout} s"
            chunk = os.read(fd, 1 << 16)
            assert chunk, "the server exited"
            self.buffer += chunk

    def hover(self, line: int = 0) -> dict[str, Any]:
        return self.answer(self.request("textDocument/hover", {
            "textDocument": {"uri": URI}, "position": {"line": line, "character": 4}}))


@pytest.fixture
def raw(tmp_path: Path) -> Iterator[Raw]:
    err = (tmp_path / "stderr").open("wb")
    proc = subprocess.Popen([sys.executable, "-m", "cake", "lsp"], cwd=ROOT,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err)
    client = Raw(proc)
    client.answer(client.request("initialize", {"processId": None, "rootUri": None,
                                                "capabilities": {}}), timeout=60)
    client.notify("initialized", {})
    client.notify("textDocument/didOpen", {"textDocument": {
        "uri": URI, "languageId": "cake", "version": 1, "text": GEMM}})
    yield client
    proc.kill()
    proc.wait()
    err.close()
    log = (tmp_path / "stderr").read_text(errors="replace")
    assert "Traceback" not in log, log[-3000:]


def test_a_short_content_length_loses_one_message_only(raw: Raw) -> None:
    body = json.dumps({"jsonrpc": "2.0", "method": "$/noop", "params": {}}).encode()
    raw.send(frame(body, len(body) - 4))
    assert "result" in raw.hover(), "the request after the bad frame was not answered"
    assert "result" in raw.hover(), "the stream did not resynchronise"


def test_a_body_that_is_not_json_is_a_parse_error(raw: Raw) -> None:
    raw.send(frame(b'{"jsonrpc": "2.0", "id": 77, "method": "textDocument/hover", '))
    error = raw.answer(None)["error"]
    assert error["code"] == -32700
    assert "result" in raw.hover()


def test_params_that_do_not_fit_are_invalid_params_in_one_log_line(raw: Raw) -> None:
    rid = raw.request("textDocument/hover", {"textDocument": {"uri": URI},
                                             "position": {"line": -1, "character": "x"}})
    assert raw.answer(rid)["error"]["code"] == -32602
    rid = raw.request("textDocument/hover", {"textDocument": {"uri": URI},
                                             "position": {"line": 100_000, "character": 0}})
    assert raw.answer(rid)["error"]["code"] == -32602  # past the end: refused, not a crash
    assert "result" in raw.hover()


class _Recorder:
    """Stands in for the protocol: records what `serve_messages` hands over."""

    def __init__(self) -> None:
        self.handled: list[object] = []

    def structure_message(self, data: dict[str, Any]) -> Any:
        return data

    def handle_message(self, message: object) -> None:
        self.handled.append(message)

    def _send_response(self, *args: object) -> None:
        self.handled.append(("response", args))


def test_a_body_past_the_limit_is_read_and_dropped(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(framing, "MAX_BODY", 100)
    monkeypatch.setattr(framing, "_CHUNK", 7)
    good = json.dumps({"jsonrpc": "2.0", "method": "x", "params": {}}).encode()

    async def serve() -> list[object]:
        reader = asyncio.StreamReader()
        reader.feed_data(frame(b"[" + b" " * 300 + b"]") + frame(good))
        reader.feed_eof()
        recorder = _Recorder()
        await framing.serve_messages(threading.Event(), reader,
                                     cast(JsonRPCProtocol, recorder))
        return recorder.handled

    assert asyncio.run(serve()) == [json.loads(good)]
