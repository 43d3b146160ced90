"""Every single-token slip in the examples gives one syntax error, at the slip.

For each example (and the benchmark's block GEMM) the sweep deletes one token at a time
and checks the result.  The tokens deleted are the `:` that ends a `def`/`for`/`if`/
`elif`/`else`/`with` header, every `)` and `]`, and every `,` between call arguments or
tuple elements.  A deletion that leaves valid Python (`f(a, (b, c))` -> `f(a (b, c))`,
a call) is no syntax slip and is left out: the type checker's findings are its business.

"At the slip" means the one error finding starts on:
- for a `:`, the header's line;
- for a `,`, the line of the deleted comma or of the token that followed it (a comma
  ending a line is missed where the next element begins);
- for a closer, a line of the logical line (statement) that held it, no later than the
  closer's own line: Python itself reports an unclosed bracket at its opener, and which
  opener is left open depends on which closer went missing.

The one finding's fixes must not repeat their edit in the rendered title (`insert `:`:
insert `:``).

The quick suite checks a tenth of the slips of each kind in each file (and every known
failure); the tests marked slow check the rest.
"""

from __future__ import annotations

import ast
import io
import tokenize
from dataclasses import dataclass
from pathlib import Path

import pytest

from cake_core.check import check_text
from cake_core.diagnostics.text import render_diagnostic

ROOT = Path(__file__).resolve().parent.parent
FILES = [*sorted((ROOT / "examples").glob("*.cake")), ROOT / "bench/data/gemm_sm90_block.cake"]
HEADERS = frozenset({"def", "for", "if", "elif", "else", "with"})


@dataclass(frozen=True)
class Slip:
    path: Path
    kind: str
    offset: int
    """Character offset of the deleted token."""
    first_line: int
    last_line: int
    """The 1-based lines the one finding may start on."""

    @property
    def id(self) -> str:
        return f"{self.path.name}:{self.last_line}:{self.kind}@{self.offset}"


def _slips(path: Path) -> list[Slip]:
    text = path.read_text()
    starts = [0]
    for line in text.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))

    def offset(tok: tokenize.TokenInfo) -> int:
        return starts[tok.start[0] - 1] + tok.start[1]

    toks = [t for t in tokenize.generate_tokens(io.StringIO(text).readline)
            if t.type not in (tokenize.NL, tokenize.COMMENT, tokenize.INDENT, tokenize.DEDENT)]
    out: list[Slip] = []
    first: tokenize.TokenInfo | None = None
    prev: tokenize.TokenInfo | None = None
    for tok in toks:
        if tok.type == tokenize.NEWLINE:
            if first is not None and first.string in HEADERS and prev is not None \
                    and prev.string == ":":
                out.append(Slip(path, "colon", offset(prev), prev.start[0], prev.start[0]))
            first = prev = None
            continue
        first = first or tok
        if tok.type == tokenize.OP and tok.string in ")]":
            out.append(Slip(path, "close", offset(tok), first.start[0], tok.start[0]))
        prev = tok
    commas = [i for i, t in enumerate(toks) if t.string == ","]
    seen: set[int] = set()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Call):
            items: list[ast.AST] = sorted([*node.args, *node.keywords],
                                          key=lambda n: (n.lineno, n.col_offset))
        elif isinstance(node, ast.Tuple):
            items = list(node.elts)
        else:
            continue
        for item in items[:-1]:
            end = (item.end_lineno, item.end_col_offset)
            i = next(i for i in commas if toks[i].start >= end)
            if i not in seen:
                seen.add(i)
                comma, after = toks[i], toks[i + 1]
                out.append(Slip(path, "comma", offset(comma), comma.start[0], after.start[0]))
    return [s for s in out if not _parses(_deleted(text, s))]


def _deleted(text: str, slip: Slip) -> str:
    return text[: slip.offset] + text[slip.offset + 1 :]


def _parses(text: str) -> bool:
    try:
        ast.parse(text)
    except SyntaxError:
        return False
    return True


_TUPLE_TARGET = ("`tm tn = f(...)` (the comma of a tuple target dropped) as a loop body's "
                 "first line also costs the body: the lines after it report 'unexpected "
                 "indent'")
_UNCLOSED_CALL = ("an empty call left open (`kv.release(`) right before a dedent reads the next "
                  "lines as its arguments: the repair closes it too late")
_OPEN_KEYWORD_TUPLE = ("a keyword's tuple left open mid-call (`offset=(first, 0, limit=...)`) "
                       "reads the next line as more of the call: two findings, not one")
KNOWN: dict[str, str] = {"attention_fwd_sm90_pingpong.cake:80:close@4215": _UNCLOSED_CALL,
                         "attention_fwd_sm90_causal.cake:83:close@4420": _UNCLOSED_CALL,
                         "attention_fwd_sm90_d256.cake:77:close@3861": _UNCLOSED_CALL,
                         "attention_fwd_sm90_d64.cake:85:close@4566": _UNCLOSED_CALL,
                         "attention_fwd_sm90_d64.cake:115:close@6164": _UNCLOSED_CALL,
                         "gemm_sm90_persistent.cake:32:comma@1370": _TUPLE_TARGET,
                         "gemm_sm90_persistent.cake:41:comma@1777": _TUPLE_TARGET,
                         "gemm_sm90_expert.cake:48:comma@2533": _TUPLE_TARGET,
                         "gemm_sm90_expert.cake:62:comma@3309": _TUPLE_TARGET,
                         "attention_fwd_sm90_varlen.cake:101:close@5603": _OPEN_KEYWORD_TUPLE,
                         "attention_fwd_sm90_varlen.cake:101:close@5623": _OPEN_KEYWORD_TUPLE}
"""Slips that still fail, by id, with why (each marked strict xfail)."""

SLIPS = [s for path in FILES for s in _slips(path)]


#: Every SAMPLE-th slip of each (file, kind) runs in the quick suite, with every KNOWN one;
#: the whole sweep (~4,000 checks, ten minutes on two cores) is marked slow.
SAMPLE = 10


def _params(slips: list[Slip]) -> list[object]:
    rank: dict[tuple[Path, str], int] = {}
    out = []
    for slip in slips:
        i = rank[slip.path, slip.kind] = rank.get((slip.path, slip.kind), -1) + 1
        reason = KNOWN.get(slip.id)
        marks: list[pytest.MarkDecorator] = []
        if reason:
            marks.append(pytest.mark.xfail(strict=True, reason=reason))
        elif i % SAMPLE:
            marks.append(pytest.mark.slow)
        out.append(pytest.param(slip, id=slip.id, marks=marks))
    return out


def test_the_sweep_covers_every_kind_in_every_file() -> None:
    kinds = {(s.path.name, s.kind) for s in SLIPS}
    assert kinds == {(p.name, k) for p in FILES for k in ("colon", "close", "comma")}
    assert len(SLIPS) > 400
    assert set(KNOWN) <= {s.id for s in SLIPS}


@pytest.mark.parametrize("slip", _params(SLIPS))
def test_one_error_at_the_slip(slip: Slip) -> None:
    text = _deleted(slip.path.read_text(), slip)
    result = check_text(text, slip.path.name)
    errors = [d for d in result.diagnostics if d.severity.value == "error"]
    assert len(errors) == 1, [f"{d.span.start.line + 1}: {d.message}" for d in errors]
    (error,) = errors
    assert error.code == "CK001"
    assert slip.first_line <= error.span.start.line + 1 <= slip.last_line, error.message
    rendered = render_diagnostic(error, {slip.path.name: result.source})
    for fix in error.fixes:
        assert f"{fix.title}: {fix.title}" not in rendered
