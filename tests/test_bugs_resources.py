"""Planted resource and layout bugs: each yields exactly its one finding, its twin none.

Every `tests/bugs/<name>.cake` starts with `# expect: CODE LINE` (1-based line of the
primary range); `<name>.fixed.cake` is the same kernel with the bug fixed.  This file runs
the CK2xx and CK4xx ones (the synchronization bugs in the same folder have their own
runner).  One bug, one finding: a second diagnostic would be a cascade.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from cake_core.check import check_text
from cake_core.diagnostics.model import apply_edits

BUGS = Path(__file__).resolve().parent / "bugs"
_EXPECT = re.compile(r"^# expect: (CK\d{3}) (\d+)\s*$")


def _expectation(path: Path) -> tuple[str, int] | None:
    first = path.read_text(encoding="utf-8").split("\n", 1)[0]
    m = _EXPECT.match(first)
    return (m.group(1), int(m.group(2))) if m else None


CASES = sorted(p for p in BUGS.glob("*.cake")
               if not p.name.endswith(".fixed.cake")
               and (e := _expectation(p)) is not None and e[0][2] in "24")


def test_there_are_enough_planted_bugs() -> None:
    assert len(CASES) >= 15
    assert {_expectation(p)[0][2] for p in CASES} == {"2", "4"}  # type: ignore[index]


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_bug_gives_exactly_its_finding(path: Path) -> None:
    code, line = _expectation(path)  # type: ignore[misc]
    found = check_text(path.read_text(encoding="utf-8"), str(path)).diagnostics
    got = [(d.code, d.span.start.line + 1) for d in found]
    assert got == [(code, line)], [(d.code, d.span.start.line + 1, d.message) for d in found]


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_fixed_twin_is_clean(path: Path) -> None:
    twin = path.with_name(path.stem + ".fixed.cake")
    assert twin.is_file(), f"{path.name} has no fixed twin"
    found = check_text(twin.read_text(encoding="utf-8"), str(twin)).diagnostics
    assert found == [], [(d.code, d.span.start.line + 1, d.message) for d in found]


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_offered_fix_removes_the_finding(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    (diag,) = check_text(text, str(path)).diagnostics
    if not diag.fixes:
        pytest.skip(f"{diag.code} offers no fix here")
    fixed = apply_edits(text, diag.fixes[0].edits)
    after = check_text(fixed, str(path)).diagnostics
    assert after == [], [(d.code, d.message) for d in after]
