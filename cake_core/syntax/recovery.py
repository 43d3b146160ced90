"""Syntax errors: good CK001 messages, tight ranges, fixes, and a repaired text to convert.

When tree-sitter reports an error, the mechanical flaws found by `tokens.scan` near it
(a missing `:`, an unclosed or mismatched bracket, an unterminated string, a comma
missing between two names of a target list) are reported
with their fix, and the text is repaired in memory and parsed again so that the code
around the error keeps its AST.  `PatchMap` carries offsets of the repaired buffer back
to the user's text.  Whatever ERROR and MISSING nodes remain get a message naming the
unexpected or missing token, at the first line of the problem rather than the whole
region tree-sitter gave up on.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable
from dataclasses import dataclass

from tree_sitter import Node as TSNode

from cake_core.diagnostics.codes import SYNTAX_ERROR
from cake_core.diagnostics.model import Applicability, Diagnostic, Fix, TextEdit
from cake_core.source import Span
from cake_core.syntax.tokens import Flaw, scan

SpanOf = Callable[[int, int], Span]

_MAX_ERRORS = 50
"""Beyond this many error nodes the rest are cascades; one summary is enough."""

_ERROR_NEARBY = 2
"""Bytes of slack when matching a flaw to a tree-sitter error range."""


@dataclass(frozen=True, slots=True)
class PatchMap:
    """Byte offsets in a repaired buffer -> offsets in the original text."""

    starts: tuple[int, ...]
    """Offset in the repaired buffer where each patch's inserted text begins."""
    flaws: tuple[Flaw, ...]
    shift_after: tuple[int, ...]
    """Total bytes added by the patches up to and including each one."""

    def __call__(self, offset: int) -> int:
        i = bisect.bisect_right(self.starts, offset) - 1
        if i < 0:
            return offset
        flaw = self.flaws[i]
        start = self.starts[i]
        if offset < start + len(flaw.insert):
            return flaw.at + min(offset - start, flaw.remove)
        return offset - self.shift_after[i]


def error_ranges(root: TSNode) -> list[tuple[int, int]]:
    """Byte ranges of the ERROR and MISSING nodes (without walking error-free subtrees)."""
    out: list[tuple[int, int]] = []
    stack = [root]
    while stack:
        node = stack.pop()
        if node.is_error or node.is_missing:
            out.append((node.start_byte, node.end_byte))
            continue
        stack.extend(c for c in node.children if c.has_error or c.is_missing)
    return out


def find_repairs(data: bytes, errors: list[tuple[int, int]],
                 root: TSNode | None = None) -> list[Flaw]:
    """The scanner's flaws that tree-sitter also tripped over (so never a false alarm
    on text that parses), in text order, without overlaps.

    With the tree's `root`, only the top-level statements around the errors are scanned:
    the statements before the first error parsed, so the scanner would leave each of them
    with no bracket or string open, and a flaw far past the last error cannot touch it.
    A typo in a long file then costs a scan of its kernel, not of the file.
    """
    if not errors:
        return []
    errors = sorted(errors)
    starts = [e[0] for e in errors]
    lo, hi = _window(data, root, errors[0][0], max(e[1] for e in errors))
    chosen: list[Flaw] = []
    last_end = -1
    for flaw in scan(data, lo, hi):
        first = flaw.statement if flaw.statement >= 0 else flaw.at
        if flaw.kind in ("colon", "comma"):
            # tree-sitter's error starts at the keyword, or, when the header and its body
            # read on as one expression, anywhere in the body; a target list missing a
            # comma may be split anywhere up to its `=`
            lo, hi = _line_start(data, first), _block_end(data, flaw.at, first)
        elif flaw.kind == "unclosed":
            # what follows an unclosed bracket reads on as its contents: the error may
            # come anywhere up to the end of the statement's block
            lo, hi = flaw.start, _block_end(data, flaw.at, first)
        else:
            lo, hi = flaw.start, max(flaw.end, flaw.at) + 1
        if not _overlaps(errors, starts, lo - _ERROR_NEARBY, hi + _ERROR_NEARBY):
            continue
        if flaw.at < last_end:
            continue
        chosen.append(flaw)
        last_end = flaw.at + flaw.remove
    chosen.sort(key=lambda f: (f.at, f.remove))
    return chosen


