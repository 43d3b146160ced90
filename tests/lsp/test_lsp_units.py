"""The language server's parts, in process: position conversion, text sync, settings,
the pass guard, and the editor queries of `cake_core.ide`."""

from __future__ import annotations

import asyncio
import math
import time
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from lsp_support import GEMM
from lsprotocol import types as lsp

from cake_core.check import check_text
from cake_core.diagnostics import codes
from cake_core.diagnostics.model import Applicability, Fix, Related, TextEdit
from cake_core.ide.cursor import call_at_cursor, receiver_type
from cake_core.ide.index import SymbolKind, build_index
from cake_core.ir.types import PipelineType
from cake_core.plugins import PluginSet
from cake_core.shipped import RULES_DIR
from cake_core.source import SourceFile
from cake_core.syntax.parser import parse
from cake_lsp.convert import (
    UTF8,
    UTF16,
    UTF32,
    Codec,
    PositionError,
    diagnostic,
    docs_base_uri,
    docs_url,
    read_fix_data,
)
from cake_lsp.documents import CheckOptions, OpenDocument, changed_region
from cake_lsp.guard import NamedPass, PassGuard
from cake_lsp.settings import Settings, parse_settings

LINE = "x = 'aé🚀b'\n"


# --- positions -----------------------------------------------------------------------------
@pytest.mark.parametrize(("encoding", "col_of_b"), [(UTF8, 12), (UTF16, 9), (UTF32, 8)])
def test_columns_count_the_negotiated_units(encoding: str, col_of_b: int) -> None:
    src = SourceFile(LINE + LINE)
    codec = Codec(encoding)
    b = LINE.encode().index(b"b") + len(LINE.encode())
    p = codec.position(src, src.position(b))
    assert (p.line, p.character) == (1, col_of_b)
    assert codec.offset(src, p) == b


@given(st.text(alphabet="ab\né€🚀\r", max_size=40), st.sampled_from([UTF8, UTF16, UTF32]))
def test_offsets_and_positions_round_trip(text: str, encoding: str) -> None:
    src, codec = SourceFile(text), Codec(encoding)
    offset = 0
    for i, ch in enumerate(text):
        if not (ch == "\n" and text[i - 1:i] == "\r"):  # inside "\r\n": not a position
            assert codec.offset(src, codec.position(src, src.position(offset))) == offset
        offset += len(ch.encode())


def test_positions_outside_the_text() -> None:
    src, codec = SourceFile(LINE), Codec(UTF8)
    with pytest.raises(PositionError):
        codec.offset(src, lsp.Position(line=5, character=0))
    assert codec.offset(src, lsp.Position(line=5, character=0), strict=False) == len(src.data)
    assert codec.offset(src, lsp.Position(line=0, character=999)) == len(LINE.encode()) - 1
    inside_e = LINE.encode().index("é".encode()) + 1  # the second byte of é
    assert codec.offset(src, lsp.Position(line=0, character=inside_e)) == inside_e - 1


# --- diagnostics -----------------------------------------------------------------------------
def test_a_diagnostic_with_notes_related_and_fixes() -> None:
    src = SourceFile("ab = 1\ncd = 2\n", "/tmp/x.cake")
    fix = Fix("swap", (TextEdit(src.span(0, 2), "xy"),), Applicability.UNSAFE)
    d = codes.UNKNOWN_NAME.at(src.span(7, 9), "bad", notes=["look"], fixes=[fix],
                              related=[Related(src.span(0, 2), "there")])
    out = diagnostic(d, src, Codec(UTF16), uri="file:///tmp/x.cake", version=7,
                     docs_base="https://example.org/cake/docs/rules/")
    assert out.message == "bad\nnote: look"
    assert out.code_description.href == "https://example.org/cake/docs/rules/CK101.md"
    assert out.related_information[0].location.uri == "file:///tmp/x.cake"
    version, [f] = read_fix_data(out.data)
    assert version == 7 and f.applicability is Applicability.UNSAFE
    assert f.edits[0].range.start == lsp.Position(line=0, character=0)
    flat = diagnostic(d, src, Codec(UTF16), uri="u", version=1, docs_base=None,
                      related_support=False)
    assert flat.related_information is None and "there (line 1)" in flat.message
    assert flat.code_description is None


