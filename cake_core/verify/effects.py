"""Each op's `EffectSpec` turned into what the synchronization rules reason about.

A primitive declares its effects by parameter name (`reads=("src",)`, `arrives="bar"`,
`waits="cp_async"`...).  `effects_of` binds those names to the op's arguments once, and
`Views` turns a shared-memory argument into the region of the buffer it covers: which
buffer, which stage, which rectangle.  Plugin primitives get the same treatment as
built-in ones, as long as they declare their effects.
"""

from __future__ import annotations

from dataclasses import dataclass

from cake_core.ir.kernel import Kernel, Op, Value
from cake_core.ir.symbolic import SymExpr
from cake_core.ir.types import (
    BarrierType,
    FragmentType,
    PipelineType,
    SmemType,
    numel,
)
from cake_core.ir.values import ViewOrigin, elements
from cake_core.primitives.registry import ARRIVAL_SCOPES, multicast_fanout
from cake_core.primitives.traits import Trait

#: Async groups whose smem accesses go through the async proxy (TMA and wgmma).
ASYNC_PROXY = frozenset({"tma", "wgmma", "bulk_store"})


@dataclass(frozen=True, slots=True)
class Effects:
    """What one op does, with argument names resolved to the op's values."""

    smem_reads: tuple[Value, ...] = ()
    smem_writes: tuple[Value, ...] = ()
    frag_reads: tuple[Value, ...] = ()
    frag_writes: tuple[Value, ...] = ()
    async_group: str | None = None
    pipe: Value | None = None
    pipe_action: str | None = None
    """The `PipeAction` value ("acquire", "commit", "wait", "release") done on `pipe`."""
    arrive: Value | None = None
    """A raw mbarrier the op arrives on (not an async copy's tx signal)."""
    arrive_count: int | None = None
    """Arrivals per arriving thread or warp (see `arrive_scope`)."""
    arrive_scope: str = "role"
    """Who arrives: "thread", "warp" or "role" (one elected thread); `arrival_scope`."""
    expect_bytes: Value | None = None
    copy_bar: Value | None = None
    """The barrier or pipeline an async copy signals its bytes on."""
    copy_bytes: int | None = None
    wait: Value | None = None
    parity: Value | None = None
    group_wait: tuple[str, int] | None = None
    group_commit: str | None = None
    barrier: tuple[str, int, int | None] | None = None
    """("sync" | "arrive", barrier id, warps or None for the whole block)."""
    fence: str | None = None


def _int(v: Value | None) -> int | None:
    return v.sym.const if v is not None and v.sym is not None else None


def arrival_scope(op: Op) -> str:
    """Who makes the op's mbarrier arrival: "thread", "warp" or "role" (one elected thread).

    The lowering, the simulator and the arrival counts all follow this one answer."""
    param = op.prim.effects.arrive_scope
    v = op.args.get(param) if param is not None else None
    scope = v.const if v is not None else None
    return scope if isinstance(scope, str) and scope in ARRIVAL_SCOPES else "role"


def arrivals_per_phase(op: Op, warps: int) -> int:
    """The arrivals one execution of the op by a role of `warps` warps makes."""
    count = _int(op.args.get("count")) if "count" in op.args else 1
    n = 1 if count is None else count
    scope = arrival_scope(op)
    return n * warps * 32 if scope == "thread" else n * warps if scope == "warp" else n


def effects_of(op: Op) -> Effects:
    spec = op.prim.effects
    args = op.args
    kw: dict[str, object] = {}

    def values(names: tuple[str, ...], kind: type) -> tuple[Value, ...]:
        return tuple(args[n] for n in names if n in args and isinstance(args[n].type, kind))

    kw["smem_reads"] = values(spec.reads, SmemType)
    smem_writes = values(spec.writes, SmemType)
    kw["smem_writes"] = smem_writes
    kw["frag_reads"] = values(spec.reads, FragmentType)
    kw["frag_writes"] = values(spec.writes, FragmentType)
    kw["async_group"] = spec.async_group
    # an op that arrives on or waits for a pipeline without a protocol step is no step
    action = spec.pipe_action.value if spec.pipe_action is not None else None
    target = args.get(spec.arrives) if spec.arrives else None
    if target is not None and spec.async_group is not None:
        kw["copy_bar"] = target
        kw["copy_bytes"] = sum(_bytes(v) for v in smem_writes) * multicast_fanout(op)
    elif target is not None and isinstance(target.type, PipelineType):
        kw["pipe"], kw["pipe_action"] = (target, action) if action else (None, None)
    elif target is not None and isinstance(target.type, BarrierType):
        kw["arrive"] = target
        if spec.tx_bytes:
            kw["arrive_count"], kw["expect_bytes"] = 1, args.get("bytes")
        else:
            kw["arrive_count"] = _int(args.get("count")) if "count" in args else 1
        kw["arrive_scope"] = arrival_scope(op)
    if spec.waits is not None:
        w = args.get(spec.waits)
        if w is None:
            kw["group_wait"] = (spec.waits, _int(args.get("n")) or 0)
        elif isinstance(w.type, PipelineType):
            kw["pipe"], kw["pipe_action"] = (w, action) if action else (None, None)
        elif isinstance(w.type, BarrierType):
            kw["wait"], kw["parity"] = w, args.get("parity")
    if spec.fence == "cp_async_commit":
        kw["group_commit"] = "cp_async"
    elif spec.fence == "block":
        kw["barrier"] = ("sync", 0, None)
    elif spec.fence in ("named", "named_arrive"):
        kind = "sync" if spec.fence == "named" else "arrive"
        kw["barrier"] = (kind, _int(args.get("id")) or 0, _int(args.get("warps")))
    elif spec.fence is not None:
        kw["fence"] = spec.fence
    return Effects(**kw)  # type: ignore[arg-type]


