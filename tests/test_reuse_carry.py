"""Records of the last clean parse, carried through parses with syntax errors
(`reuse.carry`), give exactly what a full parse gives.

The language server re-parses through `cake_lsp.documents._sync`, which hands a parse
that keeps no records (one with a syntax error) those of the parse before it, seen
through the edit.  Typing through a syntax error is the case that matters: an edit makes
the error, more edits follow, one fixes it.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from edit_support import Edit, apply_edit, edits
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cake_core.check_cache import same_shifted
from cake_core.source import SourceFile
from cake_core.syntax import convert, reuse
from cake_core.syntax.parser import Document, parse
from cake_lsp.documents import _sync

ROOT = Path(__file__).resolve().parent.parent
SEED = (ROOT / "bench" / "data" / "gemm_sm90_block.cake").read_text(encoding="utf-8")
HEADER, _, BODY = SEED.partition("# --- kernel ---\n")
TEXT = HEADER + "".join(BODY.replace("def gemm(", f"def k{i}(") + "\n" for i in range(4))


def same_as_full(doc: Document) -> None:
    full = parse(SourceFile(doc.text, doc.path))
    assert doc.result.module == full.module
    assert doc.result.diagnostics == full.diagnostics
    origins_hold(doc)


def origins_hold(doc: Document) -> None:
    """`ParseResult.moved` is what the type-check cache trusts instead of comparing: each
    statement named there must be its origin moved by exactly the bytes and lines given."""
    stmts = {id(s): s for s in doc.result.module.body}
    for key, (root, offset, lines) in doc.result.moved.items():
        if key in stmts:
            assert same_shifted(root, stmts[key], offset, lines)


def test_the_edit_that_fixes_a_syntax_error_converts_only_its_kernel(
        monkeypatch: pytest.MonkeyPatch) -> None:
    doc = Document(TEXT, "k.cake")
    at = TEXT.index("s = ab.acquire()", TEXT.index("def k1(")) + len("s = ab.acquire(")
    broken = TEXT[:at] + TEXT[at + 1:]  # `acquire(`: an unclosed bracket
    _sync(doc, broken)
    assert doc.result.has_errors
    assert isinstance(doc.result._records, reuse.Carried)
    converted: list[str] = []
    original = convert.Converter._definition

    def spy(self: convert.Converter, *args: object, **kw: object) -> object:
        fn = original(self, *args, **kw)
        converted.append(getattr(fn, "name", "?"))
        return fn

    monkeypatch.setattr(convert.Converter, "_definition", spy)
    _sync(doc, TEXT)
    assert converted == ["k1"]
    same_as_full(doc)


def test_a_chain_of_edits_through_errors() -> None:
    doc = Document(TEXT, "k.cake")
    at = TEXT.index("regs=232")
    steps = [TEXT[:at] + "(" + TEXT[at:],                       # unclosed bracket
             "\n\n" + TEXT[:at] + "(" + TEXT[at:],               # lines added above it
             "\n\n" + TEXT[:at] + "(" + TEXT[at:].replace("def k3(", "def k3 ("),
             "\n\n" + TEXT.replace("def k3(", "def k3 ("),       # fixed
             TEXT]
    for text in steps:
        _sync(doc, text)
        same_as_full(doc)


def test_the_chain_is_bounded() -> None:
    records = {(0, 1, 2, 1, True): reuse.Record(None, (), 0, 0)}
    edit = reuse.Edit(5, 5, 6, 0, 0, 0)
    carried = reuse.carry(records, edit)
    for _ in range(reuse.MAX_CHAIN - 1):
        carried = reuse.carry(carried, edit)
    assert carried is not None and len(carried.edits) == reuse.MAX_CHAIN
    assert reuse.carry(carried, edit) is None
    assert reuse.carry(None, edit) is None


PIECES = [*"()[]:,.=+ \n'\"#x", "    ", "\n    ", "acquire()", "def ", "with ", "\n\n"]

_edit = edits(PIECES, 6)


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_edit, min_size=1, max_size=8))
def test_random_edits_through_sync_equal_a_full_parse(
        drawn: list[Edit]) -> None:
    doc = Document(TEXT, "k.cake")
    text = TEXT
    for edit in drawn:
        text = apply_edit(text, edit)
        _sync(doc, text)
        same_as_full(doc)
    _sync(doc, TEXT)  # back to the clean text, through whatever records were carried
    same_as_full(doc)


def test_moved_kernels_trace_back_to_their_conversion() -> None:
    doc = Document(TEXT, "k.cake")
    first = {s.name: s for s in doc.result.module.body if hasattr(s, "name")}
    _sync(doc, "x = 1\n" + TEXT)  # every kernel moves down a line and 6 bytes
    _sync(doc, "\n" + "x = 1\n" + TEXT)  # and again
    for stmt in doc.result.module.body:
        if getattr(stmt, "name", None) in first:
            root, offset, lines = doc.result.moved[id(stmt)]
            assert root is first[stmt.name] and (offset, lines) == (7, 2)
    origins_hold(doc)
