"""Two classes of slips that recovery repairs as one error, with the fix that undoes them.

- A bracket or `:` missing from a compound statement header continued over several lines
  (`def f(a,` then `      b:`): the header's continuation is indented deeper than its
  body, so the body must be measured from the header's first line.
- A comma missing between two names of a target list (`q, r s = ...`, `for i, j k in`):
  no operator can stand there, so the comma is put back.

Each case is written as the intended text with `§` before the one character the slip
deletes; the fix must give the intended text back.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from cake_core.diagnostics.model import Applicability, Diagnostic, apply_edits
from cake_core.diagnostics.text import render_diagnostic
from cake_core.source import SourceFile
from cake_core.syntax.parser import ParseResult, _parser, parse
from cake_core.syntax.recovery import error_ranges, find_repairs
from cake_core.syntax.tokens import scan

ROOT = Path(__file__).resolve().parent.parent
PATH = "k.cake"


def slipped(case: str) -> tuple[str, str, int]:
    """(intended text, text with the slip, 0-based line of the slip)."""
    at = case.index("§")
    return case.replace("§", ""), case[:at] + case[at + 2 :], case.count("\n", 0, at)


def one_error(text: str) -> tuple[ParseResult, Diagnostic]:
    result = parse(SourceFile(text, PATH))
    assert len(result.diagnostics) == 1, [
        f"{d.span.start.line + 1}: {d.message}" for d in result.diagnostics
    ]
    (diag,) = result.diagnostics
    assert diag.code == "CK001"
    return result, diag


def assert_fix_restores(result: ParseResult, diag: Diagnostic, text: str, good: str,
                        title: str) -> None:
    (fix,) = diag.fixes
    assert fix.title == title
    assert fix.applicability is Applicability.SAFE
    assert apply_edits(text, fix.edits) == good
    rendered = render_diagnostic(diag, {PATH: result.source})
    assert f"help: {title}" in rendered
    assert f"{title}: {title}" not in rendered
    assert parse(SourceFile(good, PATH)).diagnostics == []


def assert_local_scan_agrees(text: str) -> None:
    """The scan of the statements around the errors finds what a whole-file scan finds."""
    data = text.encode()
    root = _parser().parse(data).root_node
    errors = error_ranges(root)
    assert find_repairs(data, errors, root) == find_repairs(data, errors)


# --- a header continued over several lines ----------------------------------------------
UNCLOSED = [
    pytest.param(
        "def f(a: int,\n"
        "      b: int§):\n"
        "    x = g(a)\n"
        "    for h in range(n):\n"
        "        y = g(h)\n"
        "    return x\n",
        "(", id="def-then-loop"),
    pytest.param(
        '@kernel(arch="sm_90a", grid=(4, 1), warps=4)\n'
        "def scale(x: Tensor[f32, (M, N)],\n"
        "          y: Tensor[f32, (M, N)]§):\n"
        "    a = smem(f32, (BM, BN))\n"
        '    with role("load", warps=range(0, 4)):\n'
        "        a[0] = x[0]\n"
        "    y[0] = a[0]\n",
        "(", id="decorated-def-then-with"),
    pytest.param(
        "def k():\n"
        "    for i in range(0, n,\n"
        "                   step§):\n"
        "        x = f(i)\n"
        '        with role("a"):\n'
        "            y = 1\n"
        "    z = 1\n",
        "(", id="nested-for"),
    pytest.param(
        "def f(x: Tensor[f32, (M, N)],\n"
        "      y: Tensor[f32, (M, N)§]):\n"
        "    a = g(x)\n"
        "    for i in range(y):\n"
        "        a = g(a)\n",
        "[", id="annotation-bracket"),
]


@pytest.mark.parametrize(("case", "opener"), UNCLOSED)
def test_unclosed_bracket_in_a_multi_line_header(case: str, opener: str) -> None:
    good, text, line = slipped(case)
    result, diag = one_error(text)
    assert diag.message == f"`{opener}` was never closed"
    assert result.source.snippet(diag.span) == opener
    assert diag.span.start.line <= line
    closer = {"(": ")", "[": "]"}[opener]
    assert_fix_restores(result, diag, text, good, f"insert `{closer}`")
    assert_local_scan_agrees(text)


MISSING_COLON = [
    pytest.param(
        "def k():\n"
        '    with role("load", warps=range(0, 4),\n'
        "              regs=40)§:\n"
        "        x = f(1)\n"
        "        for i in range(2):\n"
        "            y = f(i)\n"
        "        z = 2\n"
        "    w = 3\n",
        "with", id="with"),
    pytest.param(
        "def f(a: int,\n"
        "      b: int)§:\n"
        "    x = g(a)\n"
        "    for h in range(n):\n"
        "        y = g(h)\n"
        "    return x\n",
        "def", id="def"),
]


@pytest.mark.parametrize(("case", "keyword"), MISSING_COLON)
def test_missing_colon_on_a_multi_line_header(case: str, keyword: str) -> None:
    good, text, line = slipped(case)
    result, diag = one_error(text)
    assert diag.message == f"expected `:` at the end of the `{keyword}` line"
    assert diag.span.start.line == line
    assert_fix_restores(result, diag, text, good, "insert `:`")
    assert_local_scan_agrees(text)


# --- a comma missing from a target list ---------------------------------------------------
MISSING_COMMA = [
    pytest.param("q, r§, s = divmod(a, b)\ny = q\n", "assignment", "r", "s", id="tuple"),
    pytest.param("BM, BN§, BK, STAGES = 128, 256, 64, 4\nM = dim('M')\n",
                 "assignment", "BN", "BK", id="constants"),
    pytest.param("def k(A: Tensor[f32, (M, N, K)]):\n"
                 "    m, n§, k = A.shape\n"
                 "    for i in range(m):\n"
                 "        x = i\n",
                 "assignment", "n", "k", id="in-a-kernel"),
    pytest.param("(a, b§, c) = t\n", "assignment", "b", "c", id="parenthesized"),
    pytest.param("x = 1\nfor i, j§, k in zip(a, b, c):\n    x = i\n",
                 "loop", "j", "k", id="for"),
]


@pytest.mark.parametrize(("case", "what", "left", "right"), MISSING_COMMA)
def test_missing_comma_between_targets(case: str, what: str, left: str, right: str) -> None:
    good, text, line = slipped(case)
    result, diag = one_error(text)
    assert diag.message == f"expected `,` between the {what} targets `{left}` and `{right}`"
    assert result.source.snippet(diag.span) == f"{left} {right}"
    assert diag.span.start.line == line
    assert_fix_restores(result, diag, text, good, "insert `,`")
    assert_local_scan_agrees(text)


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("a b = 1, 2\n", id="no-comma-so-maybe-a-misspelt-name"),
        pytest.param("x[i j], y = 1, 2\n", id="in-a-subscript"),
        pytest.param("for i j in x:\n    y = i\n", id="loop-without-comma"),
    ],
)
def test_no_comma_is_guessed_where_an_operator_may_be_missing(text: str) -> None:
    _, diag = one_error(text)
    assert "is a `,` or an operator missing" in diag.message
    assert diag.fixes == ()


@pytest.mark.parametrize(
    "line",
    [b"a, b = c if d else e\n", b"x, y = f(a) if b else g\n", b"type X = int\n",
     b"a, b = [i for i in c]\n", b"(a, b), c = d\n"],
)
def test_valid_target_lists_have_no_flaws(line: bytes) -> None:
    assert scan(line) == []


def test_the_valid_sources_have_no_flaws() -> None:
    """The scanner runs only after tree-sitter found an error; on valid text it must
    still find nothing, or a slip elsewhere would bring false repairs with it."""
    files = [*ROOT.glob("examples/*.cake"), *ROOT.glob("bench/data/*.cake")]
    assert len(files) > 5
    for path in files:
        assert scan(path.read_bytes()) == [], path
