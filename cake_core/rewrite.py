"""Helpers for rewrites (tactics, fixes, agents): find what to edit, and prove the edit safe.

A tactic only ever proposes text edits; `verified` re-checks the edited text so that a
rewrite which would not verify is never offered to a person or an agent.
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from collections.abc import Iterable, Sequence

from cake_core.check import CheckResult, check_source
from cake_core.diagnostics.model import TextEdit
from cake_core.ir.kernel import Kernel, Op, Program, Role
from cake_core.source import SourceFile, Span
from cake_core.syntax.parser import ParseResult, parse, reparse
from cake_core.verify import Pass

_INT = re.compile(rb"\s*(\d+)")


def int_literal_at(source: SourceFile, span: Span) -> int | None:
    """The integer written exactly at `span` (a literal, not an expression), if any."""
    text = source.snippet(span).strip()
    return int(text) if text.isdigit() else None


def constant_site(program: Program, source: SourceFile, name: str) -> tuple[Span, int] | None:
    """Where a top-level int constant is written, when it is a plain literal."""
    span = program.constant_spans.get(name)
    if span is None:
        return None
    value = int_literal_at(source, span)
    return None if value is None else (span, value)


def value_site(program: Program, source: SourceFile, span: Span) -> tuple[Span, int] | None:
    """An argument written as a literal, or as the name of a literal top-level constant."""
    value = int_literal_at(source, span)
    if value is not None:
        return span, value
    name = source.snippet(span).strip()
    if name.isidentifier():
        return constant_site(program, source, name)
    return None


def keyword_value(source: SourceFile, within: Span, keyword: str) -> tuple[Span, int] | None:
    """`keyword=<int>` inside `within` (first occurrence): the int's span and value."""
    data = source.data[within.start.offset:within.end.offset]
    m = re.search(rb"\b" + keyword.encode() + rb"\s*=", data)
    if m is None:
        return None
    n = _INT.match(data, m.end())
    if n is None:
        return None
    start = within.start.offset + n.start(1)
    return source.span(start, start + len(n.group(1))), int(n.group(1))


def role_regs_site(source: SourceFile, role: Role) -> tuple[Span, int] | None:
    header = source.span(role.span.start.offset,
                         role.span.start.offset + len(source.line_text(role.span.start.line)
                                                      .encode()))
    return keyword_value(source, header, "regs")


def ops_named(kernel: Kernel, name: str) -> list[Op]:
    """The ops of the primitive a tactic asks for by the name its user writes."""
    return [op for op in kernel.ops() if op.name == name]  # name-branch: a user's query


def constants_used_in(source: SourceFile, program: Program, spans: Iterable[Span]) -> list[str]:
    """Top-level int constants whose names appear in the text of the given spans."""
    text = " ".join(source.snippet(s) for s in spans)
    return [n for n in program.constant_spans
            if re.search(rf"\b{re.escape(n)}\b", text) and constant_site(program, source, n)]


def verified(source: SourceFile, edits: tuple[TextEdit, ...], *, arch: str | None = None
             ) -> str | None:
    """The edited text when it checks without errors, else None."""
    res = check_edited(source, edits, arch=arch)
    return None if res.errors else res.source.text


def check_edited(source: SourceFile, edits: Iterable[TextEdit], *, arch: str | None = None,
                 passes: Sequence[Pass] | None = None) -> CheckResult:
    """`check_source` of `source` with `edits` applied (as `apply_edits` applies them).

    The edited text is parsed incrementally from `source`'s parse, kept for the next
    rewrite of the same text: a tactic offering variants, or an agent previewing moves,
    edits one parent again and again, and a parse of the parent plus a re-parse of each
    edit costs far less than a full parse of each variant.  `reparse` equals `parse`, so
    the result is the one a full check gives.
    """
    parsed = _parent_parse(source)
    for edit in sorted(edits, key=lambda e: e.span.start.offset, reverse=True):
        parsed = reparse(parsed, edit.span.start.offset, edit.span.end.offset, edit.new_text)
    return check_source(parsed.source, arch=arch, passes=passes, parsed=parsed)


_PARENTS: OrderedDict[tuple[str, str], ParseResult] = OrderedDict()
_PARENTS_LOCK = threading.Lock()
_MAX_PARENTS = 16


def _parent_parse(source: SourceFile) -> ParseResult:
    key = (source.path, source.text)
    with _PARENTS_LOCK:
        found = _PARENTS.get(key)
        if found is not None:
            _PARENTS.move_to_end(key)
            return found
    parsed = parse(source)
    with _PARENTS_LOCK:
        _PARENTS[key] = parsed
        while len(_PARENTS) > _MAX_PARENTS:
            _PARENTS.popitem(last=False)
    return parsed
