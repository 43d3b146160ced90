"""SymExpr evaluation with a dims dict."""

from __future__ import annotations

import pytest

from cake_core.cost.evaluate import MissingDimError, dims_needed, evaluate
from cake_core.ir.symbolic import Const, Dim, Var, cdiv, smax, smin

M, K = Dim("M"), Dim("K", multiple_of=64)


def test_constants_dims_and_operators() -> None:
    env = {"M": 1000, "K": 4096}
    assert evaluate(Const(7), env) == 7
    assert evaluate(cdiv(M, Const(128)), env) == 8
    assert evaluate(cdiv(K, Const(64)), env) == 64
    assert evaluate(M * Const(2) + K, env) == 6096
    assert evaluate(M - Const(1000), env) == 0
    assert evaluate(M % Const(7), env) == 1000 % 7
    assert evaluate(smin(M, K), env) == 1000
    assert evaluate(smax(M, K), env) == 4096


def test_missing_dim_names_it() -> None:
    with pytest.raises(MissingDimError) as info:
        evaluate(cdiv(M, Const(64)), {"K": 1})
    assert info.value.name == "M"
    assert "M" in str(info.value)


def test_runtime_index_takes_the_middle_of_its_range() -> None:
    k = Var("k", Const(0), cdiv(K, Const(64)))
    assert evaluate(k, {"K": 4096}) == 31  # the middle of 0..63
    assert evaluate(k, {"K": 4096, "k": 5}) == 5
    with pytest.raises(MissingDimError):
        evaluate(Var("block.x"), {})


def test_division_by_zero_surfaces() -> None:
    with pytest.raises(ZeroDivisionError):
        evaluate(M // K, {"M": 1, "K": 0})


def test_dims_needed() -> None:
    assert dims_needed([cdiv(M, Const(128)), Const(3), K * Const(2)]) == {"M", "K"}
