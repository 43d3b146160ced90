"""The order a persistent kernel visits its output tiles: `tile_coords(t, tiles_m, tiles_n)`.

A persistent block walks linear tile indices `t = block.x, block.x + grid, ...`; at any
moment the blocks of the launch work on a window of consecutive indices (a "wave").  Which
(tile_m, tile_n) pairs those are decides how many distinct A row-panels and B column-panels
the wave reads, and so how much of its input traffic L2 can serve twice.

The order is a *grouped raster*.  With `raster="m"` the tiles are cut into bands of `group`
consecutive M-tiles (the last band may be shorter: the ragged edge); a band is walked column
by column, M fastest, and the bands follow each other along M:

    band   = t // (group * tiles_n)
    first  = band * group                      # the band's first M-tile
    rows   = min(tiles_m - first, group)       # its height (short at the ragged edge)
    local  = t % (group * tiles_n)
    tile_m = first + local % rows
    tile_n = local // rows

Every band of height `rows` holds exactly `rows * tiles_n` indices and the map from `local`
to (local % rows, local // rows) is a bijection onto its `rows x tiles_n` tiles, so the whole
map is a bijection from [0, tiles_m * tiles_n) onto the tile grid whatever `group` is.
`group >= tiles_m` is the plain M-fastest raster; `group=1` is the plain N-fastest one.
`raster="n"` is the mirror image (bands of N-tiles, N fastest).  A wave of W consecutive
tiles inside one band touches `min(rows, W)` A panels and `cdiv(W, rows)` B panels (the
model `cake_core.cost.tile_reuse` uses).

The map is built from the IR's own integer operators, so every analysis (bounds, the
simulator, the cost model, the CUDA lowering) reads the same arithmetic; with constant
arguments it folds to the pair of ints.  `rows` is clamped to at least 1 so an index past
the last tile (which a guarded loop never uses) still divides by a positive number.
"""

from __future__ import annotations

from cake_core.ir import symbolic as S

RASTERS = ("m", "n")
DEFAULT_GROUP = 8
"""Triton's and CUTLASS's usual swizzle width: eight M-tiles share each B panel in L2."""


def tile_coords(t: S.SymLike, tiles_m: S.SymLike, tiles_n: S.SymLike,
                group: int = DEFAULT_GROUP, raster: str = "m") -> tuple[S.SymExpr, S.SymExpr]:
    """(tile_m, tile_n) of linear tile `t` in the grouped raster order described above."""
    if group < 1:
        raise ValueError(f"group must be positive, not {group}")
    if raster not in RASTERS:
        raise ValueError(f"raster is 'm' or 'n', not {raster!r}")
    t_, tm_, tn_ = S.sym(t), S.sym(tiles_m), S.sym(tiles_n)
    fast, slow = (tm_, tn_) if raster == "m" else (tn_, tm_)
    g = S.Const(group)
    width = S.mul(g, slow)
    first = S.mul(S.floordiv(t_, width), g)
    rows = S.smax(S.smin(S.sub(fast, first), g), S.Const(1))
    local = S.mod(t_, width)
    along = S.add(first, S.mod(local, rows))
    across = S.floordiv(local, rows)
    return (along, across) if raster == "m" else (across, along)


__all__ = ["DEFAULT_GROUP", "RASTERS", "tile_coords"]