def _bytes(v: Value) -> int:
    t = v.type
    assert isinstance(t, SmemType)
    return (numel(t.shape) or 0) * t.dtype.bytes


# --- views -----------------------------------------------------------------------------------
Box = tuple[tuple[SymExpr, SymExpr], ...]


@dataclass(frozen=True, slots=True)
class ViewRef:
    """A view as written: its buffer, the stage indices, the rectangle (None: all of it).

    The rectangle is in the buffer's own (untransposed) coordinates below the stage
    dimensions, as expressions of the kernel's indices.
    """

    buffer: str
    stage: tuple[Value, ...]
    box: Box | None


@dataclass(frozen=True, slots=True)
class Region:
    """A concrete part of a buffer: stage indices and a rectangle; None where unknown."""

    buffer: str
    stage: tuple[int | None, ...]
    box: tuple[tuple[int, int] | None, ...] | None

    def overlaps(self, other: Region) -> bool:
        if self.buffer != other.buffer:
            return False
        for a, b in zip(self.stage, other.stage, strict=False):
            if a is not None and b is not None and a != b:
                return False
        if self.box is None or other.box is None:
            return True
        for x, y in zip(self.box, other.box, strict=False):
            if x is not None and y is not None and (x[1] <= y[0] or y[1] <= x[0]):
                return False
        return True

    def describe(self) -> str:
        if not self.stage:
            return f"`{self.buffer}`"
        idx = ", ".join("?" if s is None else str(s) for s in self.stage)
        return f"`{self.buffer}[{idx}]`"


class Views:
    """Resolves smem values to the buffer region they view (tile ops and `.T` included)."""

    def __init__(self, kernel: Kernel) -> None:
        self._tiles: dict[int, Op] = {}
        self._by_name: dict[str, list[Op]] = {}
        self._cache: dict[int, ViewRef] = {}
        for op in kernel.ops():
            if Trait.SMEM_VIEW in op.prim.traits and op.results and \
                    isinstance(op.results[0].type, SmemType):
                self._tiles[id(op.results[0])] = op
                self._by_name.setdefault(op.results[0].name, []).append(op)

    def ref(self, v: Value) -> ViewRef:
        hit = self._cache.get(id(v))
        if hit is None:
            hit = self._cache[id(v)] = self._ref(v)
        return hit

    def _ref(self, v: Value) -> ViewRef:
        t = v.type
        assert isinstance(t, SmemType)
        origin = v.const
        if isinstance(origin, ViewOrigin):
            base = self.ref(origin.base) if isinstance(origin.base.type, SmemType) and \
                origin.base.type.is_view else ViewRef(t.buffer, (), None)
            return ViewRef(base.buffer, base.stage + origin.index, None)
        tile = self._tiles.get(id(v)) or self._transposed_tile(v)
        if tile is None:
            return ViewRef(t.buffer, (), None)
        parent = tile.args["self"]
        pref = self.ref(parent)
        box = _tile_box(tile, parent, pref)
        return ViewRef(pref.buffer, pref.stage, box)

    def _transposed_tile(self, v: Value) -> Op | None:
        """`x.tile(...).T` keeps no link to its tile op; find it by name and position."""
        if not v.name.endswith(".T"):
            return None
        cands = [op for op in self._by_name.get(v.name[:-2], ())
                 if op.span.start.offset <= v.span.start.offset]
        return max(cands, key=lambda op: op.span.start.offset) if cands else None


def _tile_box(tile: Op, parent: Value, pref: ViewRef) -> Box | None:
    pt = parent.type
    assert isinstance(pt, SmemType)
    shape_v, coords_v = tile.args["shape"], tile.args["coords"]
    shape = elements(shape_v)
    coords = elements(coords_v)
    lows: list[SymExpr] = []
    highs: list[SymExpr] = []
    for s, c in zip(shape, coords, strict=False):
        if s.sym is None or c.sym is None:
            return pref.box
        lo = c.sym * s.sym
        lows.append(lo)
        highs.append(lo + s.sym)
    if pt.transposed and len(lows) >= 2:
        lows[-2], lows[-1] = lows[-1], lows[-2]
        highs[-2], highs[-1] = highs[-1], highs[-2]
    if pref.box is not None and len(pref.box) == len(lows):
        lows = [lo + p[0] for lo, p in zip(lows, pref.box, strict=True)]
        highs = [hi + p[0] for hi, p in zip(highs, pref.box, strict=True)]
    return tuple(zip(lows, highs, strict=True))


def barrier_parts(v: Value) -> tuple[str, Value | None]:
    """A raw mbarrier value's allocation name and its index (None for a single barrier)."""
    t = v.type
    assert isinstance(t, BarrierType)
    origin = v.const
    if isinstance(origin, ViewOrigin) and origin.index:
        return t.name, origin.index[0]
    return t.name, None
