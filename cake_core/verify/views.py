"""Where a shared-memory view lives inside its buffer.

Layout rules (what TMA can write, what wgmma can read, which banks a warp hits) need the
physical rectangle a view covers, not just its logical shape.  The IR records how a view
was made: `buf[s]` through a `ViewOrigin`, `.tile(shape, coords)` as an op, `.T` as a
flag on the type.  This module replays those steps into a `View`.

Physical model (the one the lowering implements): a buffer's trailing dimension is the
contiguous one (the second-to-last for `order="col"`); every other dimension is flattened
into rows, each row `pitch` bytes apart (`padded(n)` adds n elements per row).  Indexing
leading dimensions moves the first row; a tile moves the first row and column.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from cake_core.ir.kernel import Kernel, Op, SmemAlloc, Value
from cake_core.ir.symbolic import BinExpr, Const, Dim, SymExpr, Var, add, mul
from cake_core.ir.types import DType, SmemLayout, SmemType, StageType, TupleType
from cake_core.ir.values import ViewOrigin, elements
from cake_core.primitives.traits import Trait

MAX_ANALYZED_BYTES = 1 << 20
"""Buffers larger than this are left out of the layout and bank analyses, which enumerate
the lanes and rows of every access: no GPU gives a block more than 228 KiB of shared
memory, so such a buffer is already an overflow (CK201), and walking a buffer of
`2**40` rows would never end."""


@dataclass(frozen=True, slots=True)
class Geometry:
    """A buffer's physical shape: `rows` rows of `cols` elements, `pitch` bytes apart."""

    name: str
    dtype: DType
    shape: tuple[int, ...]
    layout: SmemLayout
    rows: int
    cols: int
    pitch: int

    @property
    def esize(self) -> int:
        return self.dtype.bytes

    @property
    def row_bytes(self) -> int:
        """Bytes of data in one row (padding excluded)."""
        return self.cols * self.esize

    @property
    def col_order(self) -> bool:
        return self.layout.order == "col" and len(self.shape) >= 2

    def with_layout(self, layout: SmemLayout) -> Geometry:
        return geometry_of(self.name, self.dtype, self.shape, layout)


def geometry_of(name: str, dtype: DType, shape: tuple[int, ...], layout: SmemLayout) -> Geometry:
    if len(shape) >= 2 and layout.order == "col":
        cols, per_plane = shape[-2], shape[-1]
    else:
        cols, per_plane = shape[-1], (shape[-2] if len(shape) >= 2 else 1)
    planes = 1
    for d in shape[:-2]:
        planes *= d
    pitch = (cols + layout.pad) * dtype.bytes
    return Geometry(name, dtype, shape, layout, planes * per_plane, cols, pitch)


def geometry(alloc: SmemAlloc) -> Geometry | None:
    if alloc.kind != "buffer" or alloc.dtype is None or not alloc.shape or \
            any(d <= 0 for d in alloc.shape):
        return None
    if alloc.nbytes > MAX_ANALYZED_BYTES:
        return None
    return geometry_of(alloc.name, alloc.dtype, alloc.shape, alloc.layout or SmemLayout())


@dataclass(frozen=True, slots=True)
class View:
    """A rectangle of a buffer: rows [row0, row0 + rows) x columns [col0, col0 + cols).

    `transposed` says the view's logical last two dimensions are the physical (columns,
    rows).  `logical_rank` is the rank of the view's type (rows of a rank-3 view are its
    two leading dimensions flattened).
    """

    buffer: str
    row0: SymExpr
    col0: SymExpr
    rows: int
    cols: int
    transposed: bool
    logical_rank: int

    def byte_offset(self, g: Geometry) -> SymExpr:
        return add(mul(self.row0, Const(g.pitch)), mul(self.col0, Const(g.esize)))

    @property
    def logical_shape(self) -> tuple[int, int]:
        return (self.cols, self.rows) if self.transposed else (self.rows, self.cols)