@pytest.mark.parametrize("junk", [None, 3, "x", {"fixes": 5}, {"fixes": [{"title": 1}]},
                                  {"version": "2", "fixes": [{"edits": [{}]}]}])
def test_fix_data_from_a_client_is_validated(junk: object) -> None:
    assert read_fix_data(junk)[1] == []


# --- text sync -------------------------------------------------------------------------------
@given(st.text(alphabet="ab\né🚀", max_size=30), st.text(alphabet="ab\né🚀", max_size=30))
def test_the_changed_region_rebuilds_the_new_text(old: str, new: str) -> None:
    a, b = old.encode(), new.encode()
    start, old_end, new_end = changed_region(a, b)
    assert a[:start] + b[start:new_end] + a[old_end:] == b
    b[start:new_end].decode()  # whole characters only
    a[start:old_end].decode()


edits = st.lists(st.tuples(st.integers(0, 30), st.integers(0, 90), st.integers(0, 3),
                           st.sampled_from(["", "x", "é", "🚀", "\n", ":", "(", "    s"])),
                 min_size=1, max_size=6)


@settings(max_examples=25, deadline=None)
@given(edits)
def test_incremental_sync_matches_a_full_parse(changes: list[tuple[int, int, int, str]]):
    async def run() -> None:
        doc = OpenDocument("file:///t.cake", GEMM, 1)
        options = CheckOptions(None, PluginSet(), [], 0)
        doc.analyze(doc.text, options)
        codec = Codec(UTF16)
        for i, (line, col, length, text) in enumerate(changes):
            start = lsp.Position(line=line, character=col)
            end = lsp.Position(line=line, character=col + length)
            doc.apply_changes([lsp.TextDocumentContentChangePartial(
                range=lsp.Range(start=start, end=end), text=text)], i + 2, codec)
            result = doc.analyze(doc.text, options)
            assert result.source.text == doc.text
            full = parse(SourceFile(doc.text, doc.path))
            assert [(d.code, d.span) for d in result.parse.diagnostics] == \
                [(d.code, d.span) for d in full.diagnostics]

    asyncio.run(run())


# --- the protocol -----------------------------------------------------------------------------
def test_handlers_that_answer_no_request_leave_no_future_behind() -> None:
    from functools import partial

    from cake_lsp.server import create_server

    async def run() -> None:
        protocol = create_server().protocol

        def generator_handler(params: object):
            yield from ()

        async def async_handler(params: object) -> None:
            return None

        for i, handler in enumerate((generator_handler, async_handler)):
            protocol._execute_handler(f"n{i}", handler, protocol._check_handler_result, (1,))
        protocol._execute_handler("req", async_handler,
                                  partial(protocol._send_handler_result, msg_id="req"), (1,))
        assert "req" in protocol._request_futures  # kept for $/cancelRequest until answered
        for _ in range(3):
            await asyncio.sleep(0)
        assert not {"n0", "n1"} & set(protocol._request_futures)

    asyncio.run(run())


# --- settings --------------------------------------------------------------------------------
def test_settings_are_read_from_the_cake_section() -> None:
    s, errors = parse_settings({"cake": {"arch": "sm_80", "plugins": {"disabled": ["x"]},
                                         "simulateOnSave": True, "nvccPath": "/bin/nvcc"}},
                               Settings())
    assert errors == []
    assert s == Settings("sm_80", frozenset({"x"}), True, "/bin/nvcc")
    s, _ = parse_settings({"arch": ""}, s)
    assert s.arch is None


@pytest.mark.parametrize("raw", [[1], {"arch": 3}, {"plugins": {"disabled": "x"}},
                                 {"plugins": []}, {"simulateOnSave": 1}, {"nope": 1},
                                 {"plugins": {"enabled": []}}])
def test_invalid_settings_are_reported_and_keep_the_old_value(raw: object) -> None:
    base = Settings(arch="sm_90a")
    s, errors = parse_settings(raw, base)
    assert errors and s == base


# --- the pass guard ----------------------------------------------------------------------------
def _crash(program: object, source: object) -> list:
    raise ValueError("nope")


