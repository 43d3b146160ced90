"""Per-document state: the client's text, its parse, and the latest check of it.

The text is kept current on the event loop: every `didChange` is applied at once (cheap
string splicing).  Parsing and checking run later, on the checker's worker thread, which
alone touches the `Document`: it brings the parse up to date with one incremental
tree-sitter re-parse over the region that changed since the last check, however many
edits arrived in between, then runs `check_source` on that parse with the document's
`KernelChecks`, so that only the kernels the edits touched are type-checked again
(`cake_core/check_cache.py`).

What a check keeps alive for the next one (the parse, its records, the kernels' results)
takes 160 to 240 bytes of memory per byte of text, so a document over
`MAX_DOCUMENT_BYTES` is not parsed or checked at all: its result is empty but for the
refusal, and whatever an earlier, smaller version of it left is dropped.  The text itself
is still kept, so edits apply and the document is checked again once it is back under
the limit.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field

from lsprotocol import types as lsp

from cake_core.check import CheckResult, check_source
from cake_core.check_cache import KernelChecks
from cake_core.ide.index import SymbolIndex, build_index
from cake_core.plugins import PluginSet
from cake_core.primitives.registry import Registry
from cake_core.source import SourceFile
from cake_core.syntax.parser import Document
from cake_core.syntax.reuse import Edit, carry
from cake_core.verify import Pass
from cake_lsp.convert import Codec, path_of_uri

MAX_DOCUMENT_BYTES = 512 << 10
"""The largest document the server checks, in UTF-8 bytes (512 KiB: some 7,500 lines of
one long kernel, 11,000 of many short ones).  Checked, a document this size holds the
server under 200 MB, and one check of it from scratch takes a few seconds."""

Stamp = tuple[int, int]
"""(document version, settings generation): what a check result was computed for."""


@dataclass(frozen=True, slots=True)
class CheckOptions:
    arch: str | None
    plugins: PluginSet
    passes: list[Pass]
    generation: int
    kernel_passes: dict[str, Pass] = field(default_factory=dict)
    """CAKE's own passes, run kernel by kernel so unchanged kernels reuse their findings."""


class OpenDocument:
    def __init__(self, uri: str, text: str, version: int) -> None:
        self.uri = uri
        self.path = path_of_uri(uri)
        self.text = text
        self.version = version
        self._source: tuple[str, SourceFile] | None = None
        self.doc: Document | None = None
        """The parse; owned by the checker's worker thread."""
        self.kernels = KernelChecks()
        """Type-check results of this document's kernels, reused by its next checks
        (owned by the checker's worker thread)."""
        self.result: CheckResult | None = None
        self.stamp: Stamp | None = None
        self.last_good: CheckResult | None = None
        """The latest result that built kernels (completion falls back on it mid-edit)."""
        self.task: asyncio.Task[None] | None = None
        self.closed = False
        self.refused = False
        """Whether the latest result is the refusal of a text over the size limit."""
        self.changed = asyncio.Event()
        """Set whenever a new result is stored (pull requests wait on it)."""
        self._index: tuple[CheckResult, SymbolIndex] | None = None

    # -- the event loop side ----------------------------------------------------------------
    @property
    def source(self) -> SourceFile:
        """The current text (which may be newer than the latest result)."""
        if self._source is None or self._source[0] is not self.text:
            self._source = (self.text, SourceFile(self.text, self.path))
        return self._source[1]

    def apply_changes(self, changes: Sequence[lsp.TextDocumentContentChangeEvent],
                      version: int, codec: Codec) -> None:
        for change in changes:
            if isinstance(change, lsp.TextDocumentContentChangePartial):
                src = self.source
                span = codec.span(src, change.range, strict=False)
                data = src.data
                self.text = (data[:span.start.offset] + change.text.encode(
                    "utf-8", errors="surrogatepass") + data[span.end.offset:]).decode(
                    "utf-8", errors="surrogatepass")
            else:
                self.text = change.text
        self.version = version

    def store(self, result: CheckResult, stamp: Stamp) -> bool:
        """Keep `result` unless a newer one is already stored; True if kept."""
        if self.stamp is not None and stamp < self.stamp:
            return False
        self.result, self.stamp = result, stamp
        if result.has_kernels:
            self.last_good = result
        self.changed.set()
        self.changed = asyncio.Event()
        return True

    def cached_index(self, result: CheckResult) -> SymbolIndex | None:
        return self._index[1] if self._index is not None and self._index[0] is result \
            else None

    def index(self, result: CheckResult, registry: Registry | None = None) -> SymbolIndex:
        """The symbol index of `result`, built on first use and cached."""
        if self._index is None or self._index[0] is not result:
            module = result.parse.module if result.parse is not None else None
            if module is None:
                return SymbolIndex(None)
            self._index = (result, build_index(module, result.program, registry))
        return self._index[1]

    # -- the worker thread side ---------------------------------------------------------------
    def analyze(self, text: str, options: CheckOptions) -> CheckResult:
        """Bring the parse up to `text` and check it (runs on the checker's thread)."""
        if too_large(text):
            self.doc, self.kernels = None, KernelChecks()
            return CheckResult(SourceFile(text, self.path), None, None)
        text = text.removeprefix("\ufeff")  # as SourceFile does, or every check re-parses
        if self.doc is None:
            self.doc = Document(text, self.path)
        elif self.doc.text != text:
            _sync(self.doc, text)
        return check_source(self.doc.source, arch=options.arch, plugins=options.plugins,
                            registry=options.plugins.registry, passes=options.passes,
                            kernel_passes=options.kernel_passes, parsed=self.doc.result,
                            kernels=self.kernels)


