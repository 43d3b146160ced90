"""Hover: what the name under the cursor is, in the compiler's own terms.

Names show their IR type; shared-memory buffers their layout and bytes; pipelines their
stages and barriers; roles their warps and registers; a primitive call its signature
and documentation from the registry; built-in names (dtypes, layouts, index spaces)
what they stand for.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from lsprotocol import types as lsp

from cake_core.elab.scope import builtin
from cake_core.ide.forms import FORMS
from cake_core.ide.index import CallSite, Symbol, SymbolIndex, SymbolKind
from cake_core.ir.kernel import Kernel
from cake_core.ir.symbolic import Dim
from cake_core.ir.types import DType, DTypeType, IndexSpaceType, LayoutType, PipelineType
from cake_core.primitives.registry import Primitive
from cake_core.source import SourceFile, Span
from cake_lsp.convert import format_bytes, markup

if TYPE_CHECKING:
    from cake_lsp.server import CakeLanguageServer

_WORD = re.compile(rb"[A-Za-z_0-9]+")


async def hover(ls: CakeLanguageServer, params: lsp.HoverParams) -> lsp.Hover | None:
    doc, result = await ls.current(params.text_document.uri)
    source = result.source
    offset = ls.offset(source, params.position)
    found = describe(await ls.index(doc, result), source, offset)
    if found is None:
        return None
    text, span = found
    return lsp.Hover(contents=markup(text, ls.markdown("hover")),
                     range=ls.codec.range(source, span))


def describe(index: SymbolIndex, source: SourceFile, offset: int) -> tuple[str, Span] | None:
    occ = index.occurrence_at(offset)
    if occ is not None:
        return describe_symbol(occ.symbol, index), occ.span
    call = index.call_at(offset)
    if call is not None:
        text = describe_call(call)
        return (text, call.span) if text else None
    return describe_builtin(source, offset)


def describe_symbol(sym: Symbol, index: SymbolIndex) -> str:
    kernel = _kernel(index, sym.kernel)
    if sym.kind is SymbolKind.KERNEL:
        k = _kernel(index, sym.name)
        return _code(f"kernel {sym.name}") + (_kernel_facts(k) if k is not None else "")
    if sym.kind is SymbolKind.ROLE:
        return _role(sym.name, kernel)
    v = sym.value
    head = _code(f"{sym.name}: {v.type.describe()}" if v is not None else sym.name)
    lines = [f"*{sym.kind.value}*"]
    if v is not None and v.sym is not None and sym.kind in (SymbolKind.CONSTANT, SymbolKind.DIM):
        if isinstance(v.sym, Dim):
            d = v.sym
            facts = [f"multiple of {d.multiple_of}"] if d.multiple_of > 1 else []
            facts += [f"at most {d.max}"] if d.max is not None else []
            lines.append(f"size known at launch: `{d.name}`" + (f" ({', '.join(facts)})"
                                                               if facts else ""))
        else:
            lines.append(f"= `{v.sym}`")
    if kernel is not None:
        alloc = next((a for a in kernel.smem if a.name == sym.name), None)
        if alloc is not None and alloc.kind == "buffer":
            lines.append(f"shared memory: **{format_bytes(alloc.nbytes)}**, "
                         f"aligned to {alloc.align} B")
            lines.append(f"layout: `{alloc.layout}`, shape {alloc.shape}")
            if len(alloc.shape) > 2:
                per = alloc.nbytes // max(1, alloc.shape[0])
                lines.append(f"{alloc.shape[0]} slices of {format_bytes(per)}")
        elif alloc is not None:
            lines.append(f"barriers: {alloc.shape[0]} mbarriers "
                         f"({alloc.nbytes} B of shared memory)")
        if v is not None and isinstance(v.type, PipelineType):
            p = v.type
            lines.append(f"{p.stages} stages; producer role `{p.producer}`, consumer role"
                         f"{'s' if len(p.consumers) > 1 else ''} "
                         + ", ".join(f"`{c}`" for c in p.consumers))
    return head + "\n" + "\n\n".join(lines)


def describe_call(call: CallSite) -> str | None:
    if call.primitive is not None:
        return primitive_doc(call.primitive)
    form = FORMS.get(call.name)
    if form is not None and not call.method:
        return _code(form.signature) + "\n" + form.doc
    return None


def primitive_doc(p: Primitive) -> str:
    parts = [_code(p.signature), p.doc.strip()]
    if p.requires:
        parts.append("requires: " + ", ".join(sorted(f.value for f in p.requires)))
    e = p.effects
    effects = [f"{what} `{', '.join(args)}`" for what, args in
               (("reads", e.reads), ("writes", e.writes)) if args]
    if e.async_group:
        effects.append(f"asynchronous ({e.async_group})")
    if e.arrives:
        effects.append(f"arrives on `{e.arrives}`" + (" with the bytes written" if e.tx_bytes
                                                       else ""))
    if e.waits:
        effects.append(f"waits on `{e.waits}`")
    if effects:
        parts.append("effects: " + "; ".join(effects))
    if p.plugin != "cake":
        parts.append(f"from plugin `{p.plugin}`")
    return "\n\n".join(x for x in parts if x)


def describe_builtin(source: SourceFile, offset: int) -> tuple[str, Span] | None:
    line_start = offset - source.position(offset).col_byte
    line_end = line_start + len(source.line_text(source.position(offset).line).encode())
    for m in _WORD.finditer(source.data, line_start, line_end):
        if m.start() <= offset <= m.end():
            name = m.group().decode()
            span = source.span(m.start(), m.end())
            v = builtin(name, span)
            if v is None:
                return None
            t = v.type
            if isinstance(t, DTypeType) and isinstance(v.const, DType):
                return _code(f"dtype {name}") + f"\n{v.const.bits}-bit element; CUDA " \
                    f"`{v.const.cuda}`", span
            if isinstance(t, LayoutType):
                return _code(f"layout {name}") + f"\n`{v.const}`", span
            if isinstance(t, IndexSpaceType):
                return _code(name) + "\nindex space; attributes: " + \
                    ", ".join(f"`{a}`" for a in t.attrs), span
            return _code(f"{name}: {t.describe()}"), span
    return None


def _role(name: str, kernel: Kernel | None) -> str:
    head = _code(f'role "{name}"')
    role = kernel.roles.get(name) if kernel is not None else None
    if role is None:
        return head
    threads = role.warps * 32
    lines = [f"warps {role.warp_start}..{role.warp_stop - 1} ({role.warps} warps, "
             f"{threads} threads)"]
    if role.regs is not None:
        lines.append(f"registers: {role.regs} per thread, {role.regs * threads:,} in all")
    return head + "\n" + "\n\n".join(lines)


def _kernel_facts(k: Kernel) -> str:
    grid = ", ".join(str(g) for g in k.grid)
    smem = sum(a.nbytes for a in k.smem)
    lines = [f"arch `{k.arch}`, grid ({grid}), {k.warps} warps ({k.threads} threads)",
             f"shared memory: {format_bytes(smem)} in {len(k.smem)} allocations"]
    if k.roles:
        lines.append("roles: " + ", ".join(f"`{r}`" for r in k.roles))
    return "\n" + "\n\n".join(lines)


def _kernel(index: SymbolIndex, name: str | None) -> Kernel | None:
    for fn, k in index.kernels:
        if fn.name == name:
            return k
    return None


def _code(text: str) -> str:
    return f"```cake\n{text}\n```"


def register(server: CakeLanguageServer) -> None:
    server.feature(lsp.TEXT_DOCUMENT_HOVER)(hover)