class ViewTracer:
    """Resolves the smem arguments of a kernel's ops to `View`s, in program order.

    Tile results are remembered by identity and by name: `x.tile(...).T` builds a new
    value named after the tile result, which is how the `.T` of a tile is found again.
    """

    def __init__(self, kernel: Kernel) -> None:
        self.geometries: dict[str, Geometry] = {}
        for a in kernel.smem:
            g = geometry(a)
            if g is not None:
                self.geometries[a.name] = g
        self._by_id: dict[int, View] = {}
        self._by_name: dict[str, View] = {}
        self.views: dict[tuple[int, str], View] = {}
        for op in kernel.ops():
            self._visit(op)

    def view(self, op: Op, arg: str) -> View | None:
        return self.views.get((id(op), arg))

    def _visit(self, op: Op) -> None:
        for name, v in op.args.items():
            if isinstance(v.type, SmemType):
                view = self.resolve(v)
                if view is not None:
                    self.views[(id(op), name)] = view
        if Trait.SMEM_VIEW in op.prim.traits and op.results and \
                isinstance(op.results[0].type, SmemType):
            parent = self.views.get((id(op), "self"))
            view = _tile(parent, op) if parent is not None else None
            if view is not None:
                self._by_id[id(op.results[0])] = view
                self._by_name[op.results[0].name] = view

    def resolve(self, v: Value) -> View | None:
        t = v.type
        if not isinstance(t, SmemType):
            return None
        g = self.geometries.get(t.buffer)
        if g is None:
            return None
        if id(v) in self._by_id:
            return self._by_id[id(v)]
        if isinstance(v.const, ViewOrigin):
            return _indexed(g, v)
        name = v.name
        flips = 0
        while name.endswith(".T"):
            name, flips = name[:-2], flips + 1
        if flips and name in self._by_name:
            base = self._by_name[name]
            if base.logical_rank == 2:
                return _flip(base, flips % 2 == 1)
            return None
        if tuple(d.const for d in t.buffer_shape) == g.shape:
            rank = len(t.shape)
            if t.transposed and rank > 2:
                return None
            view = View(g.name, Const(0), Const(0), g.rows, g.cols, g.col_order, rank)
            return _flip(view, t.transposed) if rank >= 2 else view
        return None


def _flip(view: View, flip: bool) -> View:
    if not flip:
        return view
    return View(view.buffer, view.row0, view.col0, view.rows, view.cols, not view.transposed,
                view.logical_rank)


def _indexed(g: Geometry, v: Value) -> View | None:
    """`buf[i, j]` (possibly in steps, `buf[i][j]`): a block of whole rows."""
    t = v.type
    assert isinstance(t, SmemType)
    index: list[Value] = []
    cur: object = v.const
    while isinstance(cur, ViewOrigin):
        index[:0] = list(cur.index)
        cur = cur.base.const
    shape = g.shape
    k = len(index)
    if k == 0 or k >= len(shape):
        return None
    if g.col_order and k > len(shape) - 2:
        return None  # indexing inside a column-major plane: no row-rectangle
    # rows covered by one step of dimension i: product of the dims between it and the
    # contiguous one (for col order the per-plane row count is the last dim).
    inner_rows = g.rows
    row0: SymExpr = Const(0)
    for i, idx in enumerate(index):
        inner_rows //= shape[i] if i < len(shape) - 1 else 1
        row0 = add(row0, mul(index_sym(idx), Const(inner_rows)))
    rest = shape[k:]
    rows = 1
    if g.col_order:
        rows = rest[-1]
        for d in rest[:-2]:
            rows *= d
    else:
        for d in rest[:-1]:
            rows *= d
    if t.transposed and len(t.shape) > 2:
        return None
    view = View(g.name, row0, Const(0), rows, g.cols, g.col_order, len(t.shape))
    return _flip(view, t.transposed) if len(t.shape) >= 2 else view