def too_large(text: str) -> bool:
    """Whether `text` is over `MAX_DOCUMENT_BYTES` (encoded only when it might be)."""
    if len(text) > MAX_DOCUMENT_BYTES:
        return True
    return 4 * len(text) > MAX_DOCUMENT_BYTES and \
        len(text.encode("utf-8", errors="surrogatepass")) > MAX_DOCUMENT_BYTES


def refused(result: CheckResult) -> bool:
    """Whether `result` is the refusal of a document over the size limit."""
    return result.parse is None and len(result.source.data) > MAX_DOCUMENT_BYTES


def _sync(doc: Document, text: str) -> None:
    """One incremental re-parse covering everything that differs between the texts.

    A parse with a syntax error keeps no records of its statements for the next re-parse
    to reuse; it is handed those of the parse before it, seen through this edit
    (`reuse.carry`), so that the edit which fixes the error converts only what changed.
    """
    before = doc.result
    old = doc.source
    new = text.encode("utf-8", errors="surrogatepass")
    start, old_end, new_end = changed_region(old.data, new)
    a, b = old.position(start), old.position(old_end)
    inserted = new[start:new_end].decode("utf-8", errors="surrogatepass")
    after = doc.apply_change(a.line, a.col_utf16, b.line, b.col_utf16, inserted)
    if doc.text != text:  # a region edge inside a "\r\n": parse the whole text instead
        doc.replace_all(text)
    elif after._records is None:
        edit = Edit(start, old_end, new_end, a.line, b.line,
                    after.source.position(new_end).line)
        after._records = carry(before._records, edit)


def changed_region(old: bytes, new: bytes) -> tuple[int, int, int]:
    """(start, old end, new end) of the smallest byte range that differs, widened to
    whole UTF-8 characters."""
    n = min(len(old), len(new))
    lo, hi = 0, n
    while lo < hi:  # the longest common prefix, by bisection (slice compares are memcmp)
        mid = (lo + hi + 1) // 2
        if old[:mid] == new[:mid]:
            lo = mid
        else:
            hi = mid - 1
    start = lo
    while start > 0 and (_continuation(old, start) or _continuation(new, start)):
        start -= 1
    lo, hi = 0, n - start
    while lo < hi:  # the longest common suffix after the prefix
        mid = (lo + hi + 1) // 2
        if old[len(old) - mid:] == new[len(new) - mid:]:
            lo = mid
        else:
            hi = mid - 1
    old_end, new_end = len(old) - lo, len(new) - lo
    while old_end < len(old) and (_continuation(old, old_end) or _continuation(new, new_end)):
        old_end += 1
        new_end += 1
    return start, old_end, new_end


def _continuation(data: bytes, i: int) -> bool:
    return 0 <= i < len(data) and 0x80 <= data[i] < 0xC0


class UnknownDocument(KeyError):
    pass


class DocumentStore:
    def __init__(self) -> None:
        self._docs: dict[str, OpenDocument] = {}

    def open(self, uri: str, text: str, version: int) -> OpenDocument:
        doc = OpenDocument(uri, text, version)
        self._docs[uri] = doc
        return doc

    def close(self, uri: str) -> OpenDocument | None:
        return self._docs.pop(uri, None)

    def get(self, uri: str) -> OpenDocument:
        try:
            return self._docs[uri]
        except KeyError:
            raise UnknownDocument(uri) from None

    def __iter__(self):
        return iter(list(self._docs.values()))

    def __len__(self) -> int:
        return len(self._docs)


__all__ = ["MAX_DOCUMENT_BYTES", "CheckOptions", "DocumentStore", "OpenDocument", "Stamp",
           "UnknownDocument", "changed_region", "refused", "too_large"]
