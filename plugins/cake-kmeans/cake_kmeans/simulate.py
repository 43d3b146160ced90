"""Simulate facet of `argmin_update` (see `cake_core.sim` for the calling convention).

Pure register math on the process's own fragments: no scheduling point, no memory
traffic.  The running pair is updated in place, exactly as the built-in sequence
`row_argmin` + `lt` + two `where`s would rebind it, so a kernel and its fused rewrite
give bit-identical results.
"""

from __future__ import annotations

import numpy as np

from cake_core.ir.kernel import Op
from cake_core.sim.context import SimContext


def online_argmin(best_v: np.ndarray, best_i: np.ndarray, dist: np.ndarray, offset: int
                  ) -> tuple[np.ndarray, np.ndarray]:
    """The new running pair: numpy's argmin within the chunk, strict `<` across chunks."""
    d = np.asarray(dist, dtype=np.float32)
    col = d.argmin(axis=1)
    val = d[np.arange(d.shape[0]), col]
    closer = val < np.asarray(best_v, dtype=np.float32)
    new_v = np.where(closer, val, best_v).astype(np.float32)
    new_i = np.where(closer, col.astype(np.int64) + offset, best_i).astype(np.int32)
    return new_v, new_i


def argmin_update(op: Op, ctx: SimContext) -> None:
    best_v = ctx.frag(op, "best_v")
    best_i = ctx.frag(op, "best_i")
    dist = np.asarray(ctx.operand(op, "dist"))
    best_v.array, best_i.array = online_argmin(best_v.array, best_i.array, dist,
                                               ctx.int(op, "offset"))
