"""Completion: methods after a dot, otherwise keywords, names in scope and primitives.

After `recv.` the items are what the receiver's type offers (pipeline methods after a
pipeline, `.T` after a buffer, `.x` after `block`).  Elsewhere: the keyword arguments of
the primitive being called, the names visible at the cursor, every primitive with its
signature and documentation, the builder forms, dtypes, layouts and index spaces.
Mid-edit the text often does not parse; names then come from the last check that built
its kernels.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from lsprotocol import types as lsp

from cake_core.elab.scope import (
    FLOAT_CONSTANTS,
    FRAG_LAYOUT_NAMES,
    INDEX_SPACES,
    SMEM_LAYOUT_NAMES,
)
from cake_core.ide.cursor import attributes_of, call_at_cursor, receiver_type
from cake_core.ide.forms import FORMS
from cake_core.ide.index import SymbolIndex
from cake_core.ir.types import DTYPE_NAMES, Type
from cake_core.primitives.registry import Primitive, Registry
from cake_core.source import SourceFile
from cake_lsp.convert import completion_kind, markup

if TYPE_CHECKING:
    from cake_lsp.documents import OpenDocument
    from cake_lsp.server import CakeLanguageServer

_AFTER_DOT = re.compile(r"\.\s*\w*$")
_Item = lsp.CompletionItem
_K = lsp.CompletionItemKind


async def completion(ls: CakeLanguageServer, params: lsp.CompletionParams) -> lsp.CompletionList:
    doc, result = await ls.current(params.text_document.uri)
    source = result.source
    offset = ls.offset(source, params.position)
    md = ls.markdown("completion")
    before = source.data[offset - source.position(offset).col_byte:offset].decode(
        "utf-8", errors="replace")
    index = await ls.index(doc, result)
    if _AFTER_DOT.search(before):
        items = await _members(ls, doc, index, before, offset, md)
    else:
        items = _keywords(ls.registry, source, offset, md) + _names(index, offset) + \
            _everything(ls.registry, md)
    return lsp.CompletionList(is_incomplete=False, items=_unique(items))


async def _members(ls: CakeLanguageServer, doc: OpenDocument, index: SymbolIndex, before: str,
             offset: int, md: bool) -> list[lsp.CompletionItem]:
    t: Type | None = receiver_type(before, index, offset)
    if t is None and doc.last_good is not None:
        t = receiver_type(before, await ls.index(doc, doc.last_good), None)
    if t is None:
        return []
    return [_Item(label=a.name, kind=_K.Method if a.primitive is not None else _K.Property,
                  detail=a.detail, documentation=markup(a.doc, md) if a.doc else None)
            for a in attributes_of(t, ls.registry)]


def _keywords(registry: Registry, source: SourceFile, offset: int,
              md: bool) -> list[lsp.CompletionItem]:
    """`name=` items for the parameters of the primitive around the cursor."""
    index = len(source.data[:offset].decode("utf-8", errors="replace"))
    call = call_at_cursor(source.text, index)
    if call is None or call.receiver is not None:
        return []
    prim = registry.function(call.name)
    if prim is None:
        return []
    return [_Item(label=f"{p.name}=", kind=_K.Property, sort_text=f"0{i:02}",
                  detail=f"{prim.name}: {p.name}", insert_text=f"{p.name}=",
                  documentation=markup(p.doc, md) if p.doc else None)
            for i, p in enumerate(prim.params) if p.name != "self"]


def _names(index: SymbolIndex, offset: int) -> list[lsp.CompletionItem]:
    return [_Item(label=s.name, kind=completion_kind(s.kind), sort_text=f"1{s.name}",
                  detail=s.value.type.describe() if s.value is not None else s.kind.value)
            for s in index.visible_at(offset)]


def _everything(registry: Registry, md: bool) -> list[lsp.CompletionItem]:
    items = [_primitive(p, md) for p in registry.functions()]
    items += [_Item(label=f.name, kind=_K.Function, detail=f.signature,
                    documentation=markup(f.doc, md), sort_text=f"2{f.name}")
              for f in FORMS.values()]
    items += [_Item(label=n, kind=_K.TypeParameter, detail=f"dtype {d.value}",
                    sort_text=f"3{n}") for n, d in DTYPE_NAMES.items()]
    items += [_Item(label=n, kind=_K.EnumMember, detail="smem layout", sort_text=f"3{n}")
              for n in SMEM_LAYOUT_NAMES]
    items += [_Item(label=n, kind=_K.EnumMember, detail="fragment layout", sort_text=f"3{n}")
              for n in FRAG_LAYOUT_NAMES]
    items += [_Item(label=n, kind=_K.Module, detail="index space: " + ", ".join(attrs),
                    sort_text=f"3{n}") for n, attrs in INDEX_SPACES.items()]
    items += [_Item(label=n, kind=_K.Constant, detail="float constant", sort_text=f"3{n}")
              for n in FLOAT_CONSTANTS]
    return items


def _primitive(p: Primitive, md: bool) -> lsp.CompletionItem:
    return _Item(label=p.name, kind=_K.Function, detail=p.signature,
                 documentation=markup(p.doc, md) if p.doc else None, sort_text=f"2{p.name}")


def _unique(items: list[lsp.CompletionItem]) -> list[lsp.CompletionItem]:
    seen: set[str] = set()
    out = []
    for item in items:
        if item.label not in seen:
            seen.add(item.label)
            out.append(item)
    return out


def register(server: CakeLanguageServer) -> None:
    server.feature(lsp.TEXT_DOCUMENT_COMPLETION,
                   lsp.CompletionOptions(trigger_characters=["."]))(completion)
