"""Random text edits for the tests that hold incremental work to a cold one: an edit is
(kind, where as a fraction of the text, length, piece), drawn by `edits`."""

from __future__ import annotations

from hypothesis import strategies as st

Edit = tuple[str, float, int, str]


def edits(pieces: list[str], max_length: int) -> st.SearchStrategy[Edit]:
    """Insert a piece, delete up to `max_length` characters, or replace them by a piece."""
    return st.tuples(
        st.sampled_from(["insert", "delete", "replace"]),
        st.floats(min_value=0, max_value=1),
        st.integers(min_value=1, max_value=max_length),
        st.sampled_from(pieces),
    )


def edit_range(text: str, edit: Edit) -> tuple[int, int, str]:
    """(start, end, new text): the characters [start, end) of `text` become the new text."""
    kind, where, length, piece = edit
    i = int(where * len(text))
    j = i if kind == "insert" else min(len(text), i + length)
    return i, j, "" if kind == "delete" else piece


def apply_edit(text: str, edit: Edit) -> str:
    i, j, new = edit_range(text, edit)
    return text[:i] + new + text[j:]
