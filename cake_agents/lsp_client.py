"""The checker's connection to `cake lsp`: a real LSP client over stdio.

The agents read exactly the stream a person reads in the editor: the server is started as
a subprocess (`python -m cake lsp`), documents are opened and changed with
`didOpen`/`didChange`, diagnostics are pulled with `textDocument/diagnostic`, and fixes
come from `textDocument/codeAction`.  The client is pygls' `LanguageClient` running on an
event loop in a background thread, so the (synchronous) graph nodes can call it.

Positions are UTF-16, the protocol's default; edits are applied to the text through
`SourceFile.offset_of`, which converts them.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import sys
import threading
from collections.abc import Coroutine, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from cake_core.diagnostics.model import TextEdit, apply_edits
from cake_core.source import SourceFile

T = TypeVar("T")

SEVERITIES = {1: "error", 2: "warning", 3: "information", 4: "hint"}
DEFAULT_COMMAND = (sys.executable, "-m", "cake", "lsp")


class LspError(Exception):
    """The server could not be started, died, or did not answer in time."""


@dataclass(frozen=True)
class LspDiagnostic:
    code: str
    severity: str
    message: str
    line: int
    col: int
    end_line: int
    end_col: int
    raw: Any = None
    """The protocol object, sent back with code-action requests."""

    @property
    def is_error(self) -> bool:
        return self.severity == "error"

    def to_json(self) -> dict[str, Any]:
        return {"code": self.code, "severity": self.severity, "message": self.message,
                "line": self.line, "col": self.col, "end_line": self.end_line,
                "end_col": self.end_col}


@dataclass(frozen=True)
class TacticOffer:
    """A tactic the server offers as a `refactor.rewrite` code action (as in the editor's
    lightbulb menu); its rewrite is computed only when resolved."""

    title: str
    tactic: str
    params: dict[str, Any]


@dataclass(frozen=True)
class QuickFix:
    title: str
    preferred: bool
    edits: tuple[tuple[int, int, int, int, str], ...]
    """(start line, start col, end line, end col, new text), protocol positions."""

    def apply(self, text: str) -> str:
        return apply_lsp_edits(text, self.edits)


def apply_lsp_edits(text: str, edits: Sequence[tuple[int, int, int, int, str]]) -> str:
    src = SourceFile(text)
    out = [TextEdit(src.span(src.offset_of(a, b), src.offset_of(c, d)), new)
           for a, b, c, d, new in edits]
    return apply_edits(text, out)


class CakeLspClient:
    """A running `cake lsp` and the documents this client has open in it."""

    def __init__(self, command: Sequence[str] = DEFAULT_COMMAND, *, root: Path | None = None,
                 timeout_s: float = 60.0, env: dict[str, str] | None = None) -> None:
        self.command = list(command)
        self.root = (root or Path.cwd()).resolve()
        self.timeout_s = timeout_s
        self.env = env
        self.stderr_tail: collections.deque[str] = collections.deque(maxlen=40)
        self.messages: collections.deque[str] = collections.deque(maxlen=100)
        """window/showMessage (and warning or error logMessage) texts from the server."""
        self._versions: dict[str, int] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._client: Any = None
        self.server_info: str = ""

    # -- life cycle ---------------------------------------------------------------------------
    @property
    def running(self) -> bool:
        c = self._client
        return c is not None and not c.stopped and c._server is not None and \
            c._server.returncode is None

    def start(self) -> None:
        if self.running:
            return
        self.stop()
        loop = asyncio.new_event_loop()
        self._loop = loop
        self._thread = threading.Thread(target=loop.run_forever, name="cake-lsp-client",
                                        daemon=True)
        self._thread.start()
        try:
            self._run(self._start())
        except Exception as exc:
            tail = " | ".join(list(self.stderr_tail)[-3:])
            self.stop()
            raise LspError(f"cannot start the language server ({' '.join(self.command)}): "
                           f"{exc}" + (f" [{tail}]" if tail else "")) from exc

    async def _start(self) -> None:
        from lsprotocol import types as lsp
        from pygls.lsp.client import LanguageClient

        client = LanguageClient("cake-evolve", "1")
        self._client = client

        # What the server says to the user (a verifier pass it disabled, a plugin that
        # failed to load) is kept and shown, as an editor would show it.
        @client.feature(lsp.WINDOW_SHOW_MESSAGE)
        def _show(params: lsp.ShowMessageParams) -> None:
            self.messages.append(params.message)

        @client.feature(lsp.WINDOW_LOG_MESSAGE)
        def _log(params: lsp.LogMessageParams) -> None:
            if params.type in (lsp.MessageType.Error, lsp.MessageType.Warning):
                self.messages.append(params.message)

        kwargs: dict[str, Any] = {"cwd": str(self.root)}
        if self.env is not None:
            kwargs["env"] = self.env
        await client.start_io(*self.command, **kwargs)
        asyncio.get_running_loop().create_task(self._drain_stderr())
        caps = lsp.ClientCapabilities(
            text_document=lsp.TextDocumentClientCapabilities(
                diagnostic=lsp.DiagnosticClientCapabilities(dynamic_registration=False),
                code_action=lsp.CodeActionClientCapabilities(
                    code_action_literal_support=lsp.ClientCodeActionLiteralOptions(
                        code_action_kind=lsp.ClientCodeActionKindOptions(
                            value_set=[lsp.CodeActionKind.QuickFix,
                                       lsp.CodeActionKind.SourceFixAll,
                                       lsp.CodeActionKind.RefactorRewrite])),
                    is_preferred_support=True, data_support=True,
                    resolve_support=lsp.ClientCodeActionResolveOptions(properties=["edit"])),
                hover=lsp.HoverClientCapabilities(
                    content_format=[lsp.MarkupKind.Markdown, lsp.MarkupKind.PlainText]),
                synchronization=lsp.TextDocumentSyncClientCapabilities()),
            workspace=lsp.WorkspaceClientCapabilities(
                workspace_edit=lsp.WorkspaceEditClientCapabilities(document_changes=False)),
        )
        result = await client.initialize_async(lsp.InitializeParams(
            capabilities=caps, process_id=None, root_uri=self.root.as_uri(),
            workspace_folders=[lsp.WorkspaceFolder(uri=self.root.as_uri(), name="cake")]))
        info = result.server_info
        self.server_info = f"{info.name} {info.version}" if info is not None else "?"
        client.initialized(lsp.InitializedParams())

    async def _drain_stderr(self) -> None:
        server = self._client._server if self._client is not None else None
        if server is None or server.stderr is None:
            return
        while True:
            line = await server.stderr.readline()
            if not line:
                return
            self.stderr_tail.append(line.decode("utf-8", "replace").rstrip())

    def stop(self) -> None:
        """Shut the server down politely, then make sure the process is gone."""
        loop, client = self._loop, self._client
        if loop is not None and client is not None:
            with contextlib.suppress(Exception):
                self._run(self._shutdown(), timeout=10.0)
        if loop is not None:
            loop.call_soon_threadsafe(loop.stop)
            if self._thread is not None:
                self._thread.join(timeout=5.0)
            with contextlib.suppress(Exception):
                loop.close()
        self._loop, self._client, self._thread = None, None, None
        self._versions.clear()

    async def _shutdown(self) -> None:
        client = self._client
        server = client._server
        if server is not None and server.returncode is None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(client.shutdown_async(None), 5.0)
                client.exit(None)
            try:
                await asyncio.wait_for(server.wait(), 5.0)
            except TimeoutError:
                server.kill()
                await server.wait()
        client._stop_event.set()
        for task in client._async_tasks:
            task.cancel()

    def __enter__(self) -> CakeLspClient:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _run(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        if self._loop is None:
            coro.close()
            raise LspError("the language server is not running")
        fut = asyncio.run_coroutine_threadsafe(coro, self._loop)
        try:
            return fut.result(timeout or self.timeout_s)
        except TimeoutError as exc:
            fut.cancel()
            raise LspError("the language server did not answer in time") from exc
        except LspError:
            raise
        except Exception as exc:
            raise LspError(f"{type(exc).__name__}: {exc}") from exc

    # -- documents ----------------------------------------------------------------------------
    def uri_for(self, name: str) -> str:
        return (self.root / "cake-evolve" / f"{name}.cake").as_uri()

    def open(self, uri: str, text: str) -> list[LspDiagnostic]:
        """didOpen (or a whole-text didChange if already open), then pull diagnostics."""
        if uri in self._versions:
            return self.change(uri, text)
        self._versions[uri] = 1
        return self._run(self._open(uri, text))

    async def _open(self, uri: str, text: str) -> list[LspDiagnostic]:
        from lsprotocol import types as lsp

        self._client.text_document_did_open(lsp.DidOpenTextDocumentParams(
            text_document=lsp.TextDocumentItem(uri=uri, language_id="cake", version=1,
                                               text=text)))
        return await self._pull(uri)

    def change(self, uri: str, text: str) -> list[LspDiagnostic]:
        """didChange with the whole new text, then pull diagnostics."""
        if uri not in self._versions:
            return self.open(uri, text)
        self._versions[uri] += 1
        return self._run(self._change(uri, text, self._versions[uri]))

    async def _change(self, uri: str, text: str, version: int) -> list[LspDiagnostic]:
        from lsprotocol import types as lsp

        self._client.text_document_did_change(lsp.DidChangeTextDocumentParams(
            text_document=lsp.VersionedTextDocumentIdentifier(uri=uri, version=version),
            content_changes=[lsp.TextDocumentContentChangeWholeDocument(text=text)]))
        return await self._pull(uri)

    def close(self, uri: str) -> None:
        if self._versions.pop(uri, None) is None or not self.running:
            return
        self._run(self._close(uri))

    async def _close(self, uri: str) -> None:
        from lsprotocol import types as lsp

        self._client.text_document_did_close(lsp.DidCloseTextDocumentParams(
            text_document=lsp.TextDocumentIdentifier(uri=uri)))

    async def _pull(self, uri: str) -> list[LspDiagnostic]:
        from lsprotocol import types as lsp

        report = await self._client.text_document_diagnostic_async(
            lsp.DocumentDiagnosticParams(text_document=lsp.TextDocumentIdentifier(uri=uri)))
        items = getattr(report, "items", None) or []
        return [_diagnostic(d) for d in items]

    # -- fixes ----------------------------------------------------------------------------------
    def quick_fixes(self, uri: str, diag: LspDiagnostic) -> list[QuickFix]:
        """The server's quick fixes for one of its diagnostics (preferred first)."""
        return self._run(self._actions(uri, diag))

    async def _actions(self, uri: str, diag: LspDiagnostic) -> list[QuickFix]:
        from lsprotocol import types as lsp

        raw = diag.raw
        actions = await self._client.text_document_code_action_async(lsp.CodeActionParams(
            text_document=lsp.TextDocumentIdentifier(uri=uri), range=raw.range,
            context=lsp.CodeActionContext(diagnostics=[raw],
                                          only=[lsp.CodeActionKind.QuickFix])))
        out = []
        for a in actions or []:
            if not isinstance(a, lsp.CodeAction) or a.edit is None:
                continue
            edits = _edits_for(a.edit, uri)
            if edits:
                out.append(QuickFix(a.title, bool(a.is_preferred), tuple(edits)))
        out.sort(key=lambda f: not f.preferred)
        return out


    def safe_fixes(self, uri: str) -> list[tuple[int, int, int, int, str]]:
        """The edits of the server's `source.fixAll` action: every safe fix one pass of
        `cake check --fix` applies (empty when there is none)."""
        return self._run(self._fix_all(uri))

    async def _fix_all(self, uri: str) -> list[tuple[int, int, int, int, str]]:
        from lsprotocol import types as lsp

        zero = lsp.Range(start=lsp.Position(line=0, character=0),
                         end=lsp.Position(line=0, character=0))
        actions = await self._client.text_document_code_action_async(lsp.CodeActionParams(
            text_document=lsp.TextDocumentIdentifier(uri=uri), range=zero,
            context=lsp.CodeActionContext(diagnostics=[],
                                          only=[lsp.CodeActionKind.SourceFixAll])))
        for a in actions or []:
            if isinstance(a, lsp.CodeAction) and a.edit is not None:
                return _edits_for(a.edit, uri)
        return []

    def tactic_offers(self, uri: str, line: int) -> list[TacticOffer]:
        """The tactics offered as code actions for the kernel at `line` (a kernel that
        does not verify gets none, as in the editor)."""
        return self._run(self._tactics(uri, line))

    async def _tactics(self, uri: str, line: int) -> list[TacticOffer]:
        from lsprotocol import types as lsp

        pos = lsp.Position(line=line, character=0)
        actions = await self._client.text_document_code_action_async(lsp.CodeActionParams(
            text_document=lsp.TextDocumentIdentifier(uri=uri),
            range=lsp.Range(start=pos, end=pos),
            context=lsp.CodeActionContext(diagnostics=[],
                                          only=[lsp.CodeActionKind.RefactorRewrite])))
        out = []
        for a in actions or []:
            data = a.data if isinstance(a, lsp.CodeAction) else None
            spec = data.get("cake_tactic") if isinstance(data, dict) else None
            if isinstance(spec, dict):
                out.append(TacticOffer(a.title, str(spec.get("tactic", "")),
                                       dict(spec.get("params") or {})))
        return out

    def hover(self, uri: str, line: int, col: int) -> str:
        """The hover text at a position ("" where the server has none)."""
        return self._run(self._hover(uri, line, col))

    async def _hover(self, uri: str, line: int, col: int) -> str:
        from lsprotocol import types as lsp

        got = await self._client.text_document_hover_async(lsp.HoverParams(
            text_document=lsp.TextDocumentIdentifier(uri=uri),
            position=lsp.Position(line=line, character=col)))
        if got is None:
            return ""
        contents = got.contents
        if isinstance(contents, lsp.MarkupContent):
            return contents.value
        if isinstance(contents, str):
            return contents
        if isinstance(contents, list):
            return "\n\n".join(c if isinstance(c, str) else c.value for c in contents)
        return str(getattr(contents, "value", ""))


def _diagnostic(d: Any) -> LspDiagnostic:
    code = d.code if isinstance(d.code, str) else str(d.code or "")
    sev = SEVERITIES.get(int(d.severity or 1), "error")
    r = d.range
    return LspDiagnostic(code, sev, d.message, r.start.line, r.start.character, r.end.line,
                         r.end.character, d)


def _edits_for(edit: Any, uri: str) -> list[tuple[int, int, int, int, str]]:
    found = []
    if edit.changes:
        found = list(edit.changes.get(uri, []))
    elif edit.document_changes:
        for dc in edit.document_changes:
            td = getattr(dc, "text_document", None)
            if td is not None and td.uri == uri:
                found.extend(dc.edits)
    return [(e.range.start.line, e.range.start.character, e.range.end.line,
             e.range.end.character, e.new_text) for e in found]
