"""A small bracket-aware scanner that finds the mechanical syntax errors.

Tree-sitter recovers from a missing `:` or an unclosed bracket by wrapping everything up
to the next dedent in one ERROR node, which says neither what is wrong nor where.  These
errors are visible in the token stream, though: this scanner reads the text the way
Python's tokenizer splits logical lines and reports the `Flaw`s it sees (missing colon,
unclosed or mismatched bracket, unterminated string), each with the edit that repairs it.
It runs only when tree-sitter has found an error, and on bytes, so offsets are the byte
offsets every span uses.

A missing comma is mechanical in one place: between two names of a target list
(`a, b c = ...`, `for i, j k in ...`), where no operator can stand.  Tree-sitter splits
such a line into several errors, one of them far from the slip; the scanner sees the
two names side by side and puts the comma back.
"""

from __future__ import annotations

import keyword
import re
from dataclasses import dataclass, field

_TOKEN = re.compile(
    rb"""
    (?P<ws>[ \t\f]+)
  | (?P<newline>\r?\n|\r)
  | (?P<cont>\\(?:\r?\n|\r))
  | (?P<comment>\#[^\r\n]*)
  | (?P<string>(?:[rRbBuUfFtT]{1,2})?(?:
        '''(?:[^'\\]|\\.|'(?!''))*+(?:'''|(?P<open3s>\Z))
      | \"\"\"(?:[^"\\]|\\.|"(?!""))*+(?:\"\"\"|(?P<open3d>\Z))
      | '(?:[^'\\\r\n]|\\(?:\r\n|.))*+(?:'|(?P<open1s>))
      | "(?:[^"\\\r\n]|\\(?:\r\n|.))*+(?:"|(?P<open1d>))
    ))
  | (?P<name>[A-Za-z0-9_\x80-\xff]+)
  | (?P<open>[(\[{])
  | (?P<close>[)\]}])
  | (?P<op>:=|->|\*\*=?|//=?|>>=?|<<=?|[-+*/%@&|^=<>!]=|.)
    """,
    re.VERBOSE | re.DOTALL,
)

_CLOSER = {ord("("): b")", ord("["): b"]", ord("{"): b"}"}
_OPENER = {ord(")"): "(", ord("]"): "[", ord("}"): "{"}

COMPOUND_KEYWORDS = frozenset(
    {b"if", b"elif", b"else", b"for", b"while", b"with", b"def", b"class", b"try",
     b"except", b"finally"}
)
"""Words that start a statement whose header must end with `:`."""

_KEYWORDS = frozenset(word.encode() for word in keyword.kwlist)
_SOFT_KEYWORDS = frozenset({b"match", b"case", b"type"})
"""Words that start a statement of their own (`type X = int`) though they are names."""


@dataclass(frozen=True, slots=True)
class Flaw:
    """A mechanical syntax error and its repair.

    The message is reported over [start, end); the repair replaces [at, at + remove) of
    the text with `insert`.  `fixable` says whether the repair is surely what the author
    meant (then it is offered as a fix) or only lets the parse go on.
    """

    kind: str
    message: str
    start: int
    end: int
    at: int
    remove: int
    insert: bytes
    fixable: bool = True
    statement: int = -1
    """Offset of the first token of the statement (logical line) the flaw is in, or -1.
    A statement's block is indented deeper than its first line, not than whichever
    continuation line the flaw sits on."""


@dataclass(slots=True)
class _Line:
    """One logical line being scanned."""

    indent: int
    first: bytes | None = None
    start: int = -1
    last_end: int = -1
    top_colon: bool = False
    first_line_end: int = -1
    colon_at: int = -1
    """Offset of the `:` that ends the physical line so far (-1 when another token does)."""
    targets: _Targets | None = None
    """The line's target list while it is being read (None outside one)."""


