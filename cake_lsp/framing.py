"""Reading LSP messages off a byte stream, so that one bad frame costs one message.

pygls' `run_async` takes a header only when the whole line is `Content-Length: N`.  After
a frame whose Content-Length is shorter than its body, the rest of that body runs into the
next header (`...}}Content-Length: 123`), the next body runs into the header after it, and
no line is ever a header again: one bad frame made every later request go unanswered.  A
body that is not JSON was logged with a full traceback and never answered.

Here a header is found wherever it ends a line, which resynchronises the stream at the
next frame; a body that is not JSON is answered with a JSON-RPC parse error (id null, as
the spec asks when the id cannot be read) and logged in one line; a body longer than
`MAX_BODY` is read in chunks and dropped, so a lying length cannot make the server hold
gigabytes.  Everything else is pygls': the protocol object still structures and dispatches
each message.
"""

from __future__ import annotations

import json
import logging
import re
import threading
from typing import Any, Protocol

from pygls.exceptions import JsonRpcParseError
from pygls.protocol import JsonRPCProtocol

logger = logging.getLogger(__name__)

MAX_BODY = 64 << 20
"""Larger than any document the server accepts (documents.py refuses past 512 KiB of
text), so only a broken or hostile client reaches it."""
_CHUNK = 1 << 20
_HEADER = re.compile(rb"content-length:[ \t]*(\d+)[ \t]*\r?\n$", re.IGNORECASE)


class _SchemaErrorInOneLine(logging.Filter):
    """pygls logs a message that does not fit its method's schema with a full traceback,
    although the client is answered (InvalidParams); one line says as much."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.msg, str) and record.msg.startswith("Unable to deserialize"):
            record.msg, record.args = "a message did not fit its method's schema", ()
            record.levelno, record.levelname = logging.INFO, "INFO"
        return True


def quiet_schema_errors() -> None:
    """Install the filter above on pygls' JSON-RPC logger (once)."""
    target = logging.getLogger("pygls.protocol.json_rpc")
    if not any(isinstance(f, _SchemaErrorInOneLine) for f in target.filters):
        target.addFilter(_SchemaErrorInOneLine())


class Reader(Protocol):
    async def readline(self) -> bytes: ...
    async def readexactly(self, n: int) -> bytes: ...


async def serve_messages(stop_event: threading.Event, reader: Reader,
                         protocol: JsonRPCProtocol) -> None:
    """Dispatch every message read from `reader` until it ends or `stop_event` is set."""
    length: int | None = None
    while not stop_event.is_set():
        line = await reader.readline()
        if not line:
            return
        match = _HEADER.search(line)
        if match is not None:
            length = int(match.group(1))
            continue
        if line.strip() or length is None:
            continue  # another header (Content-Type), or junk before the next frame
        size, length = length, None
        if size > MAX_BODY:
            logger.warning("dropped a message of %d bytes (the limit is %d)", size, MAX_BODY)
            while size:
                step = min(size, _CHUNK)
                await reader.readexactly(step)
                size -= step
            continue
        dispatch(protocol, await reader.readexactly(size))


def dispatch(protocol: JsonRPCProtocol, body: bytes) -> None:
    """Hand one body to the protocol; a fault is logged in a line, never raised."""
    try:
        message: Any = json.loads(body, object_hook=protocol.structure_message)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        logger.warning("a message that is not JSON: %s", exc)
        error = JsonRpcParseError(f"not JSON: {exc}").to_response_error()
        protocol._send_response(None, None, error)  # type: ignore[arg-type]
        return
    except Exception as exc:  # a message pygls cannot structure: logged, the server goes on
        logger.warning("a message that could not be read: %s: %s", type(exc).__name__, exc)
        logger.debug("details", exc_info=True)
        return
    try:
        protocol.handle_message(message)
    except Exception as exc:
        logger.error("a message could not be handled: %s: %s", type(exc).__name__, exc)
        logger.debug("details", exc_info=True)
