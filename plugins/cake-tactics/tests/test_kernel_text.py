"""`operand`: the one place the tactics decide whether generated index text needs
parentheses before an operator is put next to it."""

from __future__ import annotations

import pytest
from cake_tactics.kernel_text import operand


@pytest.mark.parametrize("text", ["BM", "block.x", "2", "cdiv(N, BN)", "tiles[0]",
                                  "(a + b)", "min(a, b + c)"])
def test_atoms_are_left_alone(text: str) -> None:
    assert operand(text) == text


@pytest.mark.parametrize("text", ["a + b", "cdiv(a, b) * cdiv(c, d)", "t // n", "-k",
                                  "(a) + (b)", "f(a) * g(b)", "a if c else b"])
def test_anything_an_operator_could_split_is_parenthesised(text: str) -> None:
    assert operand(text) == f"({text})"


def test_the_parenthesised_text_means_the_same_under_an_operator() -> None:
    # `t // cdiv(a, b) * cdiv(c, d)` is `(t // cdiv(a, b)) * cdiv(c, d)` in Python
    env = {"cdiv": lambda a, b: -(-a // b), "a": 70, "b": 8, "c": 50, "d": 16, "t": 100}
    text = "cdiv(a, b) * cdiv(c, d)"
    assert eval(f"t // {operand(text)}", env) == 100 // (9 * 4)
    assert eval(f"t // {text}", env) != 100 // (9 * 4)
