"""An OpenAI-compatible chat server on loopback, scripted per test.

The agent tests point litellm at it (`openai/<name>` with `api_base`), so what they
exercise is the real client stack: HTTP, server-sent events, status codes, usage
reporting.  Each reply is one `Reply` (the last one repeats), or what `respond` makes of
the request's body (a server that answers by what it is asked); every request is recorded
(its JSON body and the key it carried) so a test can count calls and read `max_tokens`.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

KEY = "sk-test-cake-0000"
"""The key the server accepts; any other gets HTTP 401."""


@dataclass(frozen=True)
class Reply:
    """What the server answers to one request.

    `status` other than 200 answers an OpenAI-shaped error; `delay_s` waits before the
    first byte; `ignore_max_tokens` sends all of `text` whatever the request allows (a
    server that does not enforce `max_tokens`); `report_usage` False leaves usage out."""

    text: str = ""
    status: int = 200
    finish: str = "stop"
    delay_s: float = 0.0
    piece_delay_s: float = 0.0
    """Wait between streamed pieces (a server that trickles its reply)."""
    ignore_max_tokens: bool = False
    report_usage: bool = True


def tokens(text: str) -> int:
    """The server's token count: 4 characters a token (its own rule, like a real one)."""
    return (len(text) + 3) // 4


@dataclass
class ModelServer:
    replies: list[Reply] = field(default_factory=list)
    requests: list[dict[str, Any]] = field(default_factory=list)
    respond: Callable[[dict[str, Any]], Reply] | None = None
    """Answers each request from its body (instead of `replies`)."""
    _httpd: ThreadingHTTPServer | None = None

    @property
    def api_base(self) -> str:
        assert self._httpd is not None
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def start(self) -> ModelServer:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                i = len(server.requests)
                server.requests.append({**body, "_key": self.headers.get("Authorization")})
                reply = server.respond(body) if server.respond is not None else \
                    server.replies[min(i, len(server.replies) - 1)]
                time.sleep(reply.delay_s)
                if self.headers.get("Authorization") != f"Bearer {KEY}":
                    return self._error(401, "Incorrect API key provided",
                                       "invalid_api_key")
                if reply.status != 200:
                    return self._error(reply.status, "scripted failure", "server_error")
                # a client that stops reading (a budget cut) closes the connection
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                    self._answer(body, reply)

            def _error(self, status: int, message: str, code: str) -> None:
                data = json.dumps({"error": {"message": message, "type": code,
                                             "code": code}}).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _answer(self, body: dict[str, Any], reply: Reply) -> None:
                prompt = sum(tokens(str(m.get("content", ""))) for m in body["messages"])
                text, finish = reply.text, reply.finish
                limit = body.get("max_tokens") or body.get("max_completion_tokens")
                if limit and not reply.ignore_max_tokens and tokens(text) > limit:
                    text, finish = text[: 4 * int(limit)], "length"
                usage = {"prompt_tokens": prompt, "completion_tokens": tokens(text),
                         "total_tokens": prompt + tokens(text)}
                base = {"id": f"chatcmpl-{len(server.requests)}", "created": int(time.time()),
                        "model": body["model"]}
                if not body.get("stream"):
                    msg = {**base, "object": "chat.completion", "choices": [
                        {"index": 0, "finish_reason": finish,
                         "message": {"role": "assistant", "content": text}}]}
                    if reply.report_usage:
                        msg["usage"] = usage
                    data = json.dumps(msg).encode()
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                    return
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Connection", "close")
                self.end_headers()
                chunk = {**base, "object": "chat.completion.chunk"}
                for piece in _pieces(text):
                    time.sleep(reply.piece_delay_s)
                    self._event({**chunk, "choices": [{"index": 0, "finish_reason": None,
                                                       "delta": {"content": piece}}]})
                self._event({**chunk, "choices": [{"index": 0, "finish_reason": finish,
                                                   "delta": {}}]})
                opts = body.get("stream_options") or {}
                if reply.report_usage and opts.get("include_usage"):
                    self._event({**chunk, "choices": [], "usage": usage})
                self.wfile.write(b"data: [DONE]\n\n")
                self.wfile.flush()
                self.close_connection = True

            def _event(self, obj: dict[str, Any]) -> None:
                self.wfile.write(b"data: " + json.dumps(obj).encode() + b"\n\n")
                self.wfile.flush()

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        threading.Thread(target=self._httpd.serve_forever, daemon=True,
                         name="model-server").start()
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()

    def __enter__(self) -> ModelServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _pieces(text: str, size: int = 16) -> Iterator[str]:
    """Streamed in chunks of `size` characters (four of the server's tokens)."""
    for i in range(0, len(text), size):
        yield text[i:i + size]
