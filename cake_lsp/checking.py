"""When checks run and where their results go.

Checks run on one worker thread, never on the event loop, so the server keeps reading
messages while a large file is checked.  Each open document has at most one check task:
edits that arrive while it waits (a short debounce) or while its check runs are folded
into the next check, which always takes the newest text.  A result is published only if
it still matches the document's version and the settings it was computed with; an older
result is kept for hovers but never shown over a newer one.

Diagnostics are pushed (`textDocument/publishDiagnostics`) to clients that cannot pull
them, and only pulled (`textDocument/diagnostic`) by clients that can: never both, or
clients such as Neovim show each diagnostic twice.
"""

from __future__ import annotations

import asyncio
import logging
import time
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

from lsprotocol import types as lsp

from cake_core.check import CheckResult
from cake_core.diagnostics import codes
from cake_lsp.documents import OpenDocument, Stamp, UnknownDocument
from cake_lsp.heap import IDLE_S

if TYPE_CHECKING:
    from cake_lsp.server import CakeLanguageServer

logger = logging.getLogger(__name__)

DEBOUNCE_S = 0.0
"""How long a check waits for more edits before it starts.  Zero still yields to the
event loop once, so edits already received are folded in; edits that arrive while a
check runs are folded into the next one, so a burst costs at most two checks."""


class Checker:
    def __init__(self, server: CakeLanguageServer, delay: float = DEBOUNCE_S) -> None:
        self.server = server
        self.delay = delay
        self.executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="cake-check")
        self._idle: asyncio.TimerHandle | None = None

    def stamp(self, doc: OpenDocument) -> Stamp:
        return (doc.version, self.server.generation)

    def schedule(self, doc: OpenDocument) -> None:
        """Make sure a check of the document's current text is coming."""
        if not doc.closed and (doc.task is None or doc.task.done()):
            if self._idle is not None:
                self._idle.cancel()
            doc.task = asyncio.get_running_loop().create_task(self._run(doc))

    async def current(self, doc: OpenDocument) -> CheckResult:
        """The result for the document as it is now, waiting for its check if needed.

        Raises `UnknownDocument` if the document is closed meanwhile.
        """
        while True:
            if doc.closed:
                raise UnknownDocument(doc.uri)
            if doc.result is not None and doc.stamp == self.stamp(doc):
                return doc.result
            changed = doc.changed
            self.schedule(doc)
            await changed.wait()

    def close(self, doc: OpenDocument) -> None:
        doc.closed = True
        doc.changed.set()  # wake requests waiting for a check that will not come
        if doc.task is not None:
            doc.task.cancel()
        if not self.server.pull_diagnostics:
            self.server.text_document_publish_diagnostics(
                lsp.PublishDiagnosticsParams(uri=doc.uri, diagnostics=[]))

    async def _run(self, doc: OpenDocument) -> None:
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(self.delay)
            stamp = self.stamp(doc)
            if doc.stamp == stamp or doc.closed:
                return
            text, options = doc.text, self.server.check_options()
            started = time.perf_counter()
            try:
                result = await loop.run_in_executor(self.executor, doc.analyze, text, options)
            except Exception as exc:  # the checker's own fault: report it, keep serving
                logger.exception("check of %s failed", doc.uri)
                source = doc.source
                result = CheckResult(source, None, None, [codes.INTERNAL_ERROR.at(
                    source.span(0, 0), f"internal error in the language server: "
                    f"{type(exc).__name__}: {exc}").with_path(source.path)])
            logger.info("checked %s v%d in %.1f ms", doc.uri, stamp[0],
                        (time.perf_counter() - started) * 1e3)
            doc.store(result, stamp)
            if stamp == self.stamp(doc):
                if not self.server.pull_diagnostics:
                    self.publish(doc, result)
                self._after_check(loop)
                return

    def _after_check(self, loop: asyncio.AbstractEventLoop) -> None:
        """Freeze what the check left alive; sweep once no check has run for a while."""
        heap = self.server.heap
        heap.checked()
        if self._idle is not None:
            self._idle.cancel()
        self._idle = loop.call_later(IDLE_S, heap.idle)

    def publish(self, doc: OpenDocument, result: CheckResult) -> None:
        self.server.text_document_publish_diagnostics(lsp.PublishDiagnosticsParams(
            uri=doc.uri, version=doc.version,
            diagnostics=self.server.lsp_diagnostics(doc, result)))

    def recheck_all(self) -> None:
        """After a settings change: every open document gets a fresh check."""
        for doc in self.server.documents:
            self.schedule(doc)
        if self.server.pull_diagnostics and self.server.can_refresh_diagnostics:
            self.server.workspace_diagnostic_refresh(None)

    def shutdown(self) -> None:
        self.executor.shutdown(wait=False, cancel_futures=True)


def result_id(stamp: Stamp | None) -> str | None:
    return None if stamp is None else f"{stamp[0]}.{stamp[1]}"


__all__ = ["DEBOUNCE_S", "Checker", "result_id"]
