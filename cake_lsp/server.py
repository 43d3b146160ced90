"""`cake lsp`: the CAKE language server.

A thin pygls server over `cake_core`: each feature module under `features/` turns one
request into a library call and converts the answer (`convert.py`).  This module holds
the server object (documents, settings, the checker, the guarded verifier passes), the
protocol tweaks pygls needs for a server that must never go silent, and the entry point.

Transports: stdio (the default) and `--tcp HOST:PORT`.  On stdio the event loop reads
the pipe itself (`serve_stdio`): pygls' own stdin reader hands every header line and body
to a thread and back, and while a check holds the interpreter each of those hops waits
for it, so a burst of edits trickled in one message per check and every intermediate
version was checked and published.  Read by the loop, a burst already sent is taken in at
once and folded into one check.  Frames are read by `framing.py`, which survives a
malformed one.  Over TCP the server accepts one
connection at a time and keeps listening after each one ends, each connection with a
fresh session, so a health check that connects and disconnects does not stop it.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import logging
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any, BinaryIO

from lsprotocol import types as lsp
from pygls.exceptions import JsonRpcException, JsonRpcInvalidParams
from pygls.io_ import StdinAsyncReader, StdoutWriter
from pygls.lsp.server import LanguageServer
from pygls.protocol import LanguageServerProtocol
from pygls.protocol.language_server import lsp_method

from cake_core import __version__
from cake_core.check import CheckResult
from cake_core.ide.index import SymbolIndex
from cake_core.ir.kernel import Program
from cake_core.plugins import PluginSet, load_config, load_plugins
from cake_core.primitives.registry import Registry
from cake_core.source import SourceFile
from cake_lsp import convert
from cake_lsp.checking import Checker, refusal_message
from cake_lsp.documents import (
    CheckOptions,
    DocumentStore,
    OpenDocument,
    UnknownDocument,
    refused,
)
from cake_lsp.framing import quiet_schema_errors, serve_messages
from cake_lsp.guard import PassGuard
from cake_lsp.heap import Heap
from cake_lsp.settings import Settings, parse_settings

logger = logging.getLogger(__name__)

SERVER_NAME = "cake-lsp"


class _Rejected:
    """A request whose params did not fit the method's schema; it gets an error reply."""

    jsonrpc = "2.0"

    def __init__(self, msg_id: object, method: str, error: JsonRpcException) -> None:
        self.id = msg_id
        self.method = method
        self.error = error