def _window(data: bytes, root: TSNode | None, first: int, last: int) -> tuple[int, int | None]:
    """[lo, hi) of the top-level statements from the one holding byte `first` through the
    one after the statement holding byte `last` (the whole text without a tree)."""
    if root is None:
        return 0, None
    bounds = [(c.start_byte, c.end_byte, c.is_error) for c in root.children]
    lo = 0
    for start, _, is_error in bounds:
        if start > first:
            break
        if not is_error and (start == 0 or data[start - 1 : start] == b"\n"):
            lo = start
    hi: int | None = None
    after = 0
    for start, end, _ in bounds:
        if start > last:
            after += 1
            if after == 2:  # the statement after the one past `last`
                break
        hi = end
    if hi is None or after < 2:
        return lo, None
    newline = data.find(b"\n", hi)
    return lo, None if newline == -1 else newline + 1


def _overlaps(errors: list[tuple[int, int]], starts: list[int], lo: int, hi: int) -> bool:
    i = bisect.bisect_right(starts, hi)
    return any(errors[k][1] >= lo for k in range(i))


def _line_start(data: bytes, offset: int) -> int:
    return data.rfind(b"\n", 0, offset) + 1


def _block_end(data: bytes, header_end: int, first: int) -> int:
    """End of the block under the compound statement header that ends at `header_end`
    and begins at `first`: the first non-blank line indented no deeper than the header's
    first line.  (A header continued over several lines, `def f(a,` then `b)`, indents
    its continuation deeper than its body; measured there, the block would end at once.)"""
    start = _line_start(data, first)
    indent = start
    while indent < len(data) and data[indent] in b" \t":
        indent += 1
    indent -= start
    pos = data.find(b"\n", header_end)
    while pos != -1:
        nxt = data.find(b"\n", pos + 1)
        line = data[pos + 1 : nxt if nxt != -1 else len(data)]
        body = line.lstrip(b" \t")
        if body and body[:1] not in b"#\r" and len(line) - len(body) <= indent:
            return pos + 1
        pos = nxt
    return len(data)


def apply_repairs(data: bytes, flaws: list[Flaw]) -> tuple[bytes, PatchMap]:
    parts: list[bytes] = []
    starts: list[int] = []
    shifts: list[int] = []
    pos = 0
    shift = 0
    for flaw in flaws:
        parts.append(data[pos : flaw.at])
        starts.append(flaw.at + shift)
        parts.append(flaw.insert)
        shift += len(flaw.insert) - flaw.remove
        shifts.append(shift)
        pos = flaw.at + flaw.remove
    parts.append(data[pos:])
    return b"".join(parts), PatchMap(tuple(starts), tuple(flaws), tuple(shifts))


def flaw_diagnostic(flaw: Flaw, span_of: SpanOf) -> Diagnostic:
    span = span_of(flaw.start, flaw.end)
    fixes: tuple[Fix, ...] = ()
    if flaw.fixable:
        edit_span = span_of(flaw.at, flaw.at + flaw.remove)
        new_text = "" if flaw.kind == "unmatched" else flaw.insert.decode()
        title = "delete the bracket" if not new_text else f"insert `{new_text}`"
        if flaw.kind == "mismatched":
            title = f"replace with `{new_text}`"
        fixes = (Fix(title, (TextEdit(edit_span, new_text),), Applicability.SAFE),)
    return SYNTAX_ERROR.at(span, flaw.message, fixes=fixes)


# --- messages for ERROR and MISSING nodes ------------------------------------------------
def error_diagnostics(root: TSNode, data: bytes, span_of: SpanOf) -> list[Diagnostic]:
    """One CK001 per ERROR or MISSING node, each pointing at the offending token."""
    out: list[Diagnostic] = []
    stack = [root]
    count = 0
    while stack:
        node = stack.pop()
        if node.is_missing:
            out.append(_missing(node, span_of))
            count += 1
        elif node.is_error and not _wraps_statements(node):
            out.append(_error(node, data, span_of))
            count += 1
        else:
            stack.extend(reversed([c for c in node.children if c.has_error or c.is_missing]))
            continue
        if count >= _MAX_ERRORS and stack:
            out.append(SYNTAX_ERROR.at(
                out[-1].span, "too many syntax errors; the rest of the file was not checked"
            ))
            break
    return out


