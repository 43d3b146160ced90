"""What a cost facet returns, and what it is given.

A primitive's cost facet describes the *work* one execution of the op does for one block:
bytes at each memory level, tensor-core and CUDA-core operations, synchronization events.
It says nothing about time: turning work into seconds needs the GPU's peaks and the
calibrated coefficients, which is the model's job (`model.py`).  Keeping facets free of
coefficients is what lets a calibration refit the model without re-running any facet.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from cake_core.cost.banks import op_conflict
from cake_core.cost.evaluate import evaluate
from cake_core.ir.symbolic import SymExpr, Var
from cake_core.ir.types import FragmentType, IntType, TileType, Type
from cake_core.verify.register_estimate import PER_WARP_LAYOUTS

if TYPE_CHECKING:
    from cake_core.hardware import ArchSpec, GpuSpec
    from cake_core.ir.kernel import Kernel, Op, Value


#: How the latency of a global read is exposed.
PIPELINED, SERIAL, ONCE = "pipelined", "serial", "once"


MUFU_WEIGHT = 8.0
"""FP32-lane results per multi-function-unit result per clock (128 against 16 per SM on
sm_80 and sm_90): how much longer the MUFU pipe takes for the same number of results."""


@dataclass(frozen=True, slots=True)
class GlobalAccess:
    """Bytes one execution moves between global memory (through L2) and the SM.

    `axes` are the grid axes ("x", "y", "z") the tile's position depends on: blocks that
    differ only along other axes read the same tile, which is what L2 reuse within a wave
    feeds on.  `footprint` is the whole tensor's size, the compulsory traffic bound.
    `latency` says how the round trip is exposed: "pipelined" (up to `depth` iterations in
    flight), "serial" (every execution waits for it) or "once" (one wait per block).
    Serial reads of one loop iteration that share a non-empty `group` (copies completing
    on one mbarrier) are waited for together: one round trip, not one each.  `coords`
    are the tile's coordinate expressions; they let the model count the distinct tiles
    of a wave where the coordinates are computed from a tile index rather than taken
    from `block.x` and friends (persistent kernels).  `multicast` is the number of
    blocks of a cluster one L2 read feeds (TMA multicast): the L2 -> SM traffic of the
    access is its bytes over it.  `tma_load(..., multicast=mask)` fills it in: its `bytes`
    are what lands in the block (one slice from each block of the mask), its L2 reads one
    slice.
    """

    tensor: str
    bytes: float
    axes: frozenset[str]
    footprint: float
    latency: str = SERIAL
    depth: int = 0
    group: str = ""
    coords: tuple[SymExpr, ...] = ()
    multicast: int = 1


@dataclass(frozen=True, slots=True)
class TensorWork:
    """Tensor-core work: FLOPs, input dtype, instruction family and instruction shape."""

    flops: float
    dtype: str
    family: str  # "wgmma" | "mma_sync" | "tcgen05"
    shape: tuple[int, int, int]
    instructions: float


@dataclass(frozen=True, slots=True)
class CostRecord:
    """The work of one execution of an op by one block (all its warps together)."""

    reads: tuple[GlobalAccess, ...] = ()
    writes: tuple[GlobalAccess, ...] = ()
    smem_read: float = 0.0
    smem_write: float = 0.0
    smem_conflict: float = 1.0
    """Wavefronts the shared-memory accesses take per conflict-free wavefront (bank
    conflicts, `cake_core.cost.banks`): their time scales by it, their bytes do not."""
    tensor: TensorWork | None = None
    cuda_ops: float = 0.0
    """CUDA-core operations in FP32-lane issue slots (element-wise ops; a transcendental
    takes one slot, like an add, and its multi-function-unit work is `mufu_ops`)."""
    mufu_ops: float = 0.0
    """Results of the multi-function unit (exp2, log2, rsqrt, reciprocal): a pipe of its
    own beside the FP32 lanes, an eighth as wide; the two overlap, sharing issue slots."""
    sync: tuple[tuple[str, float], ...] = ()
    """Synchronization events as (kind, count); kinds are the keys of the sync latencies."""
    issue: float = 0.0
    """Instructions the issuing role spends on the op beyond the work above."""
    value: int | None = None
    """The runtime int the op yields, as the model prices it (`load_scalar`'s `expect=`):
    later loop bounds and coordinates that use the op's result evaluate with it."""

    @property
    def global_read_bytes(self) -> float:
        return sum(a.bytes for a in self.reads)

    @property
    def global_write_bytes(self) -> float:
        return sum(a.bytes for a in self.writes)

    @property
    def l2_bytes(self) -> float:
        """What crosses the L2 -> SM fabric: multicast reads are fetched once per cluster."""
        return (sum(a.bytes / max(1, a.multicast) for a in self.reads)
                + self.global_write_bytes)


FREE = CostRecord()


@dataclass(slots=True)
class CostContext:
    """What a facet may consult: the kernel, its target, the dims and a few derived facts."""

    kernel: Kernel
    arch: ArchSpec
    gpu: GpuSpec
    env: dict[str, int]
    producers: dict[int, Op] = field(default_factory=dict)
    """id(Value) -> the op that produced it (tiles find their coordinates here)."""
    cp_async_depth: int = 0
    """cp.async groups in flight at a wait inside a loop (0: the copies are waited at once)."""
    load_exposure: dict[int, tuple[str, int]] = field(default_factory=dict)
    """id(tma_load op) -> (latency, depth) read off where the kernel waits for the copy
    (`cake_core.cost.exposure`); without an entry a copy on a pipeline has `stages - 1`
    in flight and one on a raw mbarrier is waited for once."""
    folded_fills: frozenset[int] = frozenset()
    """id(fragment op) of the cleared fragments whose zeros ptxas folds into the wgmma
    that first writes them (`cake_core.ir.uses.folds_into_wgmma`)."""

    def smem_conflict(self, op: Op) -> float:
        """Wavefronts per conflict-free wavefront of the op's shared-memory access (1 for
        accesses the bank model does not follow, or that do not conflict)."""
        c = op_conflict(self.kernel, op)
        return c.ratio if c is not None else 1.0

    def eval(self, expr: SymExpr) -> int:
        return evaluate(expr, self.env)

    def numel(self, t: Type) -> int:
        shape = getattr(t, "shape", ())
        n = 1
        for d in shape:
            n *= self.eval(d)
        return n

    def role_warps(self, op: Op) -> int:
        role = self.kernel.roles.get(op.role) if op.role else None
        return role.warps if role is not None else self.kernel.warps

    def replicas(self, op: Op) -> int:
        """How many times the op's work happens per block: once per warp on per-warp
        fragments (mma.sync operands and accumulators), once per role otherwise."""
        values = [*op.args.values(), *op.results]
        for v in values:
            if isinstance(v.type, FragmentType) and v.type.layout in PER_WARP_LAYOUTS:
                return self.role_warps(op)
        return 1

    def tile_access(self, value: Value, *, latency: str = SERIAL, depth: int = 0,
                    replicas: int = 1, group: str = "") -> GlobalAccess:
        """The global traffic of one access to the tile `value` (a TileType value).

        Bytes are clipped at the tensor's edge on average over a sweep of tiles: a tile
        of `t` along an extent `E` moves E / cdiv(E, t) elements, so a 64-row tile of a
        16-row tensor moves 16 rows, as TMA's zero fill costs no DRAM traffic.
        """
        t = value.type
        assert isinstance(t, TileType)
        nbytes = float(t.dtype.bytes) * replicas
        footprint = float(t.dtype.bytes)
        for tile_d, full_d in zip(t.shape, t.tensor_shape, strict=False):
            tile = self.eval(tile_d)
            try:
                extent = self.eval(full_d)
            except KeyError:
                extent = tile
            footprint *= extent
            nbytes *= extent / max(1, -(-extent // tile)) if extent > 0 else 0.0
        return GlobalAccess(t.tensor, nbytes, self.tile_axes(value), footprint, latency, depth,
                            group, self.tile_coords(value))

    def tile_coords(self, value: Value) -> tuple[SymExpr, ...]:
        """The tile's position expressions (empty when they are not known): its tile
        coordinates, or with `offset=` its element origins `coords * shape + offset`,
        which tell the same tiles apart."""
        op = self.producers.get(id(value))
        if op is None or "coords" not in op.args:
            return ()
        syms = tuple(getattr(e, "sym", None) for e in _elts(op.args["coords"]))
        if any(s is None for s in syms):
            return ()
        offset = op.given("offset")
        if offset is None:
            return syms  # type: ignore[return-value]
        shape = tuple(getattr(e, "sym", None) for e in _elts(op.args["shape"]))
        offs = tuple(getattr(e, "sym", None) for e in _elts(offset))
        if any(s is None for s in (*shape, *offs)) or len(offs) != len(syms):
            return ()  # a run-time offset: the tiles cannot be told apart statically
        return tuple(c * h + o for c, h, o in zip(syms, shape, offs, strict=True))  # type: ignore[operator]

    def tile_axes(self, value: Value) -> frozenset[str]:
        """Grid axes the tile's position depends on (through `block.x` and friends).

        An `offset=` entry counts too.  A run-time one (an int read with `load_scalar`)
        depends on the axes of the index it was read at; an int whose source cannot be
        traced is taken to depend on every axis, so no reuse is assumed for it."""
        op = self.producers.get(id(value))
        if op is None or "coords" not in op.args:
            return frozenset({"x", "y", "z"})
        axes: set[str] = set()
        for e in _elts(op.args["coords"]):
            sym = getattr(e, "sym", None)
            if sym is not None:
                axes |= _sym_axes(sym)
        offset = op.given("offset")
        if offset is not None:
            for e in _elts(offset):
                axes |= self._offset_axes(e, 0)
        return frozenset(a for a in axes if a in ("x", "y", "z"))

    def _offset_axes(self, e: object, depth: int) -> set[str]:
        sym = getattr(e, "sym", None)
        if sym is not None:
            return _sym_axes(sym)
        if not isinstance(getattr(e, "type", None), IntType):
            return set()
        src = self.producers.get(id(e))
        if src is None or "index" not in src.args or depth > 4:
            return {"x", "y", "z"}
        out: set[str] = set()
        for i in _elts(src.args["index"]):
            out |= self._offset_axes(i, depth + 1)
        return out


def _elts(v: Value) -> tuple[object, ...]:
    return v.const if isinstance(v.const, tuple) else (v,)


def _sym_axes(sym: SymExpr) -> set[str]:
    return {atom.name.split(".", 1)[1] for atom in _atoms_deep(sym)
            if isinstance(atom, Var) and atom.name.startswith(("block.", "cluster."))}


def _atoms_deep(e: SymExpr) -> set[SymExpr]:
    """Atoms including those inside loop variables' starts (`k` starting at `block.x`, a
    persistent tile loop: blocks walk different tiles).  A loop's end is left out: blocks
    whose loops differ only in how far they go (causal attention's key loop stops at each
    query tile's diagonal) walk prefixes of the same tiles, and share them."""
    out: set[SymExpr] = set()
    stack = [e]
    while stack:
        x = stack.pop()
        for a in x.atoms():
            if a in out:
                continue
            out.add(a)
            if isinstance(a, Var) and a.lo is not None:
                stack.append(a.lo)
    return out
