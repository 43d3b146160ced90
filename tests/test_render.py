"""The text, JSON and SARIF renderers of diagnostics."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cake_core import __version__
from cake_core.diagnostics.codes import (
    NO_KERNEL,
    SYNTAX_ERROR,
    TYPE_MISMATCH,
    UNKNOWN_NAME,
    UNUSED_VALUE,
)
from cake_core.diagnostics.json_format import (
    DiagnosticsFormatError,
    from_json_obj,
    render_json,
    to_json_obj,
)
from cake_core.diagnostics.model import (
    Applicability,
    Diagnostic,
    Fix,
    Related,
    Severity,
    TextEdit,
)
from cake_core.diagnostics.sarif import HELP_BASE_URI, render_sarif, to_sarif
from cake_core.diagnostics.text import render_summary, render_text
from cake_core.source import SourceFile, Span

REPO = Path(__file__).resolve().parent.parent
SARIF_SCHEMA = REPO / "tests" / "data" / "sarif-2.1.0-rtm.5.json"
JSON_SCHEMA = REPO / "docs" / "diagnostics.schema.json"
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def find(src: SourceFile, needle: str, nth: int = 0) -> Span:
    """The span of the `nth` occurrence of `needle` in `src`."""
    data = needle.encode()
    start = -1
    for _ in range(nth + 1):
        start = src.data.index(data, start + 1)
    return src.span(start, start + len(data))


def at_end(src: SourceFile) -> Span:
    return src.span(len(src.data), len(src.data))


def caret_rows(text: str) -> list[str]:
    return [row for row in text.splitlines() if re.match(r" +\| +[\^-]", row)]


# --- fixtures ---------------------------------------------------------------------------------
GEMM = "@kernel\ndef gemm(a, b):\n    x = load(1)\n    return x\n"
OTHER = "N = 4\nM = 8\n"


@pytest.fixture
def gemm() -> SourceFile:
    return SourceFile(GEMM, "k/gemm.cake")


@pytest.fixture
def other() -> SourceFile:
    return SourceFile(OTHER, "k/consts.cake")


def rich_diags(gemm: SourceFile, other: SourceFile) -> list[Diagnostic]:
    """A set of diagnostics using every field of the model."""
    return [
        TYPE_MISMATCH.at(
            find(gemm, "load(1)"),
            "expected a tile, found a scalar",
            related=[
                Related(find(gemm, "a"), "the tensor parameter"),
                Related(find(other, "N = 4"), "defined here", other.path),
            ],
            notes=["load() reads a global tensor"],
            fixes=[
                Fix("Load from `a`", (TextEdit(find(gemm, "1"), "a"),)),
                Fix(
                    "Delete the load",
                    (TextEdit(find(gemm, "load(1)"), "0"),),
                    Applicability.UNSAFE,
                ),
            ],
            data={"expected": "tile", "shape": (64, 64), "bytes": 8192},
        ).with_path(gemm.path),
        UNUSED_VALUE.at(
            find(gemm, "x", 1),
            "`x` is never used",
            fixes=[Fix("Remove it", (TextEdit(find(gemm, "x", 1), ""),),
                       Applicability.DISPLAY_ONLY)],
        ).with_path(gemm.path),
        NO_KERNEL.at(other.span(0, 0), "no @kernel function").with_path(other.path),
        SYNTAX_ERROR.at(at_end(gemm), "unexpected end of file", severity=Severity.HINT)
        .with_path(gemm.path),
    ]


# --- text: exact output ---------------------------------------------------------------------------
def test_text_exact_simple(gemm: SourceFile) -> None:
    d = TYPE_MISMATCH.at(
        find(gemm, "load(1)"),
        "expected a tile, found a scalar",
        notes=["load() reads a global tensor"],
        fixes=[Fix("Load from `a`", (TextEdit(find(gemm, "1"), "a"),))],
    ).with_path(gemm.path)
    assert render_text([d], {gemm.path: gemm}) == (
        "error[CK104]: expected a tile, found a scalar\n"
        " --> k/gemm.cake:3:9\n"
        "  |\n"
        "3 |     x = load(1)\n"
        "  |         ^^^^^^^\n"
        "  |\n"
        "  = note: load() reads a global tensor\n"
        "  = help: Load from `a`: replace `1` with `a`\n"
    )


def test_text_exact_related_in_same_and_other_file(gemm: SourceFile, other: SourceFile) -> None:
    d = rich_diags(gemm, other)[0]
    assert render_text([d], {gemm.path: gemm, other.path: other}) == (
        "error[CK104]: expected a tile, found a scalar\n"
        " --> k/gemm.cake:3:9\n"
        "  |\n"
        "2 | def gemm(a, b):\n"
        "  |          - the tensor parameter\n"
        "3 |     x = load(1)\n"
        "  |         ^^^^^^^\n"
        "  |\n"
        " --> k/consts.cake:1:1\n"
        "  |\n"
        "1 | N = 4\n"
        "  | ----- defined here\n"
        "  |\n"
        "  = note: load() reads a global tensor\n"
        "  = help: Load from `a`: replace `1` with `a`\n"
        "  = help: Delete the load: replace `load(1)` with `0` (unsafe fix)\n"
    )


def test_text_exact_multiline_spans() -> None:
    lines = [f"    s{i} = {i}" for i in range(1, 10)]
    src = SourceFile("def k():\n" + "\n".join(lines) + "\n", "m.cake")
    three = SYNTAX_ERROR.at(src.span(find(src, "s1").start.offset, find(src, "= 3").end.offset),
                            "three lines").with_path(src.path)
    # Ends at the start of the next line's indentation: marks up to the end of s6's line.
    many = SYNTAX_ERROR.at(src.span(find(src, "= 2").start.offset, find(src, "s7").start.offset),
                           "many lines").with_path(src.path)
    assert render_text([three, many], {src.path: src}) == (
        "error[CK001]: three lines\n"
        " --> m.cake:2:5\n"
        "  |\n"
        "2 |     s1 = 1\n"
        "  |     ^^^^^^\n"
        "3 |     s2 = 2\n"
        "  |     ^^^^^^\n"
        "4 |     s3 = 3\n"
        "  |     ^^^^^^\n"
        "\n"
        "error[CK001]: many lines\n"
        " --> m.cake:3:8\n"
        "  |\n"
        "3 |     s2 = 2\n"
        "  |        ^^^\n"
        "...\n"
        "7 |     s6 = 6\n"
        "  |     ^^^^^^\n"
    )


def test_gutter_widens_for_two_digit_lines() -> None:
    src = SourceFile("\n" * 11 + "x = y\n", "w.cake")
    out = render_text([UNKNOWN_NAME.at(find(src, "y"), "unknown").with_path("w.cake")],
                      {"w.cake": src})
    assert out.splitlines()[1:5] == ["  --> w.cake:12:5", "   |", "12 | x = y", "   |     ^"]


def test_separate_lines_keep_one_context_line_between() -> None:
    src = SourceFile("a = 1\nb = 2\nc = a\n", "c.cake")
    d = UNKNOWN_NAME.at(find(src, "a", 1), "bad",
                        related=[Related(find(src, "a"), "here")]).with_path("c.cake")
    out = render_text([d], {"c.cake": src})
    assert "2 | b = 2\n" in out
    assert "..." not in out


# --- text: columns, carets, characters ---------------------------------------------------------
@pytest.mark.parametrize(
    ("line", "cells"),
    [
        ("x = é + bad", 8),  # é: two bytes, one character, one cell
        ("x = 😀 + bad", 9),  # emoji: four bytes, one character, two cells
        ("x = 漢字 + bad", 11),  # CJK: wide, two cells each
        ("x = e\u0301 + bad", 8),  # combining accent takes no cell
    ],
)
def test_carets_count_cells_not_bytes(line: str, cells: int) -> None:
    src = SourceFile(line + "\n", "u.cake")
    d = UNKNOWN_NAME.at(find(src, "bad"), "unknown name `bad`").with_path("u.cake")
    out = render_text([d], {"u.cake": src})
    assert caret_rows(out) == ["  | " + " " * cells + "^^^"]
    chars_before = line.index("bad")
    assert f" --> u.cake:1:{chars_before + 1}\n" in out


def test_tabs_expand_to_stops_and_carets_follow() -> None:
    src = SourceFile("def k():\n\tx\t= bad\n", "t.cake")
    d = UNKNOWN_NAME.at(find(src, "bad"), "unknown").with_path("t.cake")
    out = render_text([d], {"t.cake": src})
    assert "2 |     x   = bad\n" in out
    assert caret_rows(out) == ["  | " + " " * 10 + "^^^"]
    assert " --> t.cake:2:6\n" in out  # characters, a tab counting one


def test_crlf_lines_render_without_carriage_returns() -> None:
    src = SourceFile("def k():\r\n    y = bad\r\n", "c.cake")
    d = UNKNOWN_NAME.at(find(src, "bad"), "unknown").with_path("c.cake")
    out = render_text([d], {"c.cake": src})
    assert "\r" not in out
    assert "2 |     y = bad\n" in out
    assert caret_rows(out) == ["  |         ^^^"]


def test_empty_span_at_end_of_file_with_trailing_newline() -> None:
    src = SourceFile("def k():\n    pass\n", "e.cake")
    out = render_text([SYNTAX_ERROR.at(at_end(src), "eof").with_path("e.cake")], {"e.cake": src})
    assert out == "error[CK001]: eof\n --> e.cake:3:1\n  |\n3 |\n  | ^\n"


def test_span_on_last_line_without_trailing_newline() -> None:
    src = SourceFile("def k():\n    return bad", "n.cake")
    d = UNKNOWN_NAME.at(find(src, "bad"), "unknown").with_path("n.cake")
    end = SYNTAX_ERROR.at(at_end(src), "eof").with_path("n.cake")
    out = render_text([d, end], {"n.cake": src})
    assert caret_rows(out) == ["  |            ^^^", "  |               ^"]
    assert " --> n.cake:2:12\n" in out
    assert " --> n.cake:2:15\n" in out


def test_control_and_bidi_characters_are_made_visible() -> None:
    src = SourceFile("x = \x1b[31m + \u202ebad\n", "b.cake")
    d = UNKNOWN_NAME.at(find(src, "bad"), "unknown \x1b[2J").with_path("b.cake")
    out = render_text([d], {"b.cake": src})
    assert "\x1b" not in out
    assert "\u202e" not in out
    assert "<U+202E>" in out
    row = next(r for r in out.splitlines() if r.startswith("1 |"))
    carets = caret_rows(out)[0]
    assert carets.index("^") == row.index("bad")


def test_missing_source_still_renders(gemm: SourceFile, other: SourceFile) -> None:
    d = rich_diags(gemm, other)[0]
    assert render_text([d], {}) == (
        "error[CK104]: expected a tile, found a scalar\n"
        " --> k/gemm.cake:3:9\n"
        "  |\n"
        " --> k/gemm.cake:2:10\n"
        "  | - the tensor parameter\n"
        "  |\n"
        " --> k/consts.cake:1:1\n"
        "  | - defined here\n"
        "  |\n"
        "  = note: load() reads a global tensor\n"
        "  = help: Load from `a`: replace with `a`\n"
        "  = help: Delete the load: replace with `0` (unsafe fix)\n"
    )


def test_span_beyond_a_stale_source_renders_without_snippet(gemm: SourceFile) -> None:
    longer = SourceFile(GEMM + "\n" * 20 + "    bad_name\n", gemm.path)
    d = UNKNOWN_NAME.at(find(longer, "bad_name"), "unknown").with_path(gemm.path)
    assert render_text([d], {gemm.path: gemm}) == "error[CK101]: unknown\n --> k/gemm.cake:25:5\n"


def test_colour_only_when_asked(gemm: SourceFile, other: SourceFile) -> None:
    diags = rich_diags(gemm, other)
    sources = {gemm.path: gemm, other.path: other}
    plain = render_text(diags, sources)
    coloured = render_text(diags, sources, color=True)
    assert "\x1b" not in plain
    assert "\x1b[1;31merror[CK104]" in coloured
    assert ANSI.sub("", coloured) == plain
    assert "\x1b" not in render_summary(diags)
    assert ANSI.sub("", render_summary(diags, color=True)) == render_summary(diags)
    assert "\x1b[" in render_summary(diags, color=True)


def test_fix_hints_show_short_single_edits_only(gemm: SourceFile) -> None:
    span = find(gemm, "x", 1)
    long_text = "y" * 60
    fixes = [
        Fix("Insert", (TextEdit(Span(span.start, span.start), "_"),)),
        Fix("Remove", (TextEdit(span, ""),)),
        Fix("Long", (TextEdit(span, long_text),)),
        Fix("Two", (TextEdit(span, "a"), TextEdit(find(gemm, "1"), "b"))),
        Fix("Multi-line", (TextEdit(span, "a\nb"),)),
    ]
    d = UNUSED_VALUE.at(span, "unused", fixes=fixes).with_path(gemm.path)
    helps = [r for r in render_text([d], {gemm.path: gemm}).splitlines() if "= help" in r]
    assert helps == [
        "  = help: Insert: insert `_`",
        "  = help: Remove: remove `x`",
        "  = help: Long",
        "  = help: Two",
        "  = help: Multi-line",
    ]


def test_several_diagnostics_are_separated_by_blank_lines(gemm: SourceFile) -> None:
    a = UNKNOWN_NAME.at(find(gemm, "a"), "one").with_path(gemm.path)
    b = UNKNOWN_NAME.at(find(gemm, "b"), "two").with_path(gemm.path)
    out = render_text([a, b], {gemm.path: gemm})
    assert out == render_text([a], {gemm.path: gemm}) + "\n" + render_text([b], {gemm.path: gemm})
    assert render_text([], {}) == ""


def test_summary_line() -> None:
    src = SourceFile("x\n")
    span = src.span(0, 1)
    diags = [
        TYPE_MISMATCH.at(span, "e1").with_path("a.cake"),
        TYPE_MISMATCH.at(span, "e2").with_path("b.cake"),
        NO_KERNEL.at(span, "w").with_path("c.cake"),
    ]
    assert render_summary(diags) == "error: 2 errors, 1 warning in 3 files"
    assert render_summary(diags[2:]) == "warning: 1 warning in 1 file"
    hint = NO_KERNEL.at(span, "h", severity=Severity.HINT)
    info = NO_KERNEL.at(span, "i", severity=Severity.INFO)
    assert render_summary([hint, info, info]) == "info: 2 info, 1 hint in 1 file"
    assert render_summary([]) == "no problems found"


def test_text_renderer_does_not_import_rich() -> None:
    code = (
        "import sys, cake_core.diagnostics.text, cake_core.diagnostics.json_format, "
        "cake_core.diagnostics.sarif; print(any(m.startswith('rich') for m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=REPO, check=True)
    assert out.stdout.strip() == "False"


# --- the examples in docs/diagnostics.md ------------------------------------------------------
def _docs_blocks(lang: str) -> list[str]:
    text = (REPO / "docs" / "diagnostics.md").read_text()
    return re.findall(rf"```{lang}\n(.*?)```", text, flags=re.S)


def _docs_example() -> tuple[Diagnostic, SourceFile]:
    src = SourceFile(
        "@kernel\ndef gemm(a: Tensor, b: Tensor):\n    x = load(1)\n    return x\n",
        "kernels/gemm.cake",
    )
    d = TYPE_MISMATCH.at(
        find(src, "load(1)"),
        "expected a tile, found a scalar",
        related=[Related(find(src, "a"), "the tensor to load from")],
        notes=["load() reads a tile of a global tensor"],
        fixes=[Fix("Load from `a`", (TextEdit(find(src, "1"), "a"),))],
        data={"expected": "tile", "found": "int"},
    ).with_path(src.path)
    return d, src


def test_docs_text_example_is_current() -> None:
    d, src = _docs_example()
    (block,) = [b for b in _docs_blocks("") if b.startswith("error[")]
    assert block == render_text([d], {src.path: src}) + render_summary([d]) + "\n"


def test_docs_json_example_is_current() -> None:
    d, src = _docs_example()
    (block,) = _docs_blocks("json")
    documented = json.loads(block)
    documented["tool"]["version"] = __version__
    assert documented == to_json_obj([d], {src.path: src})


# --- JSON -------------------------------------------------------------------------------------
def test_json_round_trip(gemm: SourceFile, other: SourceFile) -> None:
    diags = rich_diags(gemm, other)
    obj = to_json_obj(diags, {gemm.path: gemm})
    back = from_json_obj(json.loads(json.dumps(obj)))
    assert back == diags
    assert [d.data for d in back] == [
        {"expected": "tile", "shape": [64, 64], "bytes": 8192}, {}, {}, {}
    ]
    assert from_json_obj(json.loads(render_json(diags))) == diags


def test_json_validates_against_schema(gemm: SourceFile, other: SourceFile) -> None:
    schema = json.loads(JSON_SCHEMA.read_text())
    validator_cls = jsonschema.validators.validator_for(schema)
    validator_cls.check_schema(schema)
    validator = validator_cls(schema)
    diags = rich_diags(gemm, other)
    for sources in (None, {gemm.path: gemm, other.path: other}):
        validator.validate(json.loads(render_json(diags, sources)))
    validator.validate(to_json_obj([]))


def test_json_fields(gemm: SourceFile, other: SourceFile) -> None:
    obj = to_json_obj(rich_diags(gemm, other), {gemm.path: gemm})
    assert obj["version"] == 1
    assert obj["tool"] == {"name": "cake", "version": __version__}
    assert obj["summary"] == {"total": 4, "error": 1, "warning": 2, "info": 0, "hint": 1,
                              "files": 2, "fixable": 1}
    first = obj["diagnostics"][0]
    assert first["code"] == "CK104"
    assert first["name"] == "type-mismatch"
    assert first["docs"] == "docs/rules/CK104.md"
    assert first["source"] == "cake"
    assert first["snippet"] == "load(1)"
    assert first["range"]["start"] == {"line": 3, "column": 9, "byte_column": 9,
                                       "offset": GEMM.index("load")}
    assert first["related"][0]["path"] is None
    assert first["related"][1]["path"] == "k/consts.cake"
    assert first["fixes"][1]["applicability"] == "unsafe"
    assert first["fixes"][0]["edits"][0]["new_text"] == "a"


def test_json_columns_in_utf16_and_bytes() -> None:
    src = SourceFile("x = 😀é + bad\n", "u.cake")
    d = UNKNOWN_NAME.at(find(src, "bad"), "unknown").with_path("u.cake")
    start = to_json_obj([d])["diagnostics"][0]["range"]["start"]
    # "x = " is 4 units/bytes, the emoji 2 units/4 bytes, é 1 unit/2 bytes, " + " 3.
    assert start == {"line": 1, "column": 11, "byte_column": 14, "offset": 13}


def test_json_of_unknown_code_has_no_name_or_docs() -> None:
    src = SourceFile("x\n")
    d = Diagnostic("ZZ999", Severity.WARNING, "plugin says", src.span(0, 1), source="zz")
    first = to_json_obj([d])["diagnostics"][0]
    assert first["name"] is None
    assert first["docs"] is None
    assert from_json_obj(to_json_obj([d])) == [d]


@pytest.mark.parametrize(
    "obj",
    [
        {"version": 2, "diagnostics": []},
        {"diagnostics": []},
        {"version": 1},
        {"version": 1, "diagnostics": [{"code": "CK001"}]},
        {"version": 1, "diagnostics": [{"code": "CK001", "severity": "fatal"}]},
        [],
    ],
)
def test_json_reader_rejects_bad_input(obj: object) -> None:
    with pytest.raises(DiagnosticsFormatError):
        from_json_obj(obj)  # type: ignore[arg-type]


# --- SARIF ------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def sarif_validator() -> jsonschema.protocols.Validator:
    schema = json.loads(SARIF_SCHEMA.read_text())
    assert schema["$schema"] == "http://json-schema.org/draft-04/schema#"
    validator_cls = jsonschema.validators.validator_for(schema)
    assert validator_cls is jsonschema.Draft4Validator
    return validator_cls(schema)


def test_sarif_validates_against_official_schema(
    sarif_validator: jsonschema.protocols.Validator,
    gemm: SourceFile,
    other: SourceFile,
    tmp_path: Path,
) -> None:
    diags = [d.with_path(str(tmp_path / d.path)) for d in rich_diags(gemm, other)]
    sources = {str(tmp_path / s.path): s for s in (gemm, other)}
    for root in (tmp_path, None):
        sarif_validator.validate(json.loads(render_sarif(diags, sources, repo_root=root)))
    sarif_validator.validate(to_sarif([], {}, repo_root=None))


def test_sarif_run_rules_and_results(gemm: SourceFile, other: SourceFile) -> None:
    diags = rich_diags(gemm, other)
    log = to_sarif(diags, {gemm.path: gemm, other.path: other})
    assert log["version"] == "2.1.0"
    (run,) = log["runs"]
    assert run["columnKind"] == "utf16CodeUnits"
    driver = run["tool"]["driver"]
    assert driver["name"] == "cake"
    assert driver["version"] == __version__
    assert driver["informationUri"].startswith("https://")
    assert [r["id"] for r in driver["rules"]] == ["CK001", "CK004", "CK104", "CK114"]
    rule = driver["rules"][2]
    assert rule["name"] == "type-mismatch"
    assert rule["helpUri"] == HELP_BASE_URI + "docs/rules/CK104.md"
    assert rule["defaultConfiguration"] == {"level": "error"}
    assert rule["shortDescription"]["text"] == TYPE_MISMATCH.summary
    # No page reader given: the summary stands in for the page.
    assert rule["fullDescription"] == {"text": TYPE_MISMATCH.summary}
    assert rule["help"] == {"text": TYPE_MISMATCH.summary}
    for result in run["results"]:
        assert driver["rules"][result["ruleIndex"]]["id"] == result["ruleId"]
    assert [r["level"] for r in run["results"]] == ["error", "warning", "warning", "note"]
    first = run["results"][0]
    assert first["message"]["text"] == "expected a tile, found a scalar"
    assert first["locations"][0]["physicalLocation"]["region"] == {
        "startLine": 3, "startColumn": 9, "endLine": 3, "endColumn": 16
    }
    related = first["relatedLocations"]
    assert related[0]["physicalLocation"]["artifactLocation"]["uri"] == "k/gemm.cake"
    assert related[1]["physicalLocation"]["artifactLocation"]["uri"] == "k/consts.cake"
    assert related[1]["message"]["text"] == "defined here"
    fix = first["fixes"][0]
    assert fix["description"]["text"] == "Load from `a`"
    (change,) = fix["artifactChanges"]
    assert change["replacements"] == [{
        "deletedRegion": {"startLine": 3, "startColumn": 14, "endLine": 3, "endColumn": 15},
        "insertedContent": {"text": "a"},
    }]
    removal = run["results"][1]["fixes"][0]["artifactChanges"][0]["replacements"][0]
    assert "insertedContent" not in removal
    assert first["properties"]["notes"] == ["load() reads a global tensor"]
    assert "originalUriBaseIds" not in run


def test_sarif_help_uri_with_base(gemm: SourceFile) -> None:
    d = UNKNOWN_NAME.at(find(gemm, "a"), "x").with_path(gemm.path)
    for base in ("https://example.org/cake/blob/main/", "https://example.org/cake/blob/main"):
        log = to_sarif([d], {}, help_base_uri=base)
        rule = log["runs"][0]["tool"]["driver"]["rules"][0]
        assert rule["helpUri"] == "https://example.org/cake/blob/main/docs/rules/CK101.md"


def test_sarif_uris_are_repo_relative(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    src = SourceFile("x = bad\n", "k/a b.cake")
    span = find(src, "bad")
    inside_abs = UNKNOWN_NAME.at(span, "u").with_path(str(tmp_path / "k" / "a b.cake"))
    inside_rel = UNKNOWN_NAME.at(span, "u").with_path("k/a b.cake")
    outside = UNKNOWN_NAME.at(span, "u").with_path(str(tmp_path.parent / "elsewhere.cake"))
    outside_rel = UNKNOWN_NAME.at(span, "u").with_path("../elsewhere.cake")
    stdin = UNKNOWN_NAME.at(span, "u")
    monkeypatch.chdir(tmp_path)
    diags = [inside_abs, inside_rel, outside, outside_rel, stdin]
    run = to_sarif(diags, {}, repo_root=tmp_path)["runs"][0]
    locs = [r["locations"][0]["physicalLocation"]["artifactLocation"] for r in run["results"]]
    assert locs[0] == {"uri": "k/a%20b.cake", "uriBaseId": "%SRCROOT%"}
    assert locs[1] == {"uri": "k/a%20b.cake", "uriBaseId": "%SRCROOT%"}
    elsewhere = (tmp_path.parent / "elsewhere.cake").resolve().as_uri()
    assert locs[2] == locs[3] == {"uri": elsewhere}  # absolute: no base can name it
    assert locs[4] == {"uri": "%3Cinput%3E"}
    base = run["originalUriBaseIds"]["%SRCROOT%"]["uri"]
    assert base == tmp_path.as_uri() + "/"


def test_sarif_columns_are_utf16_units() -> None:
    src = SourceFile("x = 😀 + bad\n", "u.cake")
    d = UNKNOWN_NAME.at(find(src, "bad"), "unknown").with_path("u.cake")
    region = to_sarif([d], {"u.cake": src})["runs"][0]["results"][0]["locations"][0][
        "physicalLocation"]["region"]
    # "x = " 4 units, the emoji 2 (a surrogate pair), " + " 3: "bad" starts at unit 9.
    assert region == {"startLine": 1, "startColumn": 10, "endLine": 1, "endColumn": 13}


def _fingerprint(text: str, needle: str, nth: int = 0) -> str:
    src = SourceFile(text, "f.cake")
    d = UNKNOWN_NAME.at(find(src, needle, nth), "unknown").with_path("f.cake")
    result = to_sarif([d], {"f.cake": src})["runs"][0]["results"][0]
    return result["partialFingerprints"]["primaryLocationLineHash"]


def test_sarif_fingerprint_survives_lines_inserted_above() -> None:
    body = "def k():\n    x = bad + 1\n"
    before = _fingerprint(body, "bad")
    assert re.fullmatch(r"[0-9a-f]{16}:1", before)
    assert _fingerprint("# a comment\n\n# more\n" + body, "bad") == before
    assert _fingerprint(body.replace("    x =", "\tx  ="), "bad") == before  # re-indented
    assert _fingerprint(body.replace("+ 1", "+ 2"), "bad") != before


def test_sarif_fingerprint_counts_identical_lines() -> None:
    src = SourceFile("y = bad\ny = bad\nz = bad\n", "f.cake")
    diags = [UNKNOWN_NAME.at(find(src, "bad", i), "u").with_path("f.cake") for i in (2, 1, 0)]
    results = to_sarif(diags, {"f.cake": src})["runs"][0]["results"]
    hashes = [r["partialFingerprints"]["primaryLocationLineHash"] for r in results]
    z, second, first = hashes
    assert first.endswith(":1")
    assert second == first[:-2] + ":2"
    assert z.endswith(":1")
    assert z != first


def test_sarif_without_sources_still_fingerprints() -> None:
    src = SourceFile("x = bad\n")
    d = UNKNOWN_NAME.at(find(src, "bad"), "unknown `bad`")
    moved = SourceFile("\n\nx = bad\n")
    d2 = UNKNOWN_NAME.at(find(moved, "bad"), "unknown `bad`")
    fp = [to_sarif([x], {})["runs"][0]["results"][0]["partialFingerprints"] for x in (d, d2)]
    assert fp[0] == fp[1]


# --- any text, any range ------------------------------------------------------------------------
@settings(max_examples=150, deadline=None)
@given(
    text=st.text(alphabet=st.sampled_from("ab \t\r\n\x1bé😀漢\u0301\u202e"), max_size=40),
    a=st.integers(0, 200),
    b=st.integers(0, 200),
)
def test_any_range_renders_and_round_trips(text: str, a: int, b: int) -> None:
    src = SourceFile(text, "p.cake")
    starts = [src.offset_of_char(i) for i in range(len(src.text) + 1)]
    lo, hi = sorted((starts[a % len(starts)], starts[b % len(starts)]))
    span = src.span(lo, hi)
    d = SYNTAX_ERROR.at(span, "bad", related=[Related(src.span(hi, hi), "here")],
                        fixes=[Fix("f", (TextEdit(span, "x"),))]).with_path("p.cake")
    out = render_text([d], {"p.cake": src}, color=True)
    assert ANSI.sub("", out) == render_text([d], {"p.cake": src})
    assert "\x1b" not in ANSI.sub("", out)
    assert "\r" not in out
    assert from_json_obj(json.loads(render_json([d], {"p.cake": src}))) == [d]
    region = to_sarif([d], {"p.cake": src})["runs"][0]["results"][0]["locations"][0][
        "physicalLocation"]["region"]
    assert (region["startLine"], region["startColumn"]) <= (region["endLine"], region["endColumn"])