def _wraps_statements(node: TSNode) -> bool:
    """An ERROR that holds whole statements around a smaller ERROR (a stray `else`):
    the smaller one is the problem, and the statements are converted as usual."""
    inner_error = False
    statement = False
    for child in node.children:
        kind = child.type
        if child.has_error:
            inner_error = True
        if kind.endswith("_statement") or kind.endswith("_definition"):
            statement = True
    return inner_error and statement


def _missing(node: TSNode, span_of: SpanOf) -> Diagnostic:
    at = span_of(node.start_byte, node.start_byte)
    kind = node.type
    if node.is_named:
        what = "a name" if kind == "identifier" else f"{_article(kind)} {kind.replace('_', ' ')}"
        return SYNTAX_ERROR.at(at, f"expected {what}")
    fixes = (Fix(f"insert `{kind}`", (TextEdit(at, kind),), Applicability.SAFE),)
    return SYNTAX_ERROR.at(at, f"expected `{kind}`", fixes=fixes)


def _article(word: str) -> str:
    return "an" if word[:1] in "aeiou" else "a"


def _error(node: TSNode, data: bytes, span_of: SpanOf) -> Diagnostic:
    children = [c for c in node.children if c.type not in ("comment", "line_continuation")]
    while len(children) == 1 and children[0].is_error:
        node = children[0]
        children = [c for c in node.children if c.type not in ("comment", "line_continuation")]
    start, end = node.start_byte, _line_end(data, node.start_byte, node.end_byte)
    if not children:
        char = data[start:end].decode("utf-8", errors="replace")[:1]
        if char and not char.isprintable():
            return SYNTAX_ERROR.at(span_of(start, start + len(char.encode())),
                                   f"invalid character U+{ord(char):04X}")
        return SYNTAX_ERROR.at(span_of(start, start + len(char.encode())),
                               f"invalid character `{char}`")
    first, last = children[0], children[-1]
    nxt = _sibling(node, forward=True)
    prev = _sibling(node, forward=False)
    stray = next((c for c in children if c.type in _CONTINUATIONS and _starts_line(c, data)),
                 None)
    if stray is not None:
        return SYNTAX_ERROR.at(
            span_of(stray.start_byte, stray.end_byte),
            f"`{stray.type}` without a matching `{_CONTINUATIONS[stray.type]}` "
            "at the same indentation",
        )
    conditional = _conditional_without_else(children, prev)
    if conditional is not None:
        return SYNTAX_ERROR.at(
            span_of(conditional.start_byte,
                    _line_end(data, conditional.start_byte, node.end_byte)),
            "expected `else` in the conditional expression: `a if test else b` needs both "
            "branches",
        )
    if last.is_named and not last.is_error and _same_line(last, nxt) and nxt is not None \
            and nxt.is_named:
        return _missing_separator(last, nxt, data, span_of)
    if first.is_named and not first.is_error and _same_line(prev, first) and prev is not None \
            and prev.is_named:
        return _missing_separator(prev, first, data, span_of)
    if not last.is_named and last.type not in _CLOSERS and (
            not _same_line(last, nxt) or (nxt is not None and nxt.type in _CLOSERS)):
        return SYNTAX_ERROR.at(span_of(last.start_byte, last.end_byte),
                               f"expected an expression after `{_token_text(last)}`")
    if len(children) == 1 and not first.is_named:
        return SYNTAX_ERROR.at(span_of(first.start_byte, first.end_byte),
                               f"unexpected `{_token_text(first)}`")
    dangling = _dangling_operator(node)
    if dangling is not None:
        return SYNTAX_ERROR.at(span_of(dangling.start_byte, dangling.end_byte),
                               f"expected an expression after `{_token_text(dangling)}`")
    first_bad = next((c for c in children if not c.is_named or c.is_error), None)
    if first_bad is not None and first_bad.start_byte != start and \
            node.start_point[0] == first_bad.start_point[0]:
        return SYNTAX_ERROR.at(
            span_of(first_bad.start_byte,
                    _line_end(data, first_bad.start_byte, first_bad.end_byte)),
            f"invalid syntax: unexpected `{_token_text(first_bad)}`",
        )
    return SYNTAX_ERROR.at(span_of(start, end), "invalid syntax")