@dataclass(slots=True)
class _Targets:
    """The target list of an assignment (`a, b = ...`) or a `for` header (`for i, j in`)
    as it is scanned: two names side by side there are a missing comma, since a target
    list holds no operators.  The line must show a comma elsewhere in its targets to be a
    list at all (`a b = 1` may as well be a misspelt `a_b`)."""

    end: bytes
    """The token that ends the targets: `=` or `in`."""
    what: str
    groups: list[bool] = field(default_factory=list)
    """Per bracket open in the targets: whether it groups targets (`(a, b)`), not a call
    or subscript (`x[i]`), where two names side by side may miss an operator."""
    comma: bool = False
    operand: bool = False
    """Whether the last token ends an operand (so an opener after it is a call or subscript)."""
    name: tuple[int, int] | None = None
    """[start, end) of the last token when it is a plain name."""
    adjacent: list[tuple[int, int, int, int]] = field(default_factory=list)

    def feed(self, kind: str, text: bytes, start: int, end: int) -> bool | None:
        """Read one token: True when it ends the targets, False when it shows the line is
        no target list after all, None to read on."""
        if kind == "name":
            if not self.groups and text == self.end:
                return True
            if text in _KEYWORDS:
                return False
            plain = not text[:1].isdigit()
            if plain and self.name is not None and all(self.groups):
                self.adjacent.append((*self.name, start, end))
            self.name = (start, end) if plain else None
            self.operand = True
            return None
        self.name = None
        if kind == "open":
            self.groups.append(not self.operand)
            self.operand = False
        elif kind == "close":
            if self.groups:
                self.groups.pop()
            self.operand = True
        elif kind == "string":
            self.operand = True
        else:
            self.operand = False
            if text == b"," and all(self.groups):
                self.comma = True
            elif not self.groups and text in (self.end, b":"):
                return text == self.end  # a top-level `:` first: an annotation
        return None

    def flaws(self, data: bytes, statement: int) -> list[Flaw]:
        if not self.comma:
            return []
        out: list[Flaw] = []
        for a_start, a_end, b_start, b_end in self.adjacent:
            a = data[a_start:a_end].decode("utf-8", errors="replace")
            b = data[b_start:b_end].decode("utf-8", errors="replace")
            out.append(Flaw(
                "comma", f"expected `,` between the {self.what} targets `{a}` and `{b}`",
                a_start, b_end, a_end, 0, b",", statement=statement,
            ))
        return out


def _targets(kind: str, text: bytes) -> _Targets | None:
    """The target list a logical line starting with this token begins, if any."""
    if text == b"for":
        return _Targets(b"in", "loop")
    if kind == "name":
        plain = text not in _KEYWORDS and text not in _SOFT_KEYWORDS and not text[:1].isdigit()
    else:
        plain = text in (b"(", b"[", b"*")
    return _Targets(b"=", "assignment") if plain else None


def scan(data: bytes, lo: int = 0, hi: int | None = None) -> list[Flaw]:
    """Every missing colon, bracket problem and unterminated string in `data[lo:hi]`.

    `lo` must begin a line outside any bracket or string and `hi` end one (a caller
    scanning a window passes statement boundaries); offsets are those of `data`.
    """
    flaws: list[Flaw] = []
    stack: list[tuple[int, int]] = []  # (opener byte, offset)
    line = _Line(indent=0)
    at_line_start = True
    indent = 0
    pos = lo
    n = len(data) if hi is None else min(hi, len(data))
    while pos < n:
        m = _TOKEN.match(data, pos)
        if m is None:  # unreachable: `.` matches any byte
            break
        kind = m.lastgroup or ""
        if kind.startswith("open") and kind != "open":
            kind = "string"
        start, end = m.start(), m.end()
        pos = end
        if kind == "ws":
            if at_line_start:
                indent = end - start
            continue
        if kind == "cont" or kind == "comment":
            continue
        if kind == "newline":
            if line.first_line_end < 0:
                line.first_line_end = start
            if stack and line.first in COMPOUND_KEYWORDS and line.colon_at >= 0 \
                    and _next_line_indented(data, end, line.indent):
                # `for k in range(n:` then an indented body: the header ends at its colon
                _close_all(stack, line, flaws, at=line.colon_at)
                line.top_colon = True
            elif stack and _next_line_starts_statement(data, end, line.indent):
                _close_all(stack, line, flaws)
            if not stack:
                _end_line(line, flaws)
                line = _Line(indent=0)
                at_line_start = True
                indent = 0
            continue
        if at_line_start:
            at_line_start = False
            line = _Line(indent=indent, first=None, start=start)
        targets = line.targets
        if line.first is None:
            line.first = m.group() if kind == "name" else b""
            line.targets = targets = _targets(kind, m.group())
            if line.first == b"for":
                targets = None  # the keyword itself is no target
        if targets is not None:
            done = targets.feed(kind, m.group(), start, end)
            if done is not None:
                if done:
                    flaws.extend(targets.flaws(data, line.start))
                line.targets = None
        if kind == "string":
            _check_string(m, data, flaws)
        elif kind == "open":
            stack.append((data[start], start))
        elif kind == "close":
            _close(data[start], start, stack, flaws, line.start)
        elif kind == "op" and m.group() == b":" and not stack:
            line.top_colon = True
        line.colon_at = start if m.group() == b":" else -1
        line.last_end = end
    if stack:
        _close_all(stack, line, flaws)
    _end_line(line, flaws)
    return flaws


