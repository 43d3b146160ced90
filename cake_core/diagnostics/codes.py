"""The table of diagnostic codes: one `Rule` per code, like ruff's code table.

Every code has a stable identifier, a kebab-case name, a default severity, whether a fix
is always / sometimes / never offered, and a docs page `docs/rules/<CODE>.md` with a
failing and a passing example (a test checks that each page exists and has both).

Ranges:  CK0xx syntax and the accepted subset, CK1xx names and types,
CK2xx resources, CK3xx synchronization, CK4xx layouts and memory access,
CK9xx faults inside the compiler or a plugin.  Plugins register their own codes with
a prefix of their own (e.g. `KM101`).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from cake_core.diagnostics.model import (
    Diagnostic,
    Fix,
    Related,
    Severity,
)
from cake_core.syntax.source import Span


class FixAvailability(str, Enum):
    ALWAYS = "always"
    SOMETIMES = "sometimes"
    NONE = "none"


@dataclass(frozen=True, slots=True)
class Rule:
    code: str
    name: str
    summary: str
    severity: Severity = Severity.ERROR
    fix: FixAvailability = FixAvailability.NONE
    origin: str = "cake"

    def at(
        self,
        span: Span,
        message: str,
        *,
        related: tuple[Related, ...] | list[Related] = (),
        notes: tuple[str, ...] | list[str] = (),
        fixes: tuple[Fix, ...] | list[Fix] = (),
        severity: Severity | None = None,
        data: dict[str, object] | None = None,
    ) -> Diagnostic:
        """A diagnostic of this rule at `span`."""
        return Diagnostic(
            code=self.code,
            severity=severity or self.severity,
            message=message,
            span=span,
            related=tuple(related),
            notes=tuple(notes),
            fixes=tuple(fixes),
            source=self.origin,
            data=dict(data or {}),
        )


class DuplicateCodeError(ValueError):
    pass


_RULES: dict[str, Rule] = {}


def register(rule: Rule) -> Rule:
    """Add a code to the table; a code registered twice is an error, not a shadow."""
    if rule.code in _RULES and _RULES[rule.code] != rule:
        raise DuplicateCodeError(f"diagnostic code {rule.code} is already registered")
    _RULES[rule.code] = rule
    return rule


def lookup(code: str) -> Rule | None:
    return _RULES.get(code.upper())


def all_rules() -> list[Rule]:
    return sorted(_RULES.values(), key=lambda r: r.code)


def _builtin(code: str, name: str, summary: str, severity: Severity = Severity.ERROR,
             fix: FixAvailability = FixAvailability.NONE) -> Rule:
    return register(Rule(code, name, summary, severity, fix))


# --- CK0xx: syntax and the accepted subset ------------------------------------------
SYNTAX_ERROR = _builtin("CK001", "syntax-error", "The text is not valid CAKE IR syntax.",
                        fix=FixAvailability.SOMETIMES)
UNSUPPORTED_SYNTAX = _builtin(
    "CK002", "unsupported-construct",
    "A Python construct outside the CAKE IR subset (while, lambda, import, class, ...).",
    fix=FixAvailability.SOMETIMES)
INVALID_ENCODING = _builtin("CK003", "invalid-encoding",
                            "The file is not valid UTF-8 or contains NUL characters.")
NO_KERNEL = _builtin("CK004", "no-kernel", "The file defines no @kernel function.",
                     severity=Severity.WARNING)
INVALID_TOPLEVEL = _builtin(
    "CK005", "invalid-top-level",
    "Only constants, dim() declarations and @kernel functions may appear at top level.")

# --- CK1xx: names and types ---------------------------------------------------------
UNKNOWN_NAME = _builtin("CK101", "unknown-name", "A name that is not defined in scope.",
                        fix=FixAvailability.SOMETIMES)
UNKNOWN_PRIMITIVE = _builtin("CK102", "unknown-primitive",
                             "A call to something that is not a CAKE primitive.",
                             fix=FixAvailability.SOMETIMES)
BAD_ARGUMENTS = _builtin("CK103", "bad-arguments",
                         "Missing, extra or unknown arguments to a primitive.",
                         fix=FixAvailability.SOMETIMES)
TYPE_MISMATCH = _builtin("CK104", "type-mismatch",
                         "An argument or operand has the wrong kind of value.")
SHAPE_MISMATCH = _builtin("CK105", "shape-mismatch",
                          "Operand shapes do not agree (tile, copy or MMA shapes).")
DTYPE_MISMATCH = _builtin("CK106", "dtype-mismatch",
                          "Operand element types do not agree or are not accepted.",
                          fix=FixAvailability.SOMETIMES)
NOT_CONSTANT = _builtin("CK107", "not-constant",
                        "A value that must be known at compile time is not.")
ARCH_UNSUPPORTED = _builtin("CK108", "arch-unsupported",
                            "A primitive or dtype that the kernel's arch does not have.",
                            fix=FixAvailability.SOMETIMES)
BAD_KERNEL_SIGNATURE = _builtin("CK109", "bad-kernel-signature",
                                "An invalid @kernel decorator, parameter or annotation.")
REDEFINITION = _builtin("CK110", "redefinition",
                        "A name bound twice where CAKE IR needs a single definition.")
BAD_INDEX = _builtin("CK111", "bad-index",
                     "Indexing with the wrong number of indices or out of constant bounds.")
BAD_ROLE = _builtin("CK112", "bad-role",
                    "A role declaration that is malformed, overlapping or outside the kernel's warps.")
DIVISION_BY_ZERO = _builtin("CK113", "division-by-zero", "A constant expression divides by zero.")
UNUSED_VALUE = _builtin("CK114", "unused-value",
                        "A buffer, fragment or pipeline that is declared and never used.",
                        severity=Severity.WARNING, fix=FixAvailability.ALWAYS)

# --- CK2xx: resources (cake_core/verify/resources.py) ----------------------------------

# --- CK3xx: synchronization (cake_core/verify/sync.py) ----------------------------------

# --- CK4xx: layouts and memory access (cake_core/verify/layout.py) -------------------------

# --- CK9xx: faults ---------------------------------------------------------------------
INTERNAL_ERROR = _builtin("CK901", "internal-error",
                          "The compiler failed on this input; please report it.")
PLUGIN_FAILURE = _builtin("CK902", "plugin-failure",
                          "A plugin raised, overran its time or failed to load; it was disabled.",
                          severity=Severity.WARNING)
