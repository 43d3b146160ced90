"""Where rule documentation lives and how to read it at run time.

The pages in docs/rules/ are the source of truth, and the wheel ships them as package
data (`cake_core.shipped`); a code without a page (a plugin's, say) is still explained
from the rule table, so `cake explain` never fails.
"""

from __future__ import annotations

from pathlib import Path

from cake_core.diagnostics.codes import Rule
from cake_core.shipped import RULES_DIR


def rule_doc_path(code: str) -> Path:
    return RULES_DIR / f"{code.upper()}.md"


def rule_doc(rule: Rule) -> str:
    path = rule_doc_path(rule.code)
    if path.is_file():
        lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
        while lines and lines[0].startswith("<!--"):  # page markers for the doc tests
            lines.pop(0)
        return "".join(lines)
    return (f"# {rule.code}: {rule.name}\n\n{rule.summary}\n\n"
            f"Default severity: {rule.severity.value}; fix: {rule.fix.value}.\n")