def _next_line_starts_statement(data: bytes, pos: int, indent: int) -> bool:
    """Whether the physical line at `pos` looks like a new statement, not a continuation.

    Inside brackets Python ignores indentation, so an unclosed bracket swallows the rest
    of the file; people indent continuation lines, though, so a line indented no deeper
    than the statement that opened the bracket (and not starting with a closer) is taken
    to be the next statement.
    """
    j = pos
    while j < len(data) and data[j] in b" \t\f":
        j += 1
    if j >= len(data) or data[j] in b"\r\n#":
        return False
    if data[j] in b")]}":
        return False
    return j - pos <= indent


def _next_line_indented(data: bytes, pos: int, indent: int) -> bool:
    """Whether the physical line at `pos` is indented deeper than `indent` (a body)."""
    j = pos
    while j < len(data) and data[j] in b" \t\f":
        j += 1
    return j < len(data) and data[j] not in b"\r\n#" and j - pos > indent


def _close(byte: int, offset: int, stack: list[tuple[int, int]], flaws: list[Flaw],
           statement: int) -> None:
    want = _OPENER[byte]
    closer = chr(byte)
    if not stack:
        flaws.append(Flaw("unmatched", f"unmatched `{closer}`", offset, offset + 1,
                          offset, 1, b" "))
        return
    depth = next((i for i in range(len(stack) - 1, -1, -1) if chr(stack[i][0]) == want), None)
    if depth is None:
        # `(1, 2]`: nothing to close, so the closer itself is the wrong one.
        opener, _ = stack.pop()
        expected = _CLOSER[opener].decode()
        flaws.append(Flaw(
            "mismatched",
            f"closing `{closer}` does not match the opening `{chr(opener)}`",
            offset, offset + 1, offset, 1, expected.encode(),
        ))
        return
    if depth < len(stack) - 1:
        # `f(a[1)`: the brackets opened inside this pair were never closed.
        missing = b"".join(_CLOSER[o] for o, _ in reversed(stack[depth + 1 :]))
        opener, where = stack[-1]
        flaws.append(Flaw(
            "unclosed", f"`{chr(opener)}` was never closed", where, where + 1,
            offset, 0, missing, statement=statement,
        ))
    del stack[depth:]


def _close_all(stack: list[tuple[int, int]], line: _Line, flaws: list[Flaw],
               at: int = -1) -> None:
    """Close every open bracket at `at`, by default the end of the statement's last token."""
    if at < 0:
        at = line.last_end if line.last_end >= 0 else stack[-1][1] + 1
    missing = b"".join(_CLOSER[o] for o, _ in reversed(stack))
    opener, where = stack[0]
    flaws.append(Flaw("unclosed", f"`{chr(opener)}` was never closed", where, where + 1,
                      at, 0, missing, statement=line.start))
    stack.clear()


def _end_line(line: _Line, flaws: list[Flaw]) -> None:
    if line.first in COMPOUND_KEYWORDS and not line.top_colon and line.last_end >= 0:
        keyword = (line.first or b"").decode()
        flaws.append(Flaw(
            "colon", f"expected `:` at the end of the `{keyword}` line",
            line.last_end, line.last_end, line.last_end, 0, b":", statement=line.start,
        ))


def _check_string(m: re.Match[bytes], data: bytes, flaws: list[Flaw]) -> None:
    if m.group("open1s") is not None or m.group("open1d") is not None:
        quote = b"'" if m.group("open1s") is not None else b'"'
        end = m.end()
        flaws.append(Flaw(
            "string", "unterminated string literal", m.start(), end, end, 0, quote,
        ))
    elif m.group("open3s") is not None or m.group("open3d") is not None:
        quote = b"'''" if m.group("open3s") is not None else b'"""'
        line_end = data.find(b"\n", m.start())
        end = line_end if line_end != -1 else m.end()
        flaws.append(Flaw(
            "string", "unterminated triple-quoted string literal", m.start(), end,
            m.end(), 0, quote, fixable=False,
        ))
