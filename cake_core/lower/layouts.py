"""Register layouts of fragments: which thread holds which element, in which register.

A fragment is a per-thread C++ array.  Its layout is described by a *parent*: a 2-D
(rows, cols) distribution given as a nest of loops over registers, outermost first, each
stepping one coordinate, plus the per-thread base coordinates.  Element `r` of the array
sits at `(row_base + sum(row loop var * step), col_base + sum(col loop var * step))`, with
`r` the mixed-radix number of the loop variables.  A fragment of lower rank (a per-row
vector made by a reduction, a per-column vector broadcast over rows) keeps the loops of the
axes it has, so combining it with a full fragment is a matter of index arithmetic that
nvcc folds away after unrolling.

The parents (PTX ISA 9.7.15.5.2 "Register fragments" for wgmma, 9.7.14.5.x for mma.sync):

- `wgmma_acc` (m64nNk16, f32 accumulator): thread t of a warpgroup holds rows
  `(warp % 4) * 16 + lane / 4 + 8 * i` and columns `(lane % 4) * 2 + 8 * j + c`, register
  `d[4 * j + 2 * i + c]` (ISA figure "WGMMA .m64nNk16 register fragment layout for
  accumulator matrix D").  A role with several warpgroups gives each a slab of
  `M / warpgroups` rows, each slab made of 64-row wgmma tiles.
- `mma_acc` (mma.sync m16n8k16 C/D): per warp, `c0, c1` at row `lane / 4`, columns
  `(lane % 4) * 2 + {0, 1}`, `c2, c3` eight rows lower (ISA "Matrix fragments for
  mma.m16n8k16", figure for C/D), tiled over the warp's (WM, WN) fragment.
- `rows` (generic): rows over the warps of the group, columns over the lanes in vectors of
  up to 16 bytes; 1-D fragments are spread over every thread of the group.

A row never spans two warps in any parent, so row reductions need only shuffles among the
lanes that share a row (`xor` 1 and 2 for the accumulators, 1..16 for `rows`).
"""

from __future__ import annotations

from dataclasses import dataclass

from cake_core.ir.symbolic import Const, SymExpr, Var, add, floordiv, mod, mul

ROW, COL = 0, 1


def cvar(name: str) -> Var:
    """A C++ variable of the generated code inside an index expression (`lane`, a loop)."""
    return Var("@" + name)


LANE = cvar("lane")
WARP_RANK = cvar("warp_rank")
WG_RANK = cvar("wg_rank")
THREAD_RANK = cvar("thread_rank")
ZERO = Const(0)


@dataclass(frozen=True, slots=True)
class Loop:
    var: str
    """Base name of the loop variable (made unique per kernel by the context)."""
    extent: int
    axis: int
    step: int


@dataclass(frozen=True, slots=True)
class Parent:
    kind: str
    shape: tuple[int, int]
    loops: tuple[Loop, ...]
    row_base: SymExpr
    col_base: SymExpr
    row_owner: str
    """Holds for one thread among those with the same rows (they differ only in columns)."""
    col_owner: str
    """Holds for one thread among those with the same columns."""
    row_lanes: tuple[int, ...]
    """xor lane offsets that reach every lane holding part of the same row."""
    per_warp: bool
    row_valid: bool = True
    """False when some threads' row coordinates fall past the shape (guard accesses)."""
    col_valid: bool = True

    def axis_loops(self, axis: int) -> tuple[Loop, ...]:
        return tuple(lp for lp in self.loops if lp.axis == axis)

    @property
    def registers(self) -> int:
        n = 1
        for lp in self.loops:
            n *= lp.extent
        return n


@dataclass(frozen=True, slots=True)
class Dist:
    """A fragment's layout: a parent and, per fragment dimension, the parent axis it is
    (None for an extent-1 dimension that only broadcasts)."""

    parent: Parent
    axes: tuple[int | None, ...]

    @property
    def used_axes(self) -> tuple[int, ...]:
        return tuple(a for a in self.axes if a is not None)

    @property
    def loops(self) -> tuple[Loop, ...]:
        used = set(self.used_axes)
        return tuple(lp for lp in self.parent.loops if lp.axis in used)

    @property
    def registers(self) -> int:
        n = 1
        for lp in self.loops:
            n *= lp.extent
        return n

    def key(self) -> tuple[object, ...]:
        """Equal keys: the same element in the same register of the same thread."""
        parts: list[object] = [self.parent.per_warp]
        for a in self.axes:
            if a is None:
                parts.append(None)
                continue
            base = self.parent.row_base if a == ROW else self.parent.col_base
            parts.append((base, tuple((lp.var, lp.extent, lp.step)
                                      for lp in self.parent.axis_loops(a))))
        parts.append(tuple(lp.var for lp in self.loops))  # register order
        return tuple(parts)

    def compatible(self, other: Dist) -> bool:
        return self.key() == other.key()

    def project(self, axes: tuple[int | None, ...]) -> Dist:
        return Dist(self.parent, axes)

    @property
    def owner(self) -> str:
        """Predicate selecting one replica of each element (for stores): along a parent
        axis the fragment does not have, only the thread with a zero coordinate writes."""
        used = set(self.used_axes)
        preds = []
        if COL not in used:
            preds.append(self.parent.row_owner)
        if ROW not in used:
            preds.append(self.parent.col_owner)
        return " && ".join(p for p in dict.fromkeys(preds) if p != "true") or "true"

    @property
    def opaque(self) -> bool:
        """mma.sync operand fragments hold packed 16-bit pairs: only mma_sync reads them."""
        return self.parent.kind in ("mma_a", "mma_b")