def _spin(program: object, source: object) -> list:
    while True:
        pass


def _fine(program: object, source: object) -> list:
    return [codes.UNUSED_VALUE.at(source.span(0, 0), "fine")]  # type: ignore[attr-defined]


def _sleep(program: object, source: object) -> list:
    time.sleep(1.0)
    return []


def test_the_guard_disables_failing_passes_once_and_keeps_the_rest() -> None:
    disabled: list[str] = []
    guard = PassGuard([NamedPass("t:crash", "t", _crash),
                       NamedPass("t:spin", "t", _spin, time_limit=0.2),
                       NamedPass("t:sleep", "t", _sleep, time_limit=0.02),
                       NamedPass("t:fine", "t", _fine, frozenset({"CK114"}))],
                      on_disable=lambda name, why: disabled.append(name))
    src = SourceFile("x = 1\n")
    for _ in range(2):
        found = [d for p in guard.active(frozenset()) for d in p(None, src)]  # type: ignore[arg-type]
        assert sorted(d.code for d in found) == ["CK114", "CK902", "CK902", "CK902"]
    assert disabled == ["t:crash", "t:spin", "t:sleep"]
    assert "ran longer than 0.2 s" in guard.failures["t:spin"]
    assert "raised ValueError: nope" in guard.failures["t:crash"]
    assert len(guard.active(frozenset({"CK114"}))) == 3
    assert guard.active(frozenset({"t"})) == []


def test_builtin_rules_have_no_time_limit_but_plugin_rules_do() -> None:
    from cake_core.plugins import load_config, load_plugins

    guard = PassGuard.from_plugins(load_plugins(load_config()), {})
    limits = {p.name: p.time_limit for p in guard.passes}
    assert all(math.isinf(v) for k, v in limits.items() if k.startswith("cake:"))
    assert all(v <= 1.0 for k, v in limits.items() if not k.startswith("cake:"))


# --- editor queries (cake_core.ide) -------------------------------------------------------------
def test_index_resolves_roles_and_rebound_names() -> None:
    r = check_text(GEMM)
    idx = build_index(r.parse.module, r.program)
    roles = idx.roles("gemm")
    assert [s.name for s in roles] == ["load", "mma"]
    assert len(idx.references(roles[0])) == 2
    stages = [s for s in idx.symbols if s.name == "s"]
    assert len(stages) == 2 and all(s.kind is SymbolKind.STAGE for s in stages)
    use = GEMM.index("sa[s], A") + 3
    occ = idx.occurrence_at(r.source.offset_of_char(use))
    assert occ is not None and occ.symbol is stages[0]
    offset = r.source.offset_of_char(GEMM.index("ab.commit"))
    assert isinstance(receiver_type("ab.", idx, offset), PipelineType)


@pytest.mark.parametrize(("text", "name", "receiver", "arg", "keyword"), [
    ("tma_load(sa[s], ", "tma_load", None, 1, None),
    ("tma_load(sa[s], A.tile((BM, BK), ", "tile", "A", 1, None),
    ("x = smem(bf16, (4, 8), layout=", "smem", None, 2, "layout"),
    ("ab.wait(", "wait", "ab", 0, None),
    ("f(')', ", "f", None, 1, None),
    ("f(a)  # (", None, None, 0, None),
])
def test_call_at_cursor(text: str, name: str | None, receiver: str | None, arg: int,
                        keyword: str | None) -> None:
    call = call_at_cursor(text, len(text))
    if name is None:
        assert call is None
        return
    assert call is not None
    assert (call.name, call.receiver, call.arg_index, call.keyword) == (name, receiver, arg,
                                                                       keyword)


def test_the_docs_base_is_the_shipped_rule_pages() -> None:
    """A checkout links its docs/rules/ pages; a wheel its packaged copy (cake_core.shipped)."""
    base = docs_base_uri()
    assert base is not None and base.endswith("/")
    href = docs_url("CK101", base)
    assert href is not None
    page = Path(unquote(urlparse(href).path))
    assert page.is_file() and page.name == "CK101.md"
    assert page.parent == RULES_DIR
