"""Kendall's tau-b."""

from __future__ import annotations

import math

import pytest

from cake_core.cost.rank import kendall_tau


def test_perfect_and_reversed_orders() -> None:
    xs = [1.0, 2.0, 3.0, 4.0, 5.0]
    assert kendall_tau(xs, [10.0, 20.0, 30.0, 40.0, 50.0]) == pytest.approx(1.0)
    assert kendall_tau(xs, [5.0, 4.0, 3.0, 2.0, 1.0]) == pytest.approx(-1.0)


def test_ties_use_tau_b() -> None:
    # the tau-b reference value for this pair with ties on both sides (scipy documents it)
    x = [12, 2, 1, 12, 2]
    y = [1, 4, 7, 1, 0]
    assert kendall_tau(x, y) == pytest.approx(-0.47140452079103173)


def test_one_swap() -> None:
    # 6 pairs, one discordant: (5 - 1) / 6
    assert kendall_tau([1, 2, 3, 4], [1, 3, 2, 4]) == pytest.approx(4 / 6)


def test_constant_side_has_no_order() -> None:
    assert math.isnan(kendall_tau([1, 1, 1], [1, 2, 3]))
    assert math.isnan(kendall_tau([1], [2]))
    with pytest.raises(ValueError):
        kendall_tau([1, 2], [1])
