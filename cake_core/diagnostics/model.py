"""The one diagnostic model shared by the CLI, the language server and the agents.

A diagnostic is data: a stable code, a severity, a one-line message, where it is, what
else is involved, notes, and zero or more mechanical fixes.  Renderers (text, JSON,
SARIF, LSP) only format it; policy such as the default severity or the docs page
comes from the code's `Rule` metadata in `codes.py`.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from enum import StrEnum

from cake_core.source import Span


class Severity(StrEnum):
    ERROR = "error"
    WARNING = "warning"
    INFO = "info"
    HINT = "hint"

    @property
    def rank(self) -> int:
        return {"error": 0, "warning": 1, "info": 2, "hint": 3}[self.value]


class Applicability(StrEnum):
    """How safe a fix is to apply without looking (ruff's terms).

    `safe` keeps the kernel's meaning apart from removing the problem; `unsafe`
    changes behaviour (a different tile size, fewer stages) and wants a human or an
    agent to accept it; `display_only` is shown but never applied automatically.
    """

    SAFE = "safe"
    UNSAFE = "unsafe"
    DISPLAY_ONLY = "display_only"


@dataclass(frozen=True, slots=True)
class TextEdit:
    """Replace the text in `span` by `new_text` (an insertion when the span is empty)."""

    span: Span
    new_text: str


@dataclass(frozen=True, slots=True)
class Fix:
    title: str
    edits: tuple[TextEdit, ...]
    applicability: Applicability = Applicability.SAFE


@dataclass(frozen=True, slots=True)
class Related:
    """Another place involved in the same finding (the other side of a race, say)."""

    span: Span
    message: str
    path: str | None = None


@dataclass(frozen=True, slots=True)
class Diagnostic:
    code: str
    severity: Severity
    message: str
    span: Span
    path: str = "<input>"
    related: tuple[Related, ...] = ()
    notes: tuple[str, ...] = ()
    fixes: tuple[Fix, ...] = ()
    source: str = "cake"
    """Who produced it: "cake" for built-ins, the plugin name for plugin rules."""
    data: dict[str, object] = field(default_factory=dict, compare=False, hash=False)
    """Machine-readable facts (e.g. the smem bytes) for agents and tests."""

    def with_path(self, path: str) -> Diagnostic:
        return replace(self, path=path)

    @property
    def sort_key(self) -> tuple[str, int, int, str]:
        return (self.path, self.span.start.offset, self.severity.rank, self.code)


def sort_diagnostics(diags: list[Diagnostic]) -> list[Diagnostic]:
    """Order by file and position, dropping exact duplicates (one bug, one finding)."""
    seen: set[tuple[str, str, int, int, str]] = set()
    out: list[Diagnostic] = []
    for d in sorted(diags, key=lambda d: d.sort_key):
        key = (d.path, d.code, d.span.start.offset, d.span.end.offset, d.message)
        if key not in seen:
            seen.add(key)
            out.append(d)
    return out


def apply_edits(text: str, edits: tuple[TextEdit, ...] | list[TextEdit]) -> str:
    """Apply non-overlapping edits (byte-offset spans) to `text`."""
    data = text.encode("utf-8", errors="surrogatepass")
    for edit in sorted(edits, key=lambda e: e.span.start.offset, reverse=True):
        data = (
            data[: edit.span.start.offset]
            + edit.new_text.encode("utf-8", errors="surrogatepass")
            + data[edit.span.end.offset :]
        )
    return data.decode("utf-8", errors="surrogatepass")