# --- parents ------------------------------------------------------------------------------
def wgmma_acc(m: int, n: int, warpgroups: int) -> Parent:
    rows_per_wg = m // warpgroups
    slabs = rows_per_wg // 64
    loops = (Loop("m", slabs, ROW, 64), Loop("j", n // 8, COL, 8), Loop("i", 2, ROW, 8),
             Loop("c", 2, COL, 1))
    row_base = add(mul(mod(WARP_RANK, Const(4)), Const(16)), floordiv(LANE, Const(4)))
    if warpgroups > 1:
        row_base = add(mul(WG_RANK, Const(rows_per_wg)), row_base)
    col_base = mul(mod(LANE, Const(4)), Const(2))
    return Parent("wgmma_acc", (m, n), loops, row_base, col_base, "lane % 4 == 0",
                  "lane / 4 == 0 && warp_rank == 0", (1, 2), per_warp=False)


def mma_acc(m: int, n: int) -> Parent:
    loops = (Loop("mt", m // 16, ROW, 16), Loop("nt", n // 8, COL, 8), Loop("i", 2, ROW, 8),
             Loop("c", 2, COL, 1))
    return Parent("mma_acc", (m, n), loops, floordiv(LANE, Const(4)),
                  mul(mod(LANE, Const(4)), Const(2)), "lane % 4 == 0",
                  "lane / 4 == 0", (1, 2), per_warp=True)


def mma_operand(kind: str, rows: int, cols: int) -> Parent:
    """ldmatrix results: 32-bit registers of packed pairs (A: 4 per 16x16, B: 2 per 16x8)."""
    if kind == "mma_a":
        loops = (Loop("mt", rows // 16, ROW, 16), Loop("kt", cols // 16, COL, 16),
                 Loop("q", 4, COL, 0))
    else:
        loops = (Loop("kt", rows // 16, ROW, 16), Loop("nt", cols // 8, COL, 8),
                 Loop("q", 2, COL, 0))
    return Parent(kind, (rows, cols), loops, ZERO, ZERO, "true", "true", (), per_warp=True)


def vector_width(cols: int, esize: int, lanes: int = 32) -> int:
    """Elements per access: up to 16 bytes, and the columns must split evenly over lanes."""
    v = max(1, 16 // esize)
    while v > 1 and cols % (lanes * v):
        v //= 2
    return v


def rows2d(rows: int, cols: int, warps: int, esize: int) -> Parent:
    v = vector_width(cols, esize)
    per_row = -(-cols // (32 * v))
    loops = (Loop("p", -(-rows // warps), ROW, warps), Loop("q", per_row, COL, 32 * v),
             Loop("v", v, COL, 1))
    return Parent("rows", (rows, cols), loops, WARP_RANK, mul(LANE, Const(v)),
                  "lane == 0", "warp_rank == 0", (16, 8, 4, 2, 1), per_warp=False,
                  row_valid=rows % warps == 0, col_valid=cols % (32 * v) == 0)


def rows1d(n: int, threads: int, esize: int) -> Parent:
    v = vector_width(n, esize, threads)
    loops = (Loop("q", -(-n // (threads * v)), ROW, threads * v), Loop("v", v, ROW, 1))
    return Parent("rows1d", (n, 1), loops, mul(THREAD_RANK, Const(v)), ZERO, "true", "true", (),
                  per_warp=False, row_valid=n % (threads * v) == 0)


def default_dist(shape: tuple[int, ...], warps: int, esize: int) -> Dist | None:
    """The layout of a fragment nothing constrains: generic rows."""
    if len(shape) == 1:
        return Dist(rows1d(shape[0], warps * 32, esize), (ROW,))
    if len(shape) == 2:
        return Dist(rows2d(shape[0], shape[1], warps, esize), (ROW, COL))
    return None
