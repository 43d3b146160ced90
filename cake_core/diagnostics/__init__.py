"""Diagnostics: the model, the code table and the renderers (text, JSON, SARIF)."""

from cake_core.diagnostics.codes import Rule, all_rules, lookup
from cake_core.diagnostics.model import (
    Applicability,
    Diagnostic,
    Fix,
    Related,
    Severity,
    TextEdit,
    apply_edits,
    sort_diagnostics,
)

__all__ = [
    "Applicability",
    "Diagnostic",
    "Fix",
    "Related",
    "Rule",
    "Severity",
    "TextEdit",
    "all_rules",
    "apply_edits",
    "lookup",
    "sort_diagnostics",
]
