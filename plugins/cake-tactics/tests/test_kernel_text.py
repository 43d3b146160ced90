"""`operand`: the one place the tactics decide whether generated index text needs
parentheses before an operator is put next to it."""

from __future__ import annotations

import pytest
from cake_tactics.kernel_text import operand

from cake_core.source import SourceFile
from cake_core.syntax import ast
from cake_core.syntax.parser import parse


@pytest.mark.parametrize("text", ["BM", "block.x", "2", "cdiv(N, BN)", "tiles[0]",
                                  "(a + b)", "min(a, b + c)"])
def test_atoms_are_left_alone(text: str) -> None:
    assert operand(text) == text


@pytest.mark.parametrize("text", ["a + b", "cdiv(a, b) * cdiv(c, d)", "t // n", "-k",
                                  "(a) + (b)", "f(a) * g(b)", "a if c else b"])
def test_anything_an_operator_could_split_is_parenthesised(text: str) -> None:
    assert operand(text) == f"({text})"


def _value(expr: str) -> ast.Expr:
    res = parse(SourceFile(f"_ = {expr}\n", "e.cake"))
    stmt = res.module.body[0]
    assert not res.has_errors and isinstance(stmt, ast.Assign)
    return stmt.value


def test_the_parenthesised_text_stays_one_operand() -> None:
    # `t // cdiv(a, b) * cdiv(c, d)` is `(t // cdiv(a, b)) * cdiv(c, d)`
    text = "cdiv(a, b) * cdiv(c, d)"
    kept = _value(f"t // {operand(text)}")
    assert isinstance(kept, ast.BinOp) and kept.op == "//"
    assert isinstance(kept.right, ast.BinOp) and kept.right.op == "*"
    split = _value(f"t // {text}")
    assert isinstance(split, ast.BinOp) and split.op == "*"
