"""Rank agreement between two sets of predictions (Kendall's tau-b).

Used to compare the cost model's ordering of kernel variants with another model's (or with
measurements): what matters for choosing a configuration is the order, not the seconds.
"""

from __future__ import annotations

import math
from collections.abc import Sequence


def kendall_tau(xs: Sequence[float], ys: Sequence[float]) -> float:
    """Kendall's tau-b of paired samples: +1 same order, -1 reversed, ties corrected.

    Returns nan when either side is constant (no order to agree with) or has fewer than
    two samples.  O(n^2), which is nothing for the few hundred variants it sees.
    """
    if len(xs) != len(ys):
        raise ValueError("kendall_tau needs paired samples of equal length")
    n = len(xs)
    concordant = discordant = ties_x = ties_y = 0
    for i in range(n):
        for j in range(i + 1, n):
            dx = (xs[i] > xs[j]) - (xs[i] < xs[j])
            dy = (ys[i] > ys[j]) - (ys[i] < ys[j])
            if dx == 0 and dy == 0:
                continue
            if dx == 0:
                ties_x += 1
            elif dy == 0:
                ties_y += 1
            elif dx == dy:
                concordant += 1
            else:
                discordant += 1
    denom = math.sqrt((concordant + discordant + ties_x) * (concordant + discordant + ties_y))
    return (concordant - discordant) / denom if denom else math.nan
