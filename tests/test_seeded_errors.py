"""Seeded-error corpus: realistic kernels, each with one planted front-end mistake.

Every `tests/errors/*.cake` file declares on its first line what the compiler must say:

    # expect: CK102 13:13-13:21

(code, then 1-based line:UTF-16 column of the start and of the end).  A second header
line `# also: CK114 CK3xx` names codes that may additionally appear.  The check is strict
on purpose: one bug, one finding, at the right place.  A second diagnostic is a cascade
and a different range is a worse editor underline, and both are compiler defects.

When the finding offers a fix, the first fix is applied: the finding must be gone from
that place, and a fix marked safe must leave no diagnostic of that code anywhere.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from cake_core.check import check_source
from cake_core.diagnostics.model import Applicability, Diagnostic, apply_edits
from cake_core.source import SourceFile

ERRORS_DIR = Path(__file__).resolve().parent / "errors"
FILES = sorted(ERRORS_DIR.glob("*.cake"))

_EXPECT = re.compile(rb"^# expect: (?P<code>[A-Z]+\d{3}) (?P<l0>\d+):(?P<c0>\d+)-"
                     rb"(?:(?P<l1>\d+):)?(?P<c1>\d+)\s*$")
_ALSO = re.compile(rb"^# also:((?: [A-Z]+\d{3})+)\s*$")


@dataclass(frozen=True)
class Expectation:
    code: str
    start: tuple[int, int]
    end: tuple[int, int]
    also: frozenset[str]


def read_expectation(raw: bytes) -> Expectation:
    lines = raw.split(b"\n", 2)
    m = _EXPECT.match(lines[0])
    assert m is not None, f"first line must be `# expect: CODE L:C-L:C`, got {lines[0]!r}"
    l0, c0 = int(m["l0"]), int(m["c0"])
    l1 = int(m["l1"]) if m["l1"] else l0
    also: frozenset[str] = frozenset()
    if len(lines) > 1 and (a := _ALSO.match(lines[1])) is not None:
        also = frozenset(a.group(1).decode().split())
    return Expectation(m["code"].decode(), (l0, c0), (l1, int(m["c1"])), also)


def where(d: Diagnostic) -> tuple[tuple[int, int], tuple[int, int]]:
    """A diagnostic's range as 1-based (line, UTF-16 column) pairs, as the headers write it."""
    s, e = d.span.start, d.span.end
    return (s.line + 1, s.col_utf16 + 1), (e.line + 1, e.col_utf16 + 1)


def describe(diags: list[Diagnostic]) -> str:
    return "\n".join(f"  {d.code} {where(d)} {d.message}" for d in diags) or "  (none)"


def test_expectation_header_forms() -> None:
    one_line = read_expectation(b"# expect: CK102 13:13-21\nBM = 1\n")
    assert (one_line.code, one_line.start, one_line.end) == ("CK102", (13, 13), (13, 21))
    multi = read_expectation(b"# expect: CK002 7:14-9:6\n# also: CK114 CK301\n")
    assert (multi.start, multi.end, multi.also) == ((7, 14), (9, 6), {"CK114", "CK301"})
    with pytest.raises(AssertionError):
        read_expectation(b"# expects CK102 13:13\n")


def test_corpus_is_large_enough() -> None:
    assert len(FILES) >= 20
    codes = {read_expectation(f.read_bytes()).code for f in FILES}
    # the corpus spans syntax, subset, encoding, names, types, shapes, arch and roles
    assert {"CK001", "CK002", "CK003", "CK101", "CK102", "CK103", "CK104", "CK105",
            "CK106", "CK107", "CK108", "CK110", "CK111", "CK112"} <= codes


@pytest.mark.parametrize("path", FILES, ids=[f.stem for f in FILES])
def test_one_bug_one_finding(path: Path) -> None:
    raw = path.read_bytes()
    want = read_expectation(raw)
    source = SourceFile.from_bytes(raw, path.name)
    result = check_source(source)
    main = [d for d in result.diagnostics if d.code not in want.also]
    assert len(main) == 1, f"expected exactly one {want.code}, got:\n{describe(main)}"
    (diag,) = main
    assert diag.code == want.code, describe(main)
    assert where(diag) == (want.start, want.end), describe(main)
    assert diag.message and "\n" not in diag.message
    assert diag.path == path.name

    if not diag.fixes:
        return
    fix = diag.fixes[0]
    fixed_text = apply_edits(source.text, fix.edits)
    assert fixed_text != source.text, f"fix {fix.title!r} changes nothing"
    after = check_source(SourceFile(fixed_text, path.name)).diagnostics
    assert not any(d.code == "CK901" for d in after), describe(after)
    same = [d for d in after if d.code == diag.code and where(d) == where(diag)]
    assert not same, f"fix {fix.title!r} left the finding in place:\n{describe(same)}"
    if fix.applicability is Applicability.SAFE:
        left = [d for d in after if d.code == diag.code]
        assert not left, f"safe fix {fix.title!r} left {diag.code}:\n{describe(left)}"