class CakeProtocol(LanguageServerProtocol):
    """pygls' protocol with five changes.

    * A request with malformed params is answered with InvalidParams; pygls would drop
      it while deserializing and leave the client waiting forever.
    * The future of a handler that answers no request (a notification, or a step of a
      built-in handler) is forgotten once done; pygls 2.1 keeps every one of them, which
      grows the server by about a kilobyte per edit.
    * `exit` ends only the connection when the server outlives it (TCP).
    * A handler that refuses its params with a JSON-RPC error is answered with it and
      logged in one line, not with a traceback.
    * `workspace/executeCommand` hands the command handler the whole request params
      (so it sees the work-done token) instead of arguments matched to its signature.
    """

    _server: CakeLanguageServer

    def structure_message(self, data: dict[str, Any]) -> Any:
        try:
            return super().structure_message(data)
        except JsonRpcException as exc:
            if isinstance(data, dict) and "id" in data and isinstance(data.get("method"), str):
                return _Rejected(data["id"], data["method"], exc)
            raise

    def handle_message(self, message: Any) -> None:
        if isinstance(message, _Rejected):
            error = JsonRpcInvalidParams(f"invalid params for {message.method}")
            self._send_response(message.id, None, error.to_response_error())  # type: ignore[arg-type]
            return
        super().handle_message(message)

    def _execute_handler(self, msg_id: Any, handler: Any, callback: Any,
                         args: Any = None, kwargs: Any = None) -> None:
        super()._execute_handler(msg_id, handler, callback, args, kwargs)
        future = self._request_futures.get(msg_id)
        answers_request = isinstance(callback, functools.partial) and \
            callback.func == self._send_handler_result
        if future is not None and not answers_request:
            future.add_done_callback(lambda _: self._request_futures.pop(msg_id, None))

    def _send_handler_result(self, future: Any, *, msg_id: Any) -> None:
        # A handler that refuses its params (a position past the end) has answered, not
        # failed: pygls would log a full traceback for it.
        if not future.cancelled() and isinstance(exc := future.exception(), JsonRpcException):
            self._request_futures.pop(msg_id, None)
            logger.info("request %s refused: %s", msg_id, exc)
            self._send_response(msg_id, error=exc.to_response_error())
            return
        super()._send_handler_result(future, msg_id=msg_id)

    @lsp_method(lsp.EXIT)
    def lsp_exit(self, *args: Any) -> Any:
        if self._server.exit_process:
            return (yield from super().lsp_exit(*args))
        if self._server._stop_event is not None:
            self._server._stop_event.set()
        if self.writer is not None:
            self.writer.close()
        return None

    @lsp_method(lsp.WORKSPACE_EXECUTE_COMMAND)
    def lsp_workspace__execute_command(self, params: lsp.ExecuteCommandParams) -> Any:
        handler = self.fm.commands.get(params.command)
        if handler is None:
            raise JsonRpcInvalidParams(f"unknown command {params.command!r}")
        return (yield handler, (params,), None)


