"""Normalized failure signatures: the same mistake in different kernels looks the same.

A signature is `gate:code:construct`, where the construct is the source line the finding
points at with user names replaced by `_` and numbers by `N` (built-in names such as
`smem`, `tma_load`, `bf16` are kept: they say what kind of construct failed).  So
`sc = smem(bf16, (STAGES, BN, BK))` in one kernel and `sb = smem(bf16, (S, TN, TK))` in
another both become `_ = smem(bf16, (_, _, _))`.  The message is normalized the same way.
Recurring signatures are what a later failure-mining step clusters into verifier rules,
primitives and tactics; the runs store keeps the pieces separately for that.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from functools import cache

_TOKEN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|\d+(?:\.\d*)?(?:[eE][+-]?\d+)?"
                    r"|==|!=|<=|>=|//|\*\*|->|\S")
_NUMBER = re.compile(r"\b\d+(?:\.\d+)?(?:[eE][+-]?\d+)?\b")
_QUOTED = re.compile(r"`[^`]*`|'[^']*'|\"[^\"]*\"")
_KEYWORDS = frozenset({"for", "in", "if", "else", "elif", "with", "as", "def", "return",
                       "and", "or", "not", "is", "None", "True", "False", "pass", "while"})
MAX_CONSTRUCT = 160


@cache
def builtin_names() -> frozenset[str]:
    """Names a kernel uses without defining them: primitives, dtypes, layouts, indices."""
    names: set[str] = set(_KEYWORDS)
    try:
        from cake_core.elab import scope
        from cake_core.ir.types import DTYPE_NAMES
        from cake_core.primitives.registry import builtin_registry

        names.update(scope.INDEX_SPACES)
        names.update(scope.SMEM_LAYOUT_NAMES)
        names.update(scope.FRAG_LAYOUT_NAMES)
        names.update(scope.BUILDER_FUNCTIONS)
        names.update(scope.FLOAT_CONSTANTS)
        names.update(DTYPE_NAMES)
        for prim in builtin_registry().all():
            names.add(prim.name)
    except Exception:  # a signature must never fail: fall back to the keywords alone
        pass
    return frozenset(names)


def construct_shape(line: str) -> str:
    """The line with user names as `_` and numbers as `N`; built-in names and keyword
    argument and attribute names kept (the language's words, not the kernel's)."""
    keep = builtin_names()
    toks = _TOKEN.findall(line.strip())
    out: list[str] = []
    depth = 0
    for i, tok in enumerate(toks):
        nxt = toks[i + 1] if i + 1 < len(toks) else ""
        after = toks[i + 2] if i + 2 < len(toks) else ""
        if tok in "([{":
            depth += 1
        elif tok in ")]}":
            depth = max(0, depth - 1)
        if tok[0].isdigit():
            out.append("N")
        elif tok[0].isalpha() or tok[0] == "_":
            is_kwarg = depth > 0 and nxt == "=" and after != "="
            is_attr = i > 0 and toks[i - 1] == "."
            out.append(tok if tok in keep or is_kwarg or is_attr else "_")
        else:
            out.append(tok)
    return _join(out)[:MAX_CONSTRUCT]


def _join(tokens: list[str]) -> str:
    """Tokens back to code-like text: `f(a, b=c)`, `x = y`, `a.b[c]`."""
    text = ""
    depth = 0
    prev = ""
    for tok in tokens:
        if tok in ")]}":
            depth = max(0, depth - 1)
        glue = (not text or tok in ")]},.:" or prev in "([{." or
                (tok in "([" and (prev[-1:].isalnum() or prev[-1:] in "_)]")) or
                (depth > 0 and (tok == "=" or prev == "=")))
        text += tok if glue else " " + tok
        if tok in "([{":
            depth += 1
        prev = tok
    return text.replace(",", ", ").replace(",  ", ", ")


def normalize_message(message: str) -> str:
    """The message with quoted names and numbers abstracted away."""
    text = _QUOTED.sub("`_`", message.splitlines()[0] if message else "")
    return _NUMBER.sub("N", text).strip()


@dataclass(frozen=True)
class FailureSignature:
    gate: str
    code: str
    construct: str
    message: str

    @property
    def key(self) -> str:
        return f"{self.gate}:{self.code}:{self.construct or self.message}"

    @property
    def digest(self) -> str:
        return hashlib.sha256(self.key.encode()).hexdigest()[:16]


def signature(gate: str, code: str, message: str, line_text: str = "") -> FailureSignature:
    """The signature of one failure (`line_text`: the source line it points at, if any)."""
    return FailureSignature(gate, code or "-", construct_shape(line_text) if line_text else "",
                            normalize_message(message))
