"""The plugin API: what a plugin (built-in or third-party) contributes.

A plugin is a distribution exposing an entry point in the group `cake.plugins` whose
object is a `Plugin` (or a zero-argument callable returning one).  CAKE's own rules,
primitives and tactics are packaged through the very same types (`builtin.py`), so a
third party has exactly the power the built-ins have.

Bump `PLUGIN_API_VERSION` when a change breaks plugins; a plugin declares the version it
was written against in `api` and is refused with a clear message when they differ.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from cake_core.diagnostics.codes import Rule
from cake_core.diagnostics.model import Diagnostic, TextEdit
from cake_core.primitives.registry import Primitive, Provenance

if TYPE_CHECKING:
    from cake_core.ir.kernel import Kernel, Program
    from cake_core.source import SourceFile

PLUGIN_API_VERSION = 1

#: A verifier pass: reads the typed program, returns findings.
Check = Callable[["Program", "SourceFile"], list[Diagnostic]]


@dataclass(frozen=True)
class RuleItem:
    """One verifier pass and the codes it may emit."""

    name: str
    codes: tuple[Rule, ...]
    check: Check
    provenance: Provenance = field(default_factory=Provenance)
    timeout_s: float = 1.0


@dataclass(frozen=True)
class TacticResult:
    """A rewrite as text edits plus the one-line reason an engineer would give for it."""

    edits: tuple[TextEdit, ...]
    rationale: str
    params: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Tactic:
    """A typed rewrite of a kernel.

    `applies` returns why the tactic applies to a kernel (shown to people and to the
    planner) or None; `apply` returns the rewrite for the given parameters, or None when
    those parameters make no sense for this kernel.  `variants` lists parameter sets worth
    trying (the search space an agent explores).
    """

    name: str
    summary: str
    applies: Callable[[Kernel, SourceFile], str | None]
    apply: Callable[[Kernel, SourceFile, dict[str, Any]], TacticResult | None]
    variants: Callable[[Kernel, SourceFile], Sequence[dict[str, Any]]] = lambda k, s: ({},)
    provenance: Provenance = field(default_factory=Provenance)


@dataclass(frozen=True)
class CalibrationItem:
    """Per-arch cost-model coefficients fitted from measurements, with their provenance."""

    name: str
    arch: str
    coefficients: dict[str, float]
    provenance: Provenance = field(default_factory=Provenance)


@dataclass(frozen=True)
class Plugin:
    name: str
    version: str
    api: int = PLUGIN_API_VERSION
    rules: tuple[RuleItem, ...] = ()
    primitives: tuple[Primitive, ...] = ()
    tactics: tuple[Tactic, ...] = ()
    calibrations: tuple[CalibrationItem, ...] = ()
    description: str = ""

    def items(self) -> list[tuple[str, str, Provenance]]:
        """(kind, name, provenance) for every item, for listings and the ledger."""
        out = [("rule", r.name, r.provenance) for r in self.rules]
        out += [("primitive", p.key, p.provenance) for p in self.primitives]
        out += [("tactic", t.name, t.provenance) for t in self.tactics]
        out += [("calibration", c.name, c.provenance) for c in self.calibrations]
        return out
