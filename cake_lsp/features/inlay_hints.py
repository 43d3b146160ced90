"""Inlay hints: the numbers a kernel author otherwise works out by hand.

After each shared-memory allocation its size in bytes; after each pipeline its stage
count and barrier bytes; after each role its warps and registers; after the decorator
the kernel's total shared memory.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from lsprotocol import types as lsp

from cake_core.ide.index import SymbolIndex
from cake_core.ir.kernel import Kernel
from cake_core.ir.types import PipelineType
from cake_core.source import SourceFile, Span

if TYPE_CHECKING:
    from cake_lsp.server import CakeLanguageServer


async def inlay_hints(ls: CakeLanguageServer,
                      params: lsp.InlayHintParams) -> list[lsp.InlayHint]:
    doc, result = await ls.current(params.text_document.uri)
    source = result.source
    lo = ls.codec.offset(source, params.range.start, strict=False)
    hi = ls.codec.offset(source, params.range.end, strict=False)
    index = await ls.index(doc, result)
    return [lsp.InlayHint(position=ls.codec.position(source, at.end), label=label,
                          padding_left=True)
            for at, label in hints(index, source) if lo <= at.end.offset <= hi]


def hints(index: SymbolIndex, source: SourceFile) -> list[tuple[Span, str]]:
    """(where the hint goes, its text), in source order."""
    out: list[tuple[Span, str]] = []
    for fn, k in index.kernels:
        if k is None:
            continue
        total = sum(a.nbytes for a in k.smem)
        out.append((k.decorator_span, f"smem {_short(total)}, {k.threads} threads"))
        for a in k.smem:
            v = k.values.get(a.name)
            if v is not None and isinstance(v.type, PipelineType):
                out.append((a.span, f"{v.type.stages} stages, {a.shape[0]} mbarriers "
                                    f"({a.nbytes} B)"))
            elif a.kind == "barrier":
                out.append((a.span, f"{a.shape[0]} mbarriers ({a.nbytes} B)"))
            else:
                out.append((a.span, _short(a.nbytes)))
        out.extend(_roles(index, fn.name, k))
    return sorted(out, key=lambda h: h[0].end.offset)


def _roles(index: SymbolIndex, kernel_name: str, k: Kernel) -> list[tuple[Span, str]]:
    out = []
    calls = [c for c in index.calls if c.name == "role" and not c.method and
             k.span.start.offset <= c.call.start.offset < k.span.end.offset]
    for sym in index.roles(kernel_name):
        role = k.roles.get(sym.name)
        call = next((c for c in calls
                     if c.call.start.offset <= sym.span.start.offset < c.call.end.offset), None)
        if role is None or call is None:
            continue
        threads = role.warps * 32
        text = f"{role.warps} warps"
        if role.regs is not None:
            text += f", {role.regs} regs x {threads} threads = {role.regs * threads:,} regs"
        out.append((call.call, text))
    return out


def _short(n: int) -> str:
    if n >= 1024:
        return f"{n / 1024:g} KiB" if n % 1024 == 0 else f"{n / 1024:.1f} KiB"
    return f"{n} B"


def register(server: CakeLanguageServer) -> None:
    server.feature(lsp.TEXT_DOCUMENT_INLAY_HINT)(inlay_hints)

