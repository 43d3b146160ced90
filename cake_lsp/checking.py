"""When checks run and where their results go.

Checks run on one worker thread, never on the event loop, so the server keeps reading
messages while a large file is checked.  Each open document has at most one check task,
an asyncio task that loops until the document's newest version is checked:

* before a check it waits until the document has had no edit for `DEBOUNCE_S` (at most
  `SETTLE_MAX_S` in all), so a burst of edits that arrive together (an editor replaying
  queued keystrokes, a multi-cursor edit, an undo run) costs one check, not one each;
* the check always takes the newest text; a result whose version was superseded while it
  ran is stored (hovers and completion may use it) but never published, and the loop goes
  on to the newest version at once.  So no diagnostics are published for a version the
  server knows to be out of date, and the last edit of a burst waits for at most the
  remainder of one check plus its own.

Why not cancel the running check instead: a Python thread cannot be interrupted, and
cancelling the asyncio task only abandons the await while the thread runs on, so a
cancelled check would still occupy the worker and a second one would queue behind it.
A check in a subprocess could be killed, but the parse and the per-kernel caches that
make a check incremental live in this process.  Letting the superseded check finish is
not wasted either: the next check reuses the kernels it type-checked.

Why an asyncio task per document: pygls 2 runs every handler on one event loop, so the
task sees each `didChange` as soon as it is applied (the version it compares is plain
state, no locks), and the edits of a burst reach it together because the server reads
stdin on that loop (`server.py`).  For clients that pull, the loop is the same, minus the
publishing: a pull request waits for the check of the version it asks about.

The debounce is short (a few milliseconds) because an edit typed by hand is never part of
a burst: a human's keystrokes come 50 ms or more apart and each is checked in about 10 ms
at 200 lines, so each is checked and published while it is the newest.  A longer wait
would only add to every edit's latency.

A result is published only if it still matches the document's version and the settings
it was computed with; an older result is kept for hovers but never shown over a newer
one.  Diagnostics are pushed (`textDocument/publishDiagnostics`) to clients that cannot
pull them, and only pulled (`textDocument/diagnostic`) by clients that can: never both,
or clients such as Neovim show each diagnostic twice.
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
from cake_lsp.documents import MAX_DOCUMENT_BYTES, OpenDocument, Stamp, UnknownDocument, refused
from cake_lsp.heap import IDLE_S

if TYPE_CHECKING:
    from cake_lsp.server import CakeLanguageServer

logger = logging.getLogger(__name__)

DEBOUNCE_S = 0.004
"""How long a document must go without an edit before its check starts."""
DRAIN_S = 0.001
"""After a check, how long the loop reads messages before the result is published: edits
that reached the server while the check held the interpreter are read first, so a result
they supersede is not published."""
SETTLE_MAX_S = 0.05
"""The longest a check waits for edits to stop (a stream that never pauses still gets
diagnostics of some version every so often)."""


class Checker:
    def __init__(self, server: CakeLanguageServer, delay: float = DEBOUNCE_S) -> None:
        self.server = server
        self.delay = delay
        self.executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="cake-check")
        self._idle: asyncio.TimerHandle | None = None
        self.superseded = 0
        """Checks whose result was not published: a newer version arrived meanwhile."""

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

    async def _settle(self, doc: OpenDocument) -> None:
        """Wait until the document has had no edit for `delay` (at most `SETTLE_MAX_S`)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + SETTLE_MAX_S
        while True:
            version = doc.version
            await asyncio.sleep(self.delay)
            if doc.version == version or doc.closed or loop.time() >= deadline:
                return

    async def _run(self, doc: OpenDocument) -> None:
        loop = asyncio.get_running_loop()
        while True:
            await self._settle(doc)
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
            if doc.store(result, stamp):
                self._note_refusal(doc, result)
            self._after_check(loop)  # every check, published or not (`heap.py`)
            if self.server.pull_diagnostics:
                if stamp == self.stamp(doc):
                    return
                continue
            await asyncio.sleep(DRAIN_S)  # take in the edits that arrived during the check
            if stamp == self.stamp(doc):
                self.publish(doc, result)
                return
            self.superseded += 1
            logger.info("v%d of %s superseded by v%d while checked: not published",
                        stamp[0], doc.uri, doc.version)

    def _note_refusal(self, doc: OpenDocument, result: CheckResult) -> None:
        """Tell the user, once each time a document goes over the size limit."""
        was, doc.refused = doc.refused, refused(result)
        if doc.refused:
            doc.last_good = None  # nothing of the larger text's checks stays alive
            if not was:
                self.server.window_show_message(lsp.ShowMessageParams(
                    type=lsp.MessageType.Warning, message="CAKE: " + refusal_message(result)))

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


def refusal_message(result: CheckResult) -> str:
    size = len(result.source.data)
    return (f"{result.source.path or 'this document'} is {size / 2**20:.1f} MiB, over the "
            f"language server's limit of {MAX_DOCUMENT_BYTES >> 10} KiB: it is not "
            f"checked, and editor features are off for it. Split it, or check it with "
            f"`cake check`.")


def result_id(stamp: Stamp | None) -> str | None:
    return None if stamp is None else f"{stamp[0]}.{stamp[1]}"


__all__ = ["DEBOUNCE_S", "SETTLE_MAX_S", "Checker", "refusal_message", "result_id"]