class CakeLanguageServer(LanguageServer):
    def __init__(self, *, exit_process: bool = True,
                 environ: dict[str, str] | None = None) -> None:
        super().__init__(SERVER_NAME, __version__, protocol_cls=CakeProtocol, max_workers=4)
        self.exit_process = exit_process
        self.documents = DocumentStore()
        self.settings = Settings()
        self.generation = 0
        """Bumped by every settings change; part of each check result's stamp."""
        self.docs_base = convert.docs_base_uri()
        self.checker = Checker(self)
        self._environ = environ
        self.plugins = PluginSet()
        """The project's plugins; loaded at `initialize`, when the workspace is known."""
        self.guard = PassGuard([])
        self.heap = Heap(environ)
        """Keeps the cycle collector off the long-lived heap (`heap.py`)."""
        self._loop: asyncio.AbstractEventLoop | None = None

    @property
    def registry(self) -> Registry:
        """The primitives of the built-ins and the loaded plugins."""
        return self.plugins.registry

    def load_plugins(self, root: Path | None) -> None:
        """Load the plugins of the project at `root` (its `[tool.cake]` settings apply)."""
        config = load_config(root)
        try:
            self.plugins = load_plugins(config)
        except Exception as exc:  # the server must come up even if plugin loading breaks
            logger.exception("loading plugins failed")
            self.plugins = PluginSet(warnings=list(config.problems))
            self.window_show_message(lsp.ShowMessageParams(
                type=lsp.MessageType.Error,
                message=f"CAKE: could not load plugins ({type(exc).__name__}: {exc}); "
                        "checking with the built-in rules only"))
        for warning in self.plugins.warnings:
            self.window_show_message(lsp.ShowMessageParams(type=lsp.MessageType.Warning,
                                                           message=f"CAKE: {warning}"))
        self.guard = PassGuard.from_plugins(self.plugins, self._environ)
        self.guard.on_disable = self._pass_disabled
        self.heap.started()

    # -- client capabilities -------------------------------------------------------------
    @property
    def pull_diagnostics(self) -> bool:
        td = self.client_capabilities.text_document
        return td is not None and td.diagnostic is not None

    @property
    def can_refresh_diagnostics(self) -> bool:
        ws = self.client_capabilities.workspace
        return ws is not None and ws.diagnostics is not None and \
            bool(ws.diagnostics.refresh_support)

    @property
    def codec(self) -> convert.Codec:
        return convert.Codec(self.workspace.position_encoding)

    def markdown(self, where: str) -> bool:
        """Whether the client renders Markdown in hovers ("hover") or completion docs."""
        td = self.client_capabilities.text_document
        formats: Sequence[lsp.MarkupKind] | None = None
        if td is not None and where == "hover" and td.hover is not None:
            formats = td.hover.content_format
        elif td is not None and where == "completion" and td.completion is not None and \
                td.completion.completion_item is not None:
            formats = td.completion.completion_item.documentation_format
        return bool(formats) and lsp.MarkupKind.Markdown in formats  # type: ignore[operator]

    # -- documents -------------------------------------------------------------------------
    def document(self, uri: str) -> OpenDocument:
        """The open document at `uri`; a request about any other is invalid."""
        try:
            return self.documents.get(uri)
        except UnknownDocument:
            raise JsonRpcInvalidParams(f"no open document {uri!r}") from None

    def offset(self, source: SourceFile, pos: lsp.Position) -> int:
        try:
            return self.codec.offset(source, pos)
        except convert.PositionError as exc:
            raise JsonRpcInvalidParams(str(exc)) from None

    async def current(self, uri: str) -> tuple[OpenDocument, CheckResult]:
        """The document and a check result that matches its current text."""
        doc = self.document(uri)
        try:
            return doc, await self.checker.current(doc)
        except UnknownDocument:
            raise JsonRpcInvalidParams(f"{uri} was closed") from None

    async def index(self, doc: OpenDocument, result: CheckResult) -> SymbolIndex:
        """The symbol index of a result, built on the checker's thread (it takes tens of
        milliseconds on a large file: too long to hold up the event loop)."""
        cached = doc.cached_index(result)
        if cached is not None:
            return cached
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self.checker.executor, doc.index, result,
                                          self.registry)

    async def program(self, result: CheckResult) -> Program | None:
        """The program of a result, built on the checker's thread if it is not yet (a
        check builds only what its diagnostics need: `cake_core/check_cache.py`)."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self.checker.executor, lambda: result.program)

    def check_options(self) -> CheckOptions:
        kernel_passes, passes = self.guard.split(self.settings.disabled_plugins)
        return CheckOptions(self.settings.arch, self.plugins, passes, self.generation,
                            kernel_passes)

    def lsp_diagnostics(self, doc: OpenDocument, result: CheckResult) -> list[lsp.Diagnostic]:
        td = self.client_capabilities.text_document
        pd = td.publish_diagnostics if td is not None else None
        related = pd is None or pd.related_information is not False
        version = doc.stamp[0] if doc.stamp is not None else doc.version
        if refused(result):
            return [lsp.Diagnostic(
                range=lsp.Range(start=lsp.Position(line=0, character=0),
                                end=lsp.Position(line=0, character=0)),
                message=refusal_message(result), severity=lsp.DiagnosticSeverity.Warning,
                code="document-too-large", source="cake")]
        return [convert.diagnostic(d, result.source, self.codec, uri=doc.uri, version=version,
                                   docs_base=self.docs_base, related_support=related)
                for d in result.diagnostics]

    # -- settings ----------------------------------------------------------------------------
    def apply_settings(self, raw: object, where: str) -> None:
        settings, errors = parse_settings(raw, self.settings)
        if errors:
            self.window_show_message(lsp.ShowMessageParams(
                type=lsp.MessageType.Warning,
                message=f"CAKE: ignored invalid {where}: " + "; ".join(errors)))
        if settings != self.settings:
            self.settings = settings
            self.generation += 1
            if self.documents:
                self.checker.recheck_all()

    def _pass_disabled(self, name: str, reason: str) -> None:
        """Called from the checker's thread when the guard disables a pass."""
        if self._loop is None:
            return
        self._loop.call_soon_threadsafe(self.window_show_message, lsp.ShowMessageParams(
            type=lsp.MessageType.Warning,
            message=f"CAKE: verifier pass `{name}` is disabled for this session: {reason}"))

    # -- transports ---------------------------------------------------------------------------
    async def serve_connection(self, reader: asyncio.StreamReader,
                               writer: asyncio.StreamWriter) -> None:
        """Serve one TCP connection until the client leaves or sends `exit`."""
        self._stop_event = threading.Event()
        self.protocol.set_writer(writer)
        try:
            await serve_messages(self._stop_event, reader, self.protocol)
        except (ConnectionError, asyncio.IncompleteReadError):
            logger.info("client connection lost")
        finally:
            for doc in self.documents:
                if doc.task is not None:
                    doc.task.cancel()
            self.checker.shutdown()
            writer.close()


    def start_io(self, stdin: BinaryIO | None = None,
                 stdout: BinaryIO | None = None) -> None:
        """Serve over stdin/stdout until `exit` or the end of input."""
        try:
            asyncio.run(self.serve_stdio(stdin or sys.stdin.buffer,
                                         stdout or sys.stdout.buffer))
        except BrokenPipeError:
            logger.error("connection to the client lost; shutting down")
        except (KeyboardInterrupt, SystemExit):
            pass
        finally:
            self.shutdown()

    async def serve_stdio(self, stdin: BinaryIO, stdout: BinaryIO) -> None:
        loop = asyncio.get_running_loop()
        self._stop_event = threading.Event()
        self.protocol.set_writer(StdoutWriter(stdout))
        reader: Any
        try:
            reader = asyncio.StreamReader(loop=loop)
            await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), stdin)
        except (ValueError, OSError, NotImplementedError):
            # stdin is a regular file, or the loop cannot watch pipes: pygls' reader
            reader = StdinAsyncReader(stdin, self.thread_pool)
        with contextlib.suppress(asyncio.IncompleteReadError):
            await serve_messages(self._stop_event, reader, self.protocol)


