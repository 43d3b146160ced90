"""What a primitive's type rule sees, and the checks most rules share.

A type rule receives a `CallContext`: the bound arguments as typed Values, where each
came from, the target arch, and the kernel being built.  It returns the result type,
or reports a diagnostic through `ctx.error(...)` and returns `ErrorType` so that later
uses stay quiet (one bug, one finding).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from cake_core.diagnostics.codes import Rule
from cake_core.diagnostics.model import Diagnostic, Fix, Related
from cake_core.hardware import ArchSpec
from cake_core.ir.kernel import Value
from cake_core.ir.symbolic import SymExpr
from cake_core.ir.types import (
    ErrorType,
    FragmentType,
    NoneType,
    Shape,
    SmemType,
    TileType,
    Type,
)
from cake_core.source import Span

if TYPE_CHECKING:
    from cake_core.primitives.registry import Primitive


class KernelScope(Protocol):
    """The parts of the kernel under construction that type rules may consult/extend."""

    def add_smem(self, name: str, ty: SmemType, span: Span, offset: int | None = None,
                 offset_span: Span | None = None) -> None: ...
    def add_barriers(self, name: str, count: int, span: Span) -> None: ...
    def declare_pipeline(self, name: str, span: Span) -> None: ...


@dataclass
class CallContext:
    prim: Primitive
    args: dict[str, Value]
    arg_spans: dict[str, Span]
    span: Span
    arch: ArchSpec
    kernel: KernelScope
    role: str | None
    targets: tuple[str, ...]
    diagnostics: list[Diagnostic] = field(default_factory=list)

    # -- access ------------------------------------------------------------------------
    def type(self, name: str) -> Type:
        return self.args[name].type

    def value(self, name: str) -> Value:
        return self.args[name]

    def has(self, name: str) -> bool:
        """Whether an optional argument was given (omitted ones default to None)."""
        v = self.args.get(name)
        return v is not None and not isinstance(v.type, NoneType)

    def int(self, name: str) -> int | None:
        v = self.args[name]
        return v.sym.const if v.sym is not None else None

    def sym(self, name: str) -> SymExpr | None:
        return self.args[name].sym

    def const(self, name: str) -> object:
        return self.args[name].const

    def at(self, name: str | None) -> Span:
        if name is None:
            return self.span
        return self.arg_spans.get(name, self.span)

    @property
    def target(self) -> str | None:
        return self.targets[0] if self.targets else None

    # -- reporting ---------------------------------------------------------------------
    def error(self, rule: Rule, message: str, at: str | Span | None = None, *,
              notes: Sequence[str] = (), fixes: Sequence[Fix] = (),
              related: Sequence[Related] = ()) -> ErrorType:
        span = at if isinstance(at, Span) else self.at(at)
        self.diagnostics.append(rule.at(span, message, notes=tuple(notes), fixes=tuple(fixes),
                                        related=tuple(related)))
        return ErrorType()

    @property
    def failed(self) -> bool:
        return bool(self.diagnostics)


# --- shared checks --------------------------------------------------------------------
def same_shape(a: Shape, b: Shape) -> bool:
    if type(a) is tuple and type(b) is tuple:
        return a == b  # the same test, element by element, done by the tuples themselves
    return len(a) == len(b) and all(x == y for x, y in zip(a, b, strict=True))


def nbytes(t: SmemType | TileType | FragmentType) -> int | None:
    n = 1
    for d in t.shape:
        c = d.const
        if c is None:
            return None
        n *= c
    return n * t.dtype.bytes
