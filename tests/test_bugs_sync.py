"""Realistic kernels with one planted synchronization bug each, and their fixed twins.

Each `tests/bugs/<name>.cake` whose first line reads `# expect: CK3xx LINE` must give
exactly that one finding at that (1-based) line: the bug is found, at the right place,
and nothing else fires (no cascade from one bug into several findings).  Its twin
`<name>.fixed.cake` must check clean.  Where the finding offers a safe fix, applying
the fix must make the kernel clean as well.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from cake_core.check import check_text
from cake_core.diagnostics.model import Applicability, apply_edits
from cake_core.diagnostics.text import render_text

BUGS = Path(__file__).resolve().parent / "bugs"
_EXPECT = re.compile(r"^# expect: (CK3\d\d) (\d+)\s*$")


def _sync_bugs() -> list[tuple[Path, str, int]]:
    out = []
    for path in sorted(BUGS.glob("*.cake")):
        if path.name.endswith(".fixed.cake"):
            continue
        first = path.read_text(encoding="utf-8").split("\n", 1)[0]
        m = _EXPECT.match(first)
        if m:
            out.append((path, m.group(1), int(m.group(2))))
    return out


SYNC_BUGS = _sync_bugs()
IDS = [p.stem for p, _, _ in SYNC_BUGS]


def _check(path: Path, text: str | None = None):
    text = path.read_text(encoding="utf-8") if text is None else text
    result = check_text(text, str(path))
    return result, render_text(result.diagnostics, {str(path): result.source})


def test_there_are_enough_sync_bugs() -> None:
    assert len(SYNC_BUGS) >= 15
    assert len({code for _, code, _ in SYNC_BUGS}) >= 10, "the bugs should cover most rules"


@pytest.mark.parametrize(("path", "code", "line"), SYNC_BUGS, ids=IDS)
def test_bug_gives_exactly_its_finding(path: Path, code: str, line: int) -> None:
    result, rendered = _check(path)
    assert [(d.code, d.span.start.line + 1) for d in result.diagnostics] == [(code, line)], \
        rendered


@pytest.mark.parametrize(("path", "code", "line"), SYNC_BUGS, ids=IDS)
def test_fixed_twin_is_clean(path: Path, code: str, line: int) -> None:
    twin = path.with_name(path.stem + ".fixed.cake")
    assert twin.is_file(), f"{path.name} has no fixed twin"
    result, rendered = _check(twin)
    assert result.diagnostics == [], rendered


@pytest.mark.parametrize(("path", "code", "line"), SYNC_BUGS, ids=IDS)
def test_safe_fix_repairs_the_bug(path: Path, code: str, line: int) -> None:
    result, _ = _check(path)
    safe = [f for d in result.diagnostics for f in d.fixes
            if f.applicability is Applicability.SAFE]
    if not safe:
        pytest.skip(f"{code} offers no safe fix here")
    repaired = apply_edits(path.read_text(encoding="utf-8"), safe[0].edits)
    again, rendered = _check(path, repaired)
    assert again.diagnostics == [], f"after `{safe[0].title}`:\n{repaired}\n{rendered}"
