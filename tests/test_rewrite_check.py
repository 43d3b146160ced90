"""`rewrite.check_edited` (incremental re-parse from the parent's parse) gives exactly the
check of the edited text made from scratch, for the edits tactics and agents make."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from cake_core.check import check_source
from cake_core.diagnostics.model import TextEdit, apply_edits
from cake_core.rewrite import check_edited, verified
from cake_core.source import SourceFile

EXAMPLES = sorted((Path(__file__).resolve().parents[1] / "examples").glob("*.cake"))
PIECES = ["", "1", "128", "x", "(", ":", "\n", "    pass\n", "swizzle(64)", "stages=2"]


def random_edits(source: SourceFile, rng: random.Random) -> tuple[TextEdit, ...]:
    """One to three non-overlapping edits at random places (some break the syntax)."""
    size = len(source.data)
    cuts = sorted(rng.sample(range(size), 2 * rng.randint(1, 3)))
    edits = []
    for start, end in zip(cuts[::2], cuts[1::2], strict=True):
        end = min(end, start + rng.randint(0, 4))
        while start > 0 and 0x80 <= source.data[start] < 0xC0:
            start -= 1
        while end < size and 0x80 <= source.data[end] < 0xC0:
            end += 1
        edits.append(TextEdit(source.span(start, end), rng.choice(PIECES)))
    return tuple(edits)


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_an_edited_check_equals_a_cold_check(path: Path) -> None:
    source = SourceFile(path.read_text(encoding="utf-8"), path.name)
    rng = random.Random(path.stem)
    for _ in range(12):
        edits = random_edits(source, rng)
        got = check_edited(source, edits)
        text = apply_edits(source.text, edits)
        cold = check_source(SourceFile(text, path.name))
        assert got.source.text == text
        assert got.diagnostics == cold.diagnostics
        if not cold.errors:
            assert verified(source, edits) == text


def test_a_constant_edit_reuses_the_parents_parse() -> None:
    path = EXAMPLES[0]
    source = SourceFile(path.read_text(encoding="utf-8"), path.name)
    first = check_edited(source, ())
    at = source.text.index("\n\n") + 1  # a blank line after the header comment
    second = check_edited(source, (TextEdit(source.span(at, at), "# note\n"),))
    assert not second.errors
    # the kernels after the edit are the parent's statements, moved, not converted anew
    assert second.parse is not None and second.parse.moved
    assert first.parse is not None and len(second.parse.module.body) == \
        len(first.parse.module.body)
