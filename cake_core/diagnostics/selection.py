"""Which codes a run reports: `select`, `ignore` and `extend-select`, as ruff resolves them.

A selector is a code (`CK302`), a prefix of codes (`CK3`, `KM`) or `ALL`.  A code is
reported when some selector of `select` or `extend-select` matches it and no selector of
`ignore` matches it at least as specifically: `select = ["CK3"], ignore = ["CK302"]` keeps
every CK3xx but CK302, and `select = ["CK302"], ignore = ["CK3"]` keeps CK302 alone.  An
unset `select` selects everything.  A later layer (the command line over `[tool.cake]`)
that sets `select` replaces the earlier `select` and `ignore`; one that only ignores or
extends adds to them.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from cake_core.diagnostics.model import Diagnostic

ALL = "ALL"


def _specificity(selector: str, code: str) -> int:
    """How closely `selector` matches `code`: -1 when it does not, else its length."""
    if selector == ALL:
        return 0
    return len(selector) if code.startswith(selector.upper()) else -1


@dataclass(frozen=True, slots=True)
class Selection:
    select: tuple[str, ...] | None = None
    ignore: tuple[str, ...] = ()
    extend_select: tuple[str, ...] = ()

    @property
    def is_everything(self) -> bool:
        return self.select is None and not self.ignore

    def allows(self, code: str) -> bool:
        chosen = [*(self.select if self.select is not None else (ALL,)), *self.extend_select]
        selected = max((_specificity(s, code) for s in chosen), default=-1)
        ignored = max((_specificity(s, code) for s in self.ignore), default=-1)
        return selected >= 0 and selected > ignored

    def filter(self, findings: Iterable[Diagnostic]) -> list[Diagnostic]:
        findings = list(findings)
        if self.is_everything:
            return findings
        return [d for d in findings if self.allows(d.code)]

    def then(self, later: Selection) -> Selection:
        """This selection overridden by a later layer (the command line over the config)."""
        if later.select is not None:
            return later
        return Selection(self.select, (*self.ignore, *later.ignore),
                         (*self.extend_select, *later.extend_select))

    def selectors(self) -> tuple[str, ...]:
        return (*(self.select or ()), *self.ignore, *self.extend_select)


def unknown_selectors(selection: Selection, codes: Iterable[str]) -> list[str]:
    """The selectors that match no known code (a misspelt one would select nothing)."""
    known = list(codes)
    return [s for s in selection.selectors()
            if s != ALL and not any(c.startswith(s.upper()) for c in known)]
