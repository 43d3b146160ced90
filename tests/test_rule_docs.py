"""Every diagnostic code has a docs page, and the page's examples are true.

Pages follow ruff's rule docs: a `# CODE: name` title, then `## What it does`,
`## Why is this bad?`, `## Example` (a failing program), `## Use instead` (the passing
twin) and `## Fix safety`.  Examples are checked with the real compiler, so a page cannot
drift from what `cake check` says: the Example must produce the page's code and the Use
instead program must check clean, with no diagnostic of any kind.  CK9xx codes are
compiler and plugin faults that no kernel should trigger; their pages describe the
situation instead, and only their structure is checked.

In an Example, `␀` (U+2400) stands for a NUL byte, which a Markdown page cannot show.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from cake_core.check import check_text
from cake_core.diagnostics import codes
from cake_core.diagnostics.codes import FixAvailability, Rule

RULES_DIR = Path(__file__).resolve().parent.parent / "docs" / "rules"
SECTIONS = ("What it does", "Why is this bad?", "Example", "Use instead", "Fix safety")
NUL_STAND_IN = "\u2400"
DYNAMIC_MARKER = "<!-- dynamic:"
"""Pages of findings made by running something (the simulator, the compiler, the GPU)."""
RULES = [r for r in codes.all_rules() if r.origin == "cake"]

_FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.M | re.S)


@dataclass(frozen=True)
class RulePage:
    title: str
    sections: dict[str, str]
    dynamic: bool = False
    """Found dynamically (the page starts with DYNAMIC_MARKER): the simulator's, the
    compiler's and the runner's tests run those examples, so the static check here does
    not apply."""

    def python_block(self, section: str) -> str | None:
        """The first fenced python block of a section, or None."""
        for lang, body in _FENCE.findall(self.sections.get(section, "")):
            if lang == "python":
                return body
        return None


def read_page(path: Path) -> RulePage:
    text = path.read_text(encoding="utf-8")
    lines = text.split("\n")
    dynamic = lines[0].strip().startswith(DYNAMIC_MARKER)
    while lines and lines[0].startswith("<!--"):  # page markers precede the title
        lines = lines[1:]
    title = lines[0]
    sections: dict[str, str] = {}
    current: str | None = None
    body: list[str] = []
    in_fence = False
    for line in lines[1:]:
        if line.startswith("```"):
            in_fence = not in_fence
        if not in_fence and line.startswith("## "):
            if current is not None:
                sections[current] = "\n".join(body)
            current, body = line[3:].strip(), []
        else:
            body.append(line)
    if current is not None:
        sections[current] = "\n".join(body)
    return RulePage(title, sections, dynamic)


def page_of(rule: Rule) -> RulePage:
    path = RULES_DIR / f"{rule.code}.md"
    assert path.is_file(), f"{rule.code} ({rule.name}) has no page docs/rules/{rule.code}.md"
    return read_page(path)


def is_fault(rule: Rule) -> bool:
    return rule.code.startswith("CK9")


def test_every_page_documents_a_registered_code() -> None:
    registered = {r.code for r in RULES}
    pages = {p.stem for p in RULES_DIR.glob("*.md")}
    assert pages, "docs/rules is empty"
    assert pages <= registered, f"pages for unknown codes: {sorted(pages - registered)}"


@pytest.mark.parametrize("rule", RULES, ids=[r.code for r in RULES])
def test_page_structure(rule: Rule) -> None:
    page = page_of(rule)
    assert page.title == f"# {rule.code}: {rule.name}"
    assert list(page.sections) == list(SECTIONS), f"sections must be exactly {SECTIONS}"
    for name, body in page.sections.items():
        assert body.strip(), f"section `{name}` is empty"
    safety = page.sections["Fix safety"].lower()
    if rule.fix is FixAvailability.NONE:
        assert "no automatic fix" in safety
    else:
        assert "safe" in safety, "say whether the offered fix is safe or unsafe"
    if not is_fault(rule):
        assert page.python_block("Example") is not None, "Example needs a ```python block"
        assert page.python_block("Use instead") is not None, "Use instead needs a ```python block"


@pytest.mark.parametrize("rule", [r for r in RULES if not is_fault(r)],
                         ids=[r.code for r in RULES if not is_fault(r)])
def test_examples_are_true(rule: Rule) -> None:
    page = page_of(rule)
    if page.dynamic:
        pytest.skip("a dynamic finding: tests/sim, tests/lower and tests/run run its examples")
    bad = page.python_block("Example")
    good = page.python_block("Use instead")
    assert bad is not None and good is not None
    found = check_text(bad.replace(NUL_STAND_IN, "\0"), f"{rule.code}-example.cake").diagnostics
    assert rule.code in {d.code for d in found}, (
        f"the Example does not produce {rule.code}; it gives "
        f"{[(d.code, d.message) for d in found]}")
    assert not any(d.code == codes.INTERNAL_ERROR.code for d in found)
    ours = [d for d in found if d.code == rule.code]
    if rule.fix is FixAvailability.ALWAYS:
        assert all(d.fixes for d in ours), "the table says a fix is always offered"
    if rule.fix is FixAvailability.NONE:
        assert not any(d.fixes for d in ours), "the table says no fix is ever offered"
    clean = check_text(good, f"{rule.code}-use-instead.cake").diagnostics
    assert clean == [], f"Use instead is not clean: {[(d.code, d.message) for d in clean]}"
