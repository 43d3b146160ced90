"""A primitive's analysis facets: how the cost model, the simulator and the lowering handle it.

Each facet is named explicitly on the primitive that owns it: a callable, a `Lazy`
reference (`"module:attr"`, imported on first use, so `cake check` never imports numpy
or the CUDA lowering), or an explicit `Unsupported(why)`.  Nothing is found by a naming
convention, and a reference that does not resolve is an error (`FacetError`), never a
silent None.

All facets share one calling convention, `facet(op, ctx)`, where `ctx` is the analysis'
context (`CostContext`, `SimContext`, `LowerContext`).  An analysis may also ask a facet
for an optional hook by attribute (the lowering asks its lower facet for `layouts`, the
register-layout constraints of the op), so that one object carries everything an
analysis needs to know about one primitive.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

FacetKind = Literal["cost", "simulate", "lower"]
FACET_KINDS: tuple[FacetKind, ...] = ("cost", "simulate", "lower")

Facet = Callable[[Any, Any], Any]
"""`facet(op, ctx)`: the op being analysed and the analysis' context."""


class FacetError(Exception):
    """A facet reference that does not resolve to a callable `(op, ctx)`."""


@dataclass(frozen=True, slots=True)
class Lazy:
    """A facet imported on first use: `Lazy("cake_core.ops.mma.sim:wgmma")`."""

    target: str
    _resolved: list[Facet] = field(default_factory=list, compare=False, repr=False)

    def resolve(self) -> Facet:
        if self._resolved:
            return self._resolved[0]
        module, sep, attr = self.target.partition(":")
        if not sep or not module or not attr:
            raise FacetError(f"facet reference {self.target!r} is not 'module:attr'")
        try:
            obj = getattr(importlib.import_module(module), attr)
        except ImportError as exc:
            raise FacetError(f"facet {self.target!r}: cannot import {module}: {exc}") from exc
        except AttributeError as exc:
            raise FacetError(f"facet {self.target!r}: {module} has no {attr!r}") from exc
        if not callable(obj):
            raise FacetError(f"facet {self.target!r} is a {type(obj).__name__}, not callable")
        self._resolved.append(obj)
        return obj


@dataclass(frozen=True, slots=True)
class Unsupported:
    """An analysis that deliberately does not handle the primitive, and why.

    The cost model counts such an op as free (with a warning naming `why`), the
    simulator and the lowering refuse the kernel with `why` at the op.
    """

    why: str


FacetRef = Facet | Lazy | Unsupported


@dataclass(frozen=True, slots=True)
class Facets:
    """The cost, simulate and lower facets of one primitive (each given, never implied)."""

    cost: FacetRef
    simulate: FacetRef
    lower: FacetRef

    def ref(self, kind: FacetKind) -> FacetRef:
        ref: FacetRef = getattr(self, kind)
        return ref

    def get(self, kind: FacetKind) -> Facet | Unsupported:
        """The callable for `kind` (a `Lazy` is imported now), or its `Unsupported`."""
        ref = self.ref(kind)
        if isinstance(ref, Lazy):
            return ref.resolve()
        return ref


@dataclass(frozen=True, slots=True)
class FacetModules:
    """The modules that hold one family's facets, for declaring them compactly.

    `MODULES.of("wgmma")` is `Facets(cost=Lazy(f"{cost}:wgmma"), ...)`: every primitive
    still names its own facet attribute at its declaration.
    """

    cost: str
    simulate: str
    lower: str

    def of(self, attr: str) -> Facets:
        return Facets(cost=Lazy(f"{self.cost}:{attr}"),
                      simulate=Lazy(f"{self.simulate}:{attr}"),
                      lower=Lazy(f"{self.lower}:{attr}"))


def check_facet(ref: FacetRef) -> str | None:
    """Why `ref` is not a usable facet, or None: the completeness test's question.

    A usable facet resolves, is callable, and takes exactly two positional arguments
    `(op, ctx)`; an `Unsupported` must say why.
    """
    if isinstance(ref, Unsupported):
        return None if ref.why.strip() else "Unsupported() without a reason"
    try:
        fn = ref.resolve() if isinstance(ref, Lazy) else ref
    except FacetError as exc:
        return str(exc)
    if not callable(fn):
        return f"{fn!r} is not callable"
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return None  # a builtin without a signature: nothing more can be checked
    positional = [p for p in sig.parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    required = [p for p in positional if p.default is p.empty]
    if len(required) != 2 or [p.name for p in positional[:2]] != ["op", "ctx"]:
        names = ", ".join(p.name for p in sig.parameters.values())
        return f"takes ({names}); a facet takes (op, ctx)"
    return None
