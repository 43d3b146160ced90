"""Persistent tile loops: a small grid of blocks that loop over the output tiles.

A persistent kernel launches about one block per SM (`NSM`: `sm_count()`, or a
constant), and each block walks

    for tile_id in range(block.x, ntiles, NSM):
        tile_x, tile_y = tile_coords(tile_id, GX, GY)   # or tile_id % GX, tile_id // GX
        ...

It computes the same tiles as the kernel with one block per tile, in the same order:
at any moment the SMs work on `NSM` consecutive tile indices, just as a wave of the
one-block-per-tile launch holds consecutive blocks.  So the model prices it as that
launch: a *virtual grid* of one unit per tile, in waves of as many tiles as run at once,
with the L2 reuse of each wave counted on the tile coordinates the kernel computes.  What
persistence changes is priced apart: the work outside the tile loop happens once per
block, not once per tile, and a producer role that runs ahead fills the next tile's
pipeline while the consumers finish the current one.

A tile loop is recognised by its bounds: a loop at the top of the kernel or of a role
whose start depends on the block index and whose step is the number of blocks, or, in a
kernel launched in clusters, the number of clusters: the blocks of a cluster walk the same
cluster tiles (`range(block.x // 2, PAIRS, clusters)`), each computing its own part of
one, so every block still computes one unit of the virtual grid per iteration.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from cake_core.cost.evaluate import MissingDimError, evaluate, evaluate_array
from cake_core.ir.kernel import ForOp, Kernel
from cake_core.ir.symbolic import SymExpr, Var

_AXES = ("x", "y", "z")


@dataclass(frozen=True, slots=True)
class TileLoops:
    """The persistent tile loops of a kernel (one per role that has one)."""

    loops: frozenset[int]
    """id() of each tile loop."""
    var_names: frozenset[str]
    start: SymExpr
    """The first tile index of a block (a function of the block index)."""
    step: int
    """The number of blocks sharing out the tiles (the launched grid)."""
    tiles: int
    """Tile-loop iterations over all blocks: the size of the virtual grid."""
    grid: tuple[int, int, int]
    cluster: tuple[int, int, int] = (1, 1, 1)


def _block_dependent(expr: SymExpr) -> bool:
    seen: set[SymExpr] = set()
    stack = [expr]
    while stack:
        for a in stack.pop().atoms():
            if a in seen or not isinstance(a, Var):
                continue
            seen.add(a)
            if a.name.startswith("block."):
                return True
            stack.extend(b for b in (a.lo, a.hi) if b is not None)
    return False


def _block_env(n: int, grid: tuple[int, int, int],
               cluster: tuple[int, int, int] = (1, 1, 1)) -> dict[str, Any]:
    """block.x/y/z of the first `n` blocks, launched x fastest, and each block's place in
    its cluster (cluster.x/y/z, cluster.rank: x fastest, as %cluster_ctarank counts)."""
    import numpy as np  # start-up: only persistent kernels need numpy (~40 ms)

    gx, gy, _gz = grid
    cx, cy, cz = (max(1, c) for c in cluster)
    b = np.arange(n, dtype=np.int64)
    bx, by, bz = b % max(1, gx), (b // max(1, gx)) % max(1, gy), b // max(1, gx * gy)
    rx, ry, rz = bx % cx, by % cy, bz % cz
    return {"block.x": bx, "block.y": by, "block.z": bz,
            "cluster.x": rx, "cluster.y": ry, "cluster.z": rz,
            "cluster.rank": rx + cx * (ry + cy * rz)}


def find_tile_loops(kernel: Kernel, env: Mapping[str, int],
                    grid: tuple[int, ...]) -> TileLoops | None:
    """The kernel's persistent tile loops, or None when it has none (or they disagree)."""
    gx, gy, gz = (*grid, 1, 1, 1)[:3]
    g3 = (gx, gy, gz)
    blocks = math.prod(grid) if grid else 1
    if blocks < 2:
        return None  # one block looping over everything is a plain loop
    cx, cy, cz = (*kernel.cluster, 1, 1, 1)[:3]
    c3 = (cx, cy, cz)
    cblocks = math.prod(c3)
    strides = {blocks} | ({blocks // cblocks} if cblocks > 1 and blocks % cblocks == 0
                          else set())
    bodies = [kernel.body, *(r.body for r in kernel.roles.values())]
    found: list[ForOp] = []
    for body in bodies:
        for n in body:
            if not isinstance(n, ForOp) or not _block_dependent(n.start):
                continue
            try:
                step = evaluate(n.step, env)
            except (MissingDimError, ZeroDivisionError):
                continue
            if step in strides:
                found.append(n)
    if not found:
        return None
    benv = {**env, **_block_env(blocks, g3, c3)}
    counts = set()
    for loop in found:
        try:
            trips = evaluate_array(loop.trip_count, benv)
        except (MissingDimError, ZeroDivisionError):
            return None
        counts.add(int(_total(trips, blocks)))
    if len(counts) != 1:
        return None
    return TileLoops(frozenset(id(n) for n in found), frozenset(n.var.name for n in found),
                     found[0].start, blocks, counts.pop(), g3, c3)


def _total(trips: Any, blocks: int) -> int:
    import numpy as np  # start-up: only persistent kernels need numpy (~40 ms)

    arr = np.broadcast_to(np.asarray(trips), (blocks,))
    return int(np.maximum(arr, 0).sum())


def distinct_tiles(coords: tuple[SymExpr, ...], tiles: TileLoops, concurrent: int,
                   env: Mapping[str, int]) -> float | None:
    """Distinct tiles among `concurrent` tiles processed at once (one per block, each at
    its first tile), counted on the coordinates; None when they cannot be evaluated."""
    import numpy as np  # start-up: only persistent kernels need numpy (~40 ms)

    if not coords or concurrent < 1:
        return None
    n = min(concurrent, tiles.step)
    benv: dict[str, Any] = {**env, **_block_env(n, tiles.grid, tiles.cluster)}
    try:
        first = evaluate_array(tiles.start, benv)
        for name in tiles.var_names:
            benv[name] = np.broadcast_to(np.asarray(first, dtype=np.int64), (n,))
        cols = [np.broadcast_to(np.asarray(evaluate_array(c, benv), dtype=np.int64), (n,))
                for c in coords]
    except (MissingDimError, ZeroDivisionError, TypeError):
        return None
    rows = np.stack(cols, axis=1)
    distinct = len(np.unique(rows, axis=0))
    return float(distinct) * concurrent / n
