"""Queries on the text just before the cursor: the receiver of a dot and what may follow it,
the call whose arguments are being written.

They read text, not the AST: the line being typed rarely parses, and the index they consult
may belong to an older version of the file.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from cake_core.elab.scope import builtin
from cake_core.ide.index import SymbolIndex, SymbolKind, subscripted
from cake_core.ir.types import (
    FragmentType,
    IndexSpaceType,
    SmemType,
    StageType,
    TensorType,
    TileType,
    Type,
)
from cake_core.primitives.registry import Primitive, Registry, builtin_registry
from cake_core.source import SourceFile

_EMPTY = SourceFile("").span(0, 0)
"""The span a built-in name is looked up with: a cursor query has no use site to blame."""


# --- attributes and receivers (completion after a dot) -----------------------------------
@dataclass(frozen=True, slots=True)
class Attribute:
    name: str
    detail: str
    doc: str
    primitive: Primitive | None = None


def attributes_of(t: Type, registry: Registry | None = None) -> list[Attribute]:
    """What may follow `value.` for a value of type `t` (the builder's attribute rules)."""
    reg = registry or builtin_registry()
    out = [Attribute(p.name, p.signature, p.doc, p) for p in reg.methods_of(t)]
    if isinstance(t, IndexSpaceType):
        out += [Attribute(a, f"{t.name}.{a}: int", f"The {a} index of this {t.name}.")
                for a in t.attrs]
    if isinstance(t, SmemType):
        out.append(Attribute("T", "smem view", "The transposed view (no data moves)."))
    if isinstance(t, TensorType | SmemType | FragmentType | TileType):
        out.append(Attribute("shape", "tuple of ints", "The shape, as a tuple of ints."))
        out.append(Attribute("dtype", "dtype", "The element type."))
    if isinstance(t, StageType):
        out.append(Attribute("phase", "int", "The barrier phase parity of this stage."))
    return out


_RECEIVER = re.compile(r"([A-Za-z_]\w*)((?:\s*\[[^\[\]]*\])*)((?:\s*\.\s*[A-Za-z_]\w*"
                       r"(?:\s*\[[^\[\]]*\])*)*)\s*\.\s*(\w*)$")


def receiver_type(text_before: str, index: SymbolIndex, offset: int | None) -> Type | None:
    """The type of `recv` in `... recv.partial` (the text just before the cursor).

    With `offset` None the name is looked up anywhere in the index (its latest
    definition): for an index of an older text, where the cursor's offset means nothing.
    """
    m = _RECEIVER.search(text_before)
    if m is None:
        return None
    base, subs, chain = m.group(1), m.group(2), m.group(3)
    t = _name_type(base, index, offset)
    if t is None:
        return None
    t = subscripted(t, subs)
    for part in re.findall(r"\.\s*([A-Za-z_]\w*)((?:\s*\[[^\[\]]*\])*)", chain):
        attr, subs = part
        if attr == "T" and isinstance(t, SmemType):
            t = subscripted(t, subs)
            continue
        return None
    return t


def _name_type(name: str, index: SymbolIndex, offset: int | None) -> Type | None:
    pool = index.visible_at(offset) if offset is not None else reversed(index.symbols)
    for s in pool:
        if s.name == name and s.kind is not SymbolKind.ROLE:
            return s.value.type if s.value is not None else None
    v = builtin(name, _EMPTY)
    return v.type if v is not None else None


# --- the call around the cursor (signature help) -----------------------------------------
@dataclass(frozen=True, slots=True)
class CallAtCursor:
    name: str
    receiver: str | None
    """The receiver's text for a method call (`ab` in `ab.wait(`)."""
    arg_index: int
    keyword: str | None
    """The `name=` being written, if the cursor is in a keyword argument."""


_CALLEE = re.compile(r"((?:[A-Za-z_]\w*(?:\[[^\[\]]*\])*\s*\.\s*)*)([A-Za-z_]\w*)\s*$")
_KEYWORD = re.compile(r"^\s*([A-Za-z_]\w*)\s*=(?!=)")
_WINDOW = 8000


def call_at_cursor(text: str, index: int) -> CallAtCursor | None:
    """The innermost call whose parentheses hold `index` (a str index into `text`).

    A forward scan of the text before the cursor, tolerant of unbalanced code: it is
    what a user is in the middle of typing.
    """
    start = text.rfind("\n", 0, max(0, index - _WINDOW)) + 1
    stack: list[list[int]] = []  # [open position, commas, current argument start]
    i = start
    quote = ""
    while i < index:
        ch = text[i]
        if quote:
            if ch == "\\":
                i += 1
            elif ch == quote:
                quote = ""
        elif ch in "\"'":
            quote = ch
        elif ch == "#":
            nl = text.find("\n", i, index)
            i = index if nl < 0 else nl
            continue
        elif ch in "([{":
            stack.append([i, 0, i + 1])
        elif ch in ")]}":
            if stack:
                stack.pop()
        elif ch == "," and stack:
            stack[-1][1] += 1
            stack[-1][2] = i + 1
        i += 1
    for pos, commas, arg_start in reversed(stack):
        if text[pos] != "(":
            continue
        m = _CALLEE.search(text, max(0, pos - 200), pos)
        if m is None or m.end() != pos:
            continue
        receiver = m.group(1).strip().rstrip(".").strip() or None
        kw = _KEYWORD.match(text[arg_start:index])
        return CallAtCursor(m.group(2), receiver, commas, kw.group(1) if kw else None)
    return None


__all__ = ["Attribute", "CallAtCursor", "attributes_of", "call_at_cursor", "receiver_type"]
