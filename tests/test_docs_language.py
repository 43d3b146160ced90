"""docs/language.md must not drift from the compiler.

Complete files in the page must check clean; the tour's code must be verbatim excerpts of
examples/gemm_sm90.cake; and each mistake the tour promises a diagnostic for must produce
that code when made in the example.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from cake_core.check import check_text
from cake_core.diagnostics.text import render_text

ROOT = Path(__file__).resolve().parent.parent
PAGE = (ROOT / "docs" / "language.md").read_text(encoding="utf-8")
GEMM = (ROOT / "examples" / "gemm_sm90.cake").read_text(encoding="utf-8")
TOUR = PAGE.split("## A tour of examples/gemm_sm90.cake", 1)[1]

_BLOCK = re.compile(r"```python\n(.*?)```", re.S)


def _blocks(text: str) -> list[str]:
    return _BLOCK.findall(text)


def test_page_links_its_companions() -> None:
    for target in ("primitives.md", "rules/", "diagnostics.md"):
        assert f"]({target})" in PAGE
    assert (ROOT / "docs" / "primitives.md").is_file()


@pytest.mark.parametrize("code", [b for b in _blocks(PAGE) if "@kernel" in b and "dim(" in b],
                         ids=lambda b: b.splitlines()[0][:40])
def test_complete_files_in_the_page_check_clean(code: str) -> None:
    result = check_text(code, "snippet.cake")
    rendered = render_text(result.diagnostics, {"snippet.cake": result.source})
    assert result.diagnostics == [], rendered


def test_the_page_has_a_complete_file() -> None:
    assert any("@kernel" in b and "dim(" in b for b in _blocks(PAGE))


def _code_lines(text: str) -> list[str]:
    """Lines that carry code: blank and comment-only lines may be left out of a quote."""
    return [ln.rstrip() for ln in text.splitlines()
            if ln.strip() and not ln.strip().startswith("#")]


@pytest.mark.parametrize("code", _blocks(TOUR), ids=lambda b: b.strip().splitlines()[0][:40])
def test_tour_code_is_quoted_from_the_example(code: str) -> None:
    lines = _code_lines(code)
    gemm_lines = _code_lines(GEMM)
    starts = [i for i, ln in enumerate(gemm_lines) if ln == lines[0]]
    assert any(gemm_lines[i:i + len(lines)] == lines for i in starts), lines[0]


def _codes_after(old: str, new: str, count: int = 1) -> set[str]:
    assert old in GEMM, old
    result = check_text(GEMM.replace(old, new, count), "gemm_sm90.cake")
    return {d.code for d in result.diagnostics}


def test_tour_mistake_missing_transpose() -> None:
    result = check_text(GEMM.replace("sb[s].T)", "sb[s])", 1), "gemm_sm90.cake")
    [diag] = result.diagnostics
    assert diag.code == "CK105" and "transposed" in diag.message
    assert diag.fixes and diag.fixes[0].edits[0].new_text == ".T"


def test_tour_mistake_wrong_arch() -> None:
    assert "CK108" in _codes_after('arch="sm_90a"', 'arch="sm_90"')


def test_tour_mistake_consumer_call_in_producer() -> None:
    assert "CK112" in _codes_after("s = ab.acquire()", "s = ab.wait()")


def test_tour_mistake_stage_count() -> None:
    old = "sa = smem(bf16, (STAGES, BM, BK)"
    assert "CK111" in _codes_after(old, "sa = smem(bf16, (3, BM, BK)")


def test_tour_mistake_typo() -> None:
    result = check_text(GEMM.replace("(M, N)]", "(M, Nn)]", 1), "gemm_sm90.cake")
    [diag] = result.diagnostics
    assert diag.code == "CK101" and "`N`" in diag.message and diag.fixes


def test_every_code_the_page_names_exists() -> None:
    from cake_core.diagnostics.codes import lookup

    named = set(re.findall(r"`(CK\d{3})`", PAGE))
    assert named, "the page names no diagnostic codes"
    assert {c for c in named if lookup(c) is None} == set()