def create_server(*, exit_process: bool = True,
                  environ: dict[str, str] | None = None) -> CakeLanguageServer:
    """A server with every feature registered (one per module under `features/`)."""
    from cake_lsp.features import register_all

    quiet_schema_errors()
    server = CakeLanguageServer(exit_process=exit_process, environ=environ)
    register_all(server)
    return server


def serve_tcp(host: str, port: int) -> None:
    """Listen on HOST:PORT and serve connections one after another, forever."""

    async def serve() -> None:
        turn = asyncio.Lock()

        async def connection(reader: asyncio.StreamReader,
                             writer: asyncio.StreamWriter) -> None:
            async with turn:
                server = create_server(exit_process=False)
                server._loop = asyncio.get_running_loop()
                await server.serve_connection(reader, writer)

        listener = await asyncio.start_server(connection, host, port)
        for sock in listener.sockets:
            name = sock.getsockname()
            print(f"cake lsp: listening on {name[0]}:{name[1]}", file=sys.stderr, flush=True)
        async with listener:
            await listener.serve_forever()

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve())


def _address(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) < 65536:
        raise argparse.ArgumentTypeError(f"expected HOST:PORT, got {text!r}")
    return host.strip("[]") or "127.0.0.1", int(port)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="cake lsp", description="The CAKE language server.")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--stdio", action="store_true", help="talk over stdin/stdout (default)")
    mode.add_argument("--tcp", type=_address, metavar="HOST:PORT",
                      help="listen on HOST:PORT and serve one connection at a time")
    parser.add_argument("--log-file", help="write the server's log to this file")
    parser.add_argument("--log-level", default="WARNING",
                        choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    args = parser.parse_args(list(argv) if argv is not None else None)
    logging.basicConfig(filename=args.log_file, level=args.log_level,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if args.tcp is not None:
        serve_tcp(*args.tcp)
        return 0
    server = create_server()
    server.start_io()
    return 0


if __name__ == "__main__":
    sys.exit(main())
