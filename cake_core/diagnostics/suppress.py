"""Inline suppression: `# cake: ignore[CK306]` hides findings that start on its line.

A directive names one code, several (`# cake: ignore[CK306, CK302]`), or none
(`# cake: ignore`, any code).  It silences the findings whose primary range starts on
the line the comment sits on, and nothing else, so moving code keeps the suppression with
the statement it was written for.  A directive, or a code in one, that silences nothing is
itself a finding (CK006): a suppression that outlived its bug would otherwise hide the
next bug on that line.  This runs inside `check_source`, so the command line, the
language server and the agents all honour the same comments.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from tree_sitter import Tree

from cake_core.diagnostics import codes
from cake_core.diagnostics.model import Applicability, Diagnostic, Fix, TextEdit
from cake_core.source import SourceFile

MARKER = b"cake:"
"""Every directive holds it: a file without it is not scanned further."""
_DIRECTIVE = re.compile(rb"#[ \t]*cake:[ \t]*ignore(?![\w-])(?:\[(?P<codes>[^\]\r\n]*)\])?")


@dataclass(frozen=True, slots=True)
class Directive:
    """One `# cake: ignore[...]` comment: its line, byte range and codes (empty: any)."""

    line: int
    start: int
    end: int
    codes: tuple[str, ...]


def find_directives(source: SourceFile, tree: Tree | None) -> list[Directive]:
    """The directives in comments of `source` (a `#` inside a string literal is no comment;
    without a tree every match counts)."""
    if MARKER not in source.data:
        return []
    out = []
    for m in _DIRECTIVE.finditer(source.data):
        if tree is not None:
            node = tree.root_node.descendant_for_byte_range(m.start(), m.start() + 1)
            if node is None or node.type != "comment":
                continue
        listed = (m.group("codes") or b"").decode("utf-8", errors="replace")
        names = tuple(c.strip().upper() for c in listed.split(",") if c.strip())
        out.append(Directive(source.position(m.start()).line, m.start(), m.end(), names))
    return out


def apply_suppressions(source: SourceFile, tree: Tree | None,
                       findings: list[Diagnostic]) -> list[Diagnostic]:
    """`findings` less the suppressed ones, plus a CK006 for each directive (or code of
    one) that suppressed nothing."""
    directives = find_directives(source, tree)
    if not directives:
        return findings
    by_line = {d.line: d for d in directives}
    used: dict[int, set[str]] = {d.line: set() for d in directives}
    kept = []
    for f in findings:
        directive = by_line.get(f.span.start.line)
        if directive is None or (directive.codes and f.code not in directive.codes):
            kept.append(f)
        else:
            used[directive.line].add(f.code)
    return kept + [u for d in directives if (u := _unused(source, d, used[d.line])) is not None]


def _unused(source: SourceFile, d: Directive, used: set[str]) -> Diagnostic | None:
    span = source.span(d.start, d.end)
    if not d.codes:
        if used:
            return None
        return codes.UNUSED_SUPPRESSION.at(
            span, "unused suppression: no finding starts on this line",
            fixes=[_removal(source, d)], data={"unused": []})
    unused = [c for c in d.codes if c not in used]
    if not unused:
        return None
    described = ", ".join(f"`{c}`" + ("" if codes.lookup(c) else " (unknown code)")
                          for c in unused)
    keep = [c for c in d.codes if c in used]
    if keep:
        text = "# cake: ignore[" + ", ".join(keep) + "]"
        fix = Fix(f"keep only {', '.join(keep)}", (TextEdit(span, text),),
                  Applicability.SAFE)
    else:
        fix = _removal(source, d)
    return codes.UNUSED_SUPPRESSION.at(
        span, f"unused suppression: {described} has no finding on this line",
        fixes=[fix], data={"unused": unused})


def _removal(source: SourceFile, d: Directive) -> Fix:
    """Delete the directive with the blanks before it; the whole line when nothing else
    is on it."""
    line_start = source.line_starts[d.line]
    start = d.start
    while start > line_start and source.data[start - 1] in b" \t":
        start -= 1
    end = d.end
    rest = source.data[end:].split(b"\n", 1)[0]
    if not rest.strip() and start == line_start:
        end += len(rest) + (1 if end + len(rest) < len(source.data) else 0)
    elif rest.strip():  # a reason follows the directive: it stays a comment
        return Fix("remove the unused suppression", (TextEdit(source.span(d.start, end), "#"),),
                   Applicability.SAFE)
    return Fix("remove the unused suppression", (TextEdit(source.span(start, end), ""),),
               Applicability.SAFE)