def _tile(parent: View, op: Op) -> View | None:
    shape_v, coords_v = op.args.get("shape"), op.args.get("coords")
    if shape_v is None or coords_v is None:
        return None
    shape = _ints(shape_v)
    coords = _syms(coords_v)
    if shape is None or coords is None or len(shape) != len(coords):
        return None
    if len(shape) == 1 and parent.rows == 1 and parent.logical_rank == 1:
        return View(parent.buffer, parent.row0, add(parent.col0, mul(coords[0], Const(shape[0]))),
                    1, shape[0], False, 1)
    if len(shape) != 2 or parent.logical_rank != 2:
        return None
    (h, w), (y, x) = shape, coords
    if parent.transposed:  # logical (cols, rows): swap back to physical order
        h, w, y, x = w, h, x, y
    return View(parent.buffer, add(parent.row0, mul(y, Const(h))),
                add(parent.col0, mul(x, Const(w))), h, w, parent.transposed, 2)


def _ints(v: Value) -> tuple[int, ...] | None:
    out = []
    for e in elements(v):
        c = e.sym.const if e.sym is not None else None
        if c is None:
            return None
        out.append(c)
    return tuple(out)


def _syms(v: Value) -> tuple[SymExpr, ...] | None:
    elts = v.const if isinstance(v.type, TupleType) else (v,)
    if not isinstance(elts, tuple):
        return None
    return tuple(index_sym(e) for e in elts if isinstance(e, Value))


def index_sym(v: Value) -> SymExpr:
    """The integer expression of an index value (a stage index is a Var in [0, stages))."""
    if v.sym is not None:
        return v.sym
    if isinstance(v.type, StageType):
        return Var(v.name, Const(0), Const(v.type.stages))
    return Var(v.name)


# --- evaluating offsets ----------------------------------------------------------------
def evaluate(e: SymExpr, env: dict[Var, int]) -> int | None:
    """The value of `e` with its runtime indices bound by `env` (None if a dim remains)."""
    if isinstance(e, Const):
        return e.value
    if isinstance(e, Var):
        return env.get(e)
    if isinstance(e, Dim):
        return None
    if isinstance(e, BinExpr):
        a, b = evaluate(e.left, env), evaluate(e.right, env)
        if a is None or b is None:
            return None
        if e.op in ("//", "%", "cdiv") and b == 0:
            return None
        return _FOLD[e.op](a, b)
    return None


_FOLD: dict[str, Callable[[int, int], int]] = {
    "+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b,
    "//": lambda a, b: a // b, "%": lambda a, b: a % b, "cdiv": lambda a, b: -(-a // b),
    "min": min, "max": max,
}

#: Values tried per runtime index.  Bank patterns repeat every 1024 bytes and swizzle
#: phases every 8 rows, so the first 8 values of an index reach every phase.
SAMPLES_PER_INDEX = 8
MAX_ENVIRONMENTS = 512


def environments(exprs: tuple[SymExpr, ...]) -> Iterator[dict[Var, int]] | None:
    """Bindings of the runtime indices in `exprs` to the values they can take (sampled).

    None when an expression depends on a launch-time dim, whose value is unknown.
    """
    atoms: set[SymExpr] = set()
    for e in exprs:
        atoms |= e.atoms()
    if any(isinstance(a, Dim) for a in atoms):
        return None
    variables = sorted((a for a in atoms if isinstance(a, Var)), key=lambda v: v.name)
    ranges = [_samples(v) for v in variables]
    combos = itertools.islice(itertools.product(*ranges), MAX_ENVIRONMENTS)
    return (dict(zip(variables, c, strict=True)) for c in combos)


def _samples(v: Var) -> range:
    lo = v.lo.const if v.lo is not None and v.lo.const is not None else 0
    hi = v.hi.const if v.hi is not None else None
    stop = lo + SAMPLES_PER_INDEX if hi is None else min(hi, lo + SAMPLES_PER_INDEX)
    return range(lo, max(stop, lo + 1))
