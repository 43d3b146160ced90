"""Per-kernel reuse of the built-in verifier's findings across checks of one document.

The built-in rules judge each kernel on its own, from its text, the file's top-level
constants and dims, and the target arch.  When an editor re-checks a file after an edit
inside one kernel, every other kernel's findings are those of the previous check, moved
to where the kernel now starts — so only the edited kernel is verified again.  That is
what keeps the language server's latency flat as a file grows.

A kernel's findings are reused only when every range they mention lies inside the kernel
(a fix that edits a top-level constant is recomputed each time), and only for the
built-in rules; plugin rules always run on the whole program.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Protocol

from cake_core.diagnostics.model import Diagnostic
from cake_core.ir.kernel import Kernel, Program
from cake_core.shift import LineShift, spans_of
from cake_core.source import SourceFile, Span
from cake_core.syntax import ast

#: Kernels remembered per plugin set (a 2,000-line file holds about a hundred).
LIMIT = 2048

Verify = Callable[[Program, SourceFile], list[Diagnostic]]


class KernelSource(Protocol):
    """A kernel of the check: its span now, and its IR, which may be built on demand."""

    @property
    def span(self) -> Span: ...

    def get(self) -> Kernel: ...


class Ready:
    """A kernel already built, seen as a `KernelSource`."""

    __slots__ = ("kernel",)

    def __init__(self, kernel: Kernel) -> None:
        self.kernel = kernel

    @property
    def span(self) -> Span:
        return self.kernel.span

    def get(self) -> Kernel:
        return self.kernel


class KernelVerdicts:
    def __init__(self, limit: int = LIMIT) -> None:
        self._store: OrderedDict[tuple[str, ...], tuple[int, int, list[Diagnostic]]] = \
            OrderedDict()
        self._limit = limit
        self.hits = 0
        self.misses = 0

    def run(self, program: Program, source: SourceFile, module: ast.Module, rules: str,
            arch: str | None, verify: Verify,
            kernels: Sequence[KernelSource] | None = None) -> list[Diagnostic]:
        """Findings of `verify` on every kernel of `program`, reusing unchanged kernels'.

        `kernels`, when given, stands for `program.kernels`: the IR of a kernel whose
        findings are reused is then never asked for (`cake_core/check_cache.py` builds
        it only on demand)."""
        prelude = _digest(b"\0".join(
            source.data[s.span.start.offset:s.span.end.offset] for s in module.body
            if not isinstance(s, ast.FunctionDef)))
        out: list[Diagnostic] = []
        for ref in kernels if kernels is not None else [Ready(k) for k in program.kernels]:
            start, end = ref.span.start, ref.span.end
            key = (rules, arch or "", source.path, prelude,
                   _digest(source.data[start.offset:end.offset]))
            hit = self._store.get(key)
            if hit is not None:
                self._store.move_to_end(key)
                self.hits += 1
                old_offset, old_line, diags = hit
                shift = LineShift(start.offset - old_offset, start.line - old_line)
                out.extend(shift.diagnostic(d) for d in diags)
                continue
            self.misses += 1
            k = ref.get()
            single = Program(program.path, program.constants, program.dims, [k],
                             program.constant_spans)
            diags = verify(single, source)
            out.extend(diags)
            if all(_inside(s, k) for d in diags for s in spans_of(d)):
                self._store[key] = (start.offset, start.line, diags)
                if len(self._store) > self._limit:
                    self._store.popitem(last=False)
        return out


def _digest(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=16).hexdigest()


def _inside(span: Span, k: Kernel) -> bool:
    return k.span.start.offset <= span.start.offset and span.end.offset <= k.span.end.offset
