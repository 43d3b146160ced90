"""`cake check --fix`: apply the findings' fixes to a source text, as ruff does.

Each pass checks the text, takes the first applicable fix of every finding, applies those
whose edits do not overlap an edit already taken (ordered by position), and checks again:
a fix skipped for an overlap, or a finding that only appears once another is fixed, gets
its turn on the next pass.  Passes stop when nothing is left to apply or after
`MAX_PASSES` (ruff allows 100; a CAKE kernel has a handful of findings, and ten passes
are far more than any chain of fixes in the bug corpus needs, while a fix that keeps
re-creating its own finding stops early).  A pass whose fixes break the syntax is undone
and fixing stops there, so `--fix` never leaves a file worse than it found it.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable
from dataclasses import dataclass, field

from cake_core.check import CheckResult, check_source
from cake_core.diagnostics.model import Applicability, Diagnostic, Fix, TextEdit, apply_edits
from cake_core.source import BOM, SourceFile

MAX_PASSES = 10

Checker = Callable[[SourceFile], CheckResult]


@dataclass
class FixOutcome:
    """What fixing one source did."""

    source: SourceFile
    """The fixed text (the original when nothing applied)."""
    remaining: CheckResult
    """The check of the fixed text."""
    fixed: list[Diagnostic] = field(default_factory=list)
    """The findings whose fix was applied, as each pass found them."""
    passes: int = 0
    undone: list[Diagnostic] = field(default_factory=list)
    """The findings of a pass undone because its fixes broke the syntax."""

    @property
    def changed(self) -> bool:
        return bool(self.fixed)

    @property
    def text(self) -> str:
        """The fixed text as it should be written back (with the original's BOM)."""
        return (BOM if self.source.had_bom else "") + self.source.text


def applicable(diag: Diagnostic, unsafe: bool) -> Fix | None:
    """The fix `--fix` would apply to `diag`: its first safe one (or unsafe, when asked)."""
    allowed = {Applicability.SAFE, Applicability.UNSAFE} if unsafe else {Applicability.SAFE}
    return next((f for f in diag.fixes if f.applicability in allowed and f.edits), None)


def fixes_to_apply(diagnostics: list[Diagnostic], *, unsafe: bool = False
                   ) -> list[tuple[Diagnostic, Fix]]:
    """The fixes one pass applies together: each finding's `applicable` fix, by position,
    leaving out those that touch an earlier one's range.  `cake check --fix` and the
    language server's `source.fixAll` both take their edits from here."""
    return _non_overlapping([(d, f) for d in diagnostics
                             if (f := applicable(d, unsafe)) is not None])


def merged_edits(taken: list[tuple[Diagnostic, Fix]]) -> list[TextEdit]:
    """The edits of `taken`, each once (two findings may share one fix)."""
    edits: list[TextEdit] = []
    for _, fix in taken:
        edits.extend(e for e in fix.edits if e not in edits)
    return edits


def fix_source(source: SourceFile, *, unsafe: bool = False, check: Checker = check_source,
               max_passes: int = MAX_PASSES) -> FixOutcome:
    """Apply fixes to `source` until none is left (or `max_passes`); never raises."""
    result = check(source)
    outcome = FixOutcome(source, result)
    if source.decode_errors:  # writing back would replace the undecodable bytes
        return outcome
    for _ in range(max_passes):
        taken = fixes_to_apply(result.diagnostics, unsafe=unsafe)
        if not taken:
            break
        candidate = SourceFile(apply_edits(source.text, merged_edits(taken)), source.path)
        candidate.had_bom = source.had_bom
        after = check(candidate)
        outcome.passes += 1
        if _syntax_errors(after) > _syntax_errors(result):
            outcome.undone = [d for d, _ in taken]
            break
        outcome.fixed.extend(d for d, _ in taken)
        source, result = candidate, after
        if not any(applicable(d, unsafe) for d in result.diagnostics):
            break
    outcome.source, outcome.remaining = source, result
    return outcome


def _non_overlapping(fixes: list[tuple[Diagnostic, Fix]]) -> list[tuple[Diagnostic, Fix]]:
    """The fixes to apply together: by position, skipping one that touches the range of
    an earlier one (a finding whose fix is the same as an earlier one's counts as fixed)."""
    def bounds(fix: Fix) -> tuple[int, int]:
        return (min(e.span.start.offset for e in fix.edits),
                max(e.span.end.offset for e in fix.edits))

    out: list[tuple[Diagnostic, Fix]] = []
    seen: list[tuple[TextEdit, ...]] = []
    last_end = -1
    for diag, fix in sorted(fixes, key=lambda df: bounds(df[1])):
        if fix.edits in seen:
            out.append((diag, fix))
            continue
        start, end = bounds(fix)
        if start <= last_end:
            continue
        out.append((diag, fix))
        seen.append(fix.edits)
        last_end = max(last_end, end)
    return out


def _syntax_errors(result: CheckResult) -> int:
    return sum(1 for d in result.diagnostics if d.code in ("CK001", "CK002"))


def unified_diff(outcome: FixOutcome, original: SourceFile) -> str:
    """The fixes of `outcome` as a unified diff of `original` (empty when none applied)."""
    if not outcome.changed:
        return ""
    return "".join(difflib.unified_diff(
        original.text.splitlines(keepends=True), outcome.source.text.splitlines(keepends=True),
        fromfile=original.path, tofile=original.path))