_CLOSERS = frozenset({")", "]", "}", ":", ","})
_CONTINUATIONS = {"else": "if", "elif": "if", "except": "try", "finally": "try"}


def _starts_line(node: TSNode, data: bytes) -> bool:
    line_start = data.rfind(b"\n", 0, node.start_byte) + 1
    return not data[line_start : node.start_byte].strip()


def _conditional_without_else(children: list[TSNode], prev: TSNode | None) -> TSNode | None:
    """The `if` of `a if test` (no `else`) among an ERROR's tokens, if there is one."""
    if any(c.type == "else" for c in children):
        return None
    for i, child in enumerate(children):
        if child.type != "if":
            continue
        before = children[i - 1] if i > 0 else prev
        if before is not None and before.is_named and _same_line(before, child):
            return child
    return None


def _dangling_operator(node: TSNode) -> TSNode | None:
    """An operator that ends a line outside brackets (`x = 1 +` then a new line)."""
    if node.start_point[0] == node.end_point[0]:
        return None
    depth = 0
    prev: TSNode | None = None
    escaped = False
    stack = [node]
    while stack:
        leaf = stack.pop()
        if leaf.child_count and leaf.type != "string":
            stack.extend(reversed(leaf.children))
            continue
        if leaf.type == "comment":
            continue
        if leaf.type == "line_continuation":
            escaped = True
            continue
        if prev is not None and depth == 0 and not escaped and \
                leaf.start_point[0] > prev.end_point[0]:
            if not prev.is_named and prev.type not in _CLOSERS:
                return prev
            return None
        escaped = False
        if leaf.type in ("(", "[", "{"):
            depth += 1
        elif leaf.type in (")", "]", "}"):
            depth = max(0, depth - 1)
        prev = leaf
    return None


def _sibling(node: TSNode, forward: bool) -> TSNode | None:
    sib = node.next_sibling if forward else node.prev_sibling
    while sib is not None and sib.type in ("comment", "line_continuation"):
        sib = sib.next_sibling if forward else sib.prev_sibling
    return sib


def _same_line(a: TSNode | None, b: TSNode | None) -> bool:
    return a is not None and b is not None and a.end_point[0] == b.start_point[0]


def _missing_separator(left: TSNode, right: TSNode, data: bytes, span_of: SpanOf) -> Diagnostic:
    a, b = _edge_leaf(left, last=True), _edge_leaf(right, last=False)
    span = span_of(a.start_byte, _line_end(data, b.start_byte, b.end_byte))
    if a.end_byte == b.start_byte:
        glued = data[a.start_byte : b.end_byte].decode("utf-8", errors="replace")
        return SYNTAX_ERROR.at(span, f"invalid syntax: `{glued}` is not a valid name or number")
    return SYNTAX_ERROR.at(
        span,
        f"invalid syntax: is a `,` or an operator missing between `{_token_text(a)}` "
        f"and `{_token_text(b)}`?",
    )


def _edge_leaf(node: TSNode, last: bool) -> TSNode:
    """The first or last token of a node (strings count as one token)."""
    while node.child_count and node.type not in ("string", "concatenated_string"):
        nxt = node.children[-1 if last else 0]
        node = nxt
    return node


def _line_end(data: bytes, start: int, end: int) -> int:
    newline = data.find(b"\n", start, end)
    if newline == -1:
        return end
    return newline - 1 if newline > start and data[newline - 1] == 0x0D else newline


def _token_text(node: TSNode, limit: int = 20) -> str:
    text = (node.text or b"").decode("utf-8", errors="replace")
    text = text.split("\n", 1)[0].rstrip("\r")
    return text if len(text) <= limit else text[: limit - 3] + "..."
