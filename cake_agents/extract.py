"""Getting a kernel out of a model's answer, or saying precisely why not.

Model output is untrusted text: it may lack a code block, stop mid-kernel, or be
garbage.  Each of those is a `MalformedOutput` with a stable reason, which the coder
records as a failure and answers with a retry; nothing a model writes is ever executed,
only parsed and checked as .cake text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_FENCE = re.compile(r"^```[ \t]*([A-Za-z0-9_+\-.]*)[^\n]*\n(.*?)^```[ \t]*$", re.S | re.M)
_OPEN_FENCE = re.compile(r"^```[ \t]*([A-Za-z0-9_+\-.]*)[^\n]*\n", re.M)
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
    blocks = [(m.group(1).lower(), m.group(2)) for m in _FENCE.finditer(answer)]
    blocks = [(lang, body) for lang, body in blocks if lang in _LANGS]
    if not blocks:
        opened = _OPEN_FENCE.search(answer)
        if opened is not None or finish_reason == "length":
            raise MalformedOutput("truncated", "the answer stops inside its code block "
                                  f"(finish reason: {finish_reason or 'unknown'})")
        raise MalformedOutput("no-code-block", "the answer has no ```python code block")
    lang, body = max(blocks, key=lambda b: len(b[1]))
    if len(body) > MAX_KERNEL_CHARS:
        raise MalformedOutput("too-long", f"the code block has {len(body)} characters")
    if "@kernel" not in body:
        raise MalformedOutput("no-kernel", "the code block defines no @kernel function")
    if "\x00" in body:
        raise MalformedOutput("garbage", "the code block holds NUL bytes")
    return Extracted(body if body.endswith("\n") else body + "\n", lang or "python")
