"""Register layouts: every element of a fragment lives in exactly one register of one thread
(per replica), at the coordinates the PTX ISA figures give."""

from __future__ import annotations

import itertools

import pytest

from cake_core.ir.symbolic import Var
from cake_core.lower.fragments import Nest, coord, index
from cake_core.lower.layouts import (
    COL,
    ROW,
    Dist,
    Parent,
    mma_acc,
    rows1d,
    rows2d,
    vector_width,
    wgmma_acc,
)
from cake_core.verify.views import evaluate


def _names(p: Parent) -> Nest:
    return Nest(p.loops, {lp.var: f"v_{lp.var}" for lp in p.loops})


def _index_value(text: str, env: dict[str, int]) -> int:
    """Evaluate the `a * 4 + b * 2 + c` register indices `fragments.index` writes."""
    total = 0
    for term in text.split(" + "):
        parts = term.split(" * ")
        val = 1
        for p in parts:
            val *= int(p) if p.isdigit() else env[p]
        total += val
    return total


def _elements(d: Dist, threads: int) -> dict[tuple[int, int, int], tuple[int, ...]]:
    """(thread, register) -> logical coordinates, for every thread and register of `d`."""
    p = d.parent
    n = _names(p)
    out = {}
    for t in range(threads):
        warp, lane = divmod(t, 32)
        env = {Var("@lane"): lane, Var("@warp_rank"): warp, Var("@wg_rank"): warp // 4,
               Var("@thread_rank"): t}
        for values in itertools.product(*(range(lp.extent) for lp in d.loops)):
            names = {n.names[lp.var]: v for lp, v in zip(d.loops, values, strict=True)}
            full = {**env, **{Var("@" + k): v for k, v in names.items()}}
            pos = tuple(evaluate(coord(d, a, n), full) if a is not None else 0 for a in d.axes)
            reg = _index_value(index(d, n), names) if d.loops else 0
            out[(t, reg, 0)] = pos  # type: ignore[assignment]
    return out


@pytest.mark.parametrize(("m", "n", "wgs"), [(64, 32, 1), (128, 64, 2), (128, 32, 1),
                                             (256, 32, 2)])
def test_wgmma_accumulator_covers_the_tile_once(m: int, n: int, wgs: int) -> None:
    d = Dist(wgmma_acc(m, n, wgs), (ROW, COL))
    els = _elements(d, 128 * wgs)
    assert sorted(els.values()) == sorted(itertools.product(range(m), range(n)))
    assert d.registers == m * n // (128 * wgs)
    regs = {r for (_, r, _) in els}
    assert regs == set(range(d.registers))


def test_wgmma_accumulator_matches_the_isa_figure() -> None:
    """PTX ISA, WGMMA .m64nNk16 D fragment: d[4j + 2i + c] of thread t of the warpgroup is
    row (t / 32) * 16 + (t % 32) / 4 + 8 i, column (t % 4) * 2 + 8 j + c."""
    d = Dist(wgmma_acc(64, 64, 1), (ROW, COL))
    els = _elements(d, 128)
    for (t, reg, _), (row, col) in els.items():
        j, rem = divmod(reg, 4)
        i, c = divmod(rem, 2)
        assert row == (t // 32) * 16 + (t % 32) // 4 + 8 * i
        assert col == (t % 4) * 2 + 8 * j + c


def test_mma_accumulator_is_the_m16n8_c_layout_tiled() -> None:
    d = Dist(mma_acc(64, 64), (ROW, COL))
    els = _elements(d, 32)  # per warp
    assert sorted(els.values()) == sorted(itertools.product(range(64), range(64)))
    for (lane, reg, _), (row, col) in els.items():
        tile, rem = divmod(reg, 4)
        mt, nt = divmod(tile, 8)
        i, c = divmod(rem, 2)
        assert (row, col) == (16 * mt + lane // 4 + 8 * i, 8 * nt + (lane % 4) * 2 + c)


@pytest.mark.parametrize(("rows", "cols", "warps"), [(4, 1024, 4), (16, 512, 2), (8, 64, 8)])
def test_generic_rows_cover_the_tile_once(rows: int, cols: int, warps: int) -> None:
    d = Dist(rows2d(rows, cols, warps, 4), (ROW, COL))
    els = _elements(d, 32 * warps)
    valid = [v for v in els.values() if v[0] < rows and v[1] < cols]
    assert sorted(valid) == sorted(itertools.product(range(rows), range(cols)))


def test_one_dimensional_rows_cover_the_vector_once() -> None:
    d = Dist(rows1d(512, 128, 4), (ROW,))
    els = _elements(d, 128)
    assert sorted(els.values()) == [(i,) for i in range(512)]


def test_row_projection_is_replicated_over_the_lanes_of_a_quad() -> None:
    acc = Dist(wgmma_acc(128, 128, 2), (ROW, COL))  # 2 x 64 rows
    rows = acc.project((ROW,))
    assert rows.registers == 2 and rows.owner == "lane % 4 == 0"
    els = _elements(rows, 256)
    by_row: dict[tuple[int, ...], list[int]] = {}
    for (t, _, _), pos in els.items():
        by_row.setdefault(pos, []).append(t)
    assert sorted(by_row) == [(r,) for r in range(128)]
    assert all(len(ts) == 4 and len({t // 4 for t in ts}) == 1 for ts in by_row.values())
    cols = acc.project((COL,))
    assert cols.registers == 32 and cols.owner == "lane / 4 == 0 && warp_rank == 0"


def test_vector_width_needs_whole_lanes() -> None:
    assert vector_width(1024, 4) == 4 and vector_width(64, 2) == 2 and vector_width(24, 4) == 1
