"""`# cake: ignore[...]` comments, applied inside `check_source` (so every front end honours
them): which findings they hide, when they are reported unused (CK006), and that fix."""

from __future__ import annotations

from pathlib import Path

from cake_core.check import check_text
from cake_core.diagnostics.model import apply_edits
from cake_core.diagnostics.selection import Selection

ROOT = Path(__file__).resolve().parent.parent
BUG = (ROOT / "tests/bugs/sync_wgmma_release_before_wait.cake").read_text()
RELEASE = "            ab.release()"  # the CK306 finding starts on this line
assert BUG.count(RELEASE + "\n") == 1


def _with(comment: str, line: str = RELEASE) -> str:
    return BUG.replace(line + "\n", f"{line}  {comment}\n", 1)


def _found(text: str) -> list[tuple[str, str]]:
    return [(d.code, d.message) for d in check_text(text, "k.cake").diagnostics]


def test_the_bug_has_one_finding() -> None:
    assert [c for c, _ in _found(BUG)] == ["CK306"]


def test_a_listed_code_is_hidden() -> None:
    assert _found(_with("# cake: ignore[CK306]")) == []
    assert _found(_with("# cake:ignore[ck306]")) == []


def test_a_bare_directive_hides_any_code() -> None:
    assert _found(_with("# cake: ignore")) == []


def test_another_code_hides_nothing_and_is_unused() -> None:
    found = _found(_with("# cake: ignore[CK302]"))
    assert found == [("CK306", found[0][1]),
                     ("CK006", "unused suppression: `CK302` has no finding on this line")]


def test_the_unused_code_of_a_list_is_reported_and_fixed_away() -> None:
    text = _with("# cake: ignore[CK306, CK302, CK999]")
    (d,) = check_text(text, "k.cake").diagnostics
    assert d.code == "CK006" and d.severity.value == "warning"
    assert d.message == ("unused suppression: `CK302`, `CK999` (unknown code) has no finding "
                         "on this line")
    assert apply_edits(text, d.fixes[0].edits) == _with("# cake: ignore[CK306]")


def test_a_directive_on_another_line_does_not_hide() -> None:
    line = BUG.split("\n")[2]
    found = [c for c, _ in _found(_with("# cake: ignore", line))]
    assert found == ["CK006", "CK306"]


def test_the_removal_fix_restores_the_file() -> None:
    for comment in ("# cake: ignore", "# cake: ignore[CK101]"):
        text = _with(comment, BUG.split("\n")[2])
        (unused,) = [d for d in check_text(text, "k.cake").diagnostics if d.code == "CK006"]
        assert apply_edits(text, unused.fixes[0].edits) == BUG
    own_line = BUG.replace(RELEASE + "\n", "# cake: ignore\n" + RELEASE + "\n", 1)
    (unused,) = [d for d in check_text(own_line, "k.cake").diagnostics if d.code == "CK006"]
    assert apply_edits(own_line, unused.fixes[0].edits) == BUG


def test_a_reason_after_the_directive_stays_a_comment() -> None:
    text = _with("# cake: ignore[CK101] kept for the next refactoring")
    (unused,) = [d for d in check_text(text, "k.cake").diagnostics if d.code == "CK006"]
    fixed = apply_edits(text, unused.fixes[0].edits)
    assert fixed == _with("# kept for the next refactoring")


def test_a_directive_inside_a_string_is_no_comment() -> None:
    text = BUG.replace(RELEASE + "\n", RELEASE + "; x = \"# cake: ignore\"\n", 1)
    assert "CK306" in [c for c, _ in _found(text)]


def test_the_selection_applies_to_unused_suppressions_too() -> None:
    text = _with("# cake: ignore[CK302]")
    found = check_text(text, "k.cake", selection=Selection(ignore=("CK0",))).diagnostics
    assert [d.code for d in found] == ["CK306"]
