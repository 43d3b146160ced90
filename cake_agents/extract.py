"""Getting a kernel out of a model's answer, or saying precisely why not.

Model output is untrusted text: it may lack a code block, stop mid-kernel, or be
garbage.  Each of those is a `MalformedOutput` with a stable reason, which the coder
records as a failure and answers with a retry; nothing a model writes is ever executed,
only parsed and checked as .cake text.

Code blocks are found by a CommonMark parser (markdown-it-py), not by a regular
expression, because models answer in Markdown and the parser reads every fence Markdown
allows.  A pattern for "```" at the start of a line missed `~~~` fences, fences inside a
list item or a quote (the parser also strips their indentation and `>` markers), a
longer fence around a kernel whose text holds a "```" line, and answers with CRLF line
ends; it also took a closed block of another language for a truncated answer.  On the
cases of tests/agents/test_malformed.py the pattern got 6 of 12 right, the parser all
12, at about a tenth of a millisecond for a kernel-sized answer.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from markdown_it import MarkdownIt

_MARKDOWN = MarkdownIt("commonmark")
_LINE_END = re.compile(r"\r\n?|\n")
"""The line ends the parser normalizes; its token line numbers count these."""
_LANGS = {"python", "py", "cake", ""}
MAX_KERNEL_CHARS = 200_000


class MalformedOutput(Exception):
    """A model answer that holds no usable kernel; `reason` is a stable short code."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason
        self.detail = detail


@dataclass(frozen=True)
class Extracted:
    text: str
    language: str


def extract_kernel(answer: str | None, finish_reason: str | None = None) -> Extracted:
    """The kernel in the answer's ```python block (the longest, if there are several)."""
    if not answer or not answer.strip():
        raise MalformedOutput("empty", "the answer is empty")
    lines = _LINE_END.split(answer)
    blocks: list[tuple[str, str, list[str]]] = []
    opened = False
    for token in _MARKDOWN.parse(answer):
        if token.type != "fence" or token.map is None:
            continue
        first, end = token.map
        if not _closes(lines[first + 1:end], token.markup):
            opened = True  # the parser runs an unclosed fence to the end of the answer
            continue
        lang = token.info.split()[0].lower() if token.info.strip() else ""
        if lang in _LANGS:
            blocks.append((lang, token.content, lines[first:end]))
    if not blocks:
        if opened or finish_reason == "length":
            raise MalformedOutput("truncated", "the answer stops inside its code block "
                                  f"(finish reason: {finish_reason or 'unknown'})")
        raise MalformedOutput("no-code-block", "the answer has no ```python code block")
    lang, body, source = max(blocks, key=lambda b: len(b[1]))
    if len(body) > MAX_KERNEL_CHARS:
        raise MalformedOutput("too-long", f"the code block has {len(body)} characters")
    if "@kernel" not in body:
        raise MalformedOutput("no-kernel", "the code block defines no @kernel function")
    # checked in the answer itself: the parser replaces NUL with U+FFFD, as CommonMark says
    if any("\x00" in line for line in source):
        raise MalformedOutput("garbage", "the code block holds NUL bytes")
    return Extracted(body if body.endswith("\n") else body + "\n", lang or "python")


def _closes(after_opening: list[str], markup: str) -> bool:
    """Whether the last line of a fence's lines closes it (as long a run of its character)."""
    if not after_opening:
        return False
    last = after_opening[-1].lstrip(" \t>").rstrip()  # `>`: a fence inside a quote
    return len(last) >= len(markup) and last == markup[0] * len(last)


INTENT_CHARS = 400


def intent_of(answer: str | None) -> str:
    """The model's stated intent: its prose outside code blocks, whitespace collapsed and
    cut to `INTENT_CHARS` ("" when it said nothing).  Kept with the candidate so that a
    reader sees what a model candidate was meant to change, not only the diff."""
    if not answer:
        return ""
    lines = _LINE_END.split(answer)
    inside = [False] * len(lines)
    for token in _MARKDOWN.parse(answer):
        if token.type == "fence" and token.map is not None:
            for i in range(token.map[0], min(token.map[1], len(lines))):
                inside[i] = True
    prose = " ".join(" ".join(ln for ln, code in zip(lines, inside, strict=True)
                              if not code).split())
    return prose if len(prose) <= INTENT_CHARS else prose[:INTENT_CHARS - 3].rstrip() + "..."
