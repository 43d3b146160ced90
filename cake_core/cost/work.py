"""The per-op walk of the cost model: what a kernel does, before any coefficient.

`profile(kernel, dims, gpu)` walks the kernel once and records, per op, the work of one
execution (its cost facet), how often a block executes it (the product of the trip counts
of its loops, evaluated with the dims), which phase it belongs to (prologue / steady loop /
epilogue), and the grid's waves with the L2 reuse each global read gets inside a wave.  A
persistent kernel is profiled as the one-block-per-tile launch its tile loop replaces
(`persistent.py`): executions per tile, waves of tiles.  Nothing in a profile depends on a
coefficient, so calibration refits coefficients without walking kernels again
(`timing.py` turns a profile into seconds).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TypeGuard

from cake_core.cost.evaluate import MissingDimError, dims_needed, evaluate
from cake_core.cost.exposure import load_exposure
from cake_core.cost.persistent import TileLoops, distinct_tiles, find_tile_loops
from cake_core.cost.record import FREE, CostContext, CostRecord, GlobalAccess
from cake_core.cost.resources import ResourceReport, resource_report
from cake_core.hardware import ArchSpec, GpuSpec, default_gpu, get_arch
from cake_core.ir.kernel import ForOp, IfOp, Kernel, Node, Op, Role
from cake_core.ir.symbolic import SM_COUNT, SymExpr, Var
from cake_core.ir.types import IntType
from cake_core.ir.uses import declarations, first_use, folds_into_wgmma
from cake_core.primitives.facets import FacetError, Unsupported
from cake_core.verify.register_estimate import ALL_WARPS
from cake_core.verify.unroll import condition_leaves, truth

_MAX_SHARE = 1 << 14
"""Most loop-variable combinations a branch share is counted over."""

STEADY, PROLOGUE, EPILOGUE = "steady", "prologue", "epilogue"
_AXES = ("x", "y", "z")


class CostError(Exception):
    """A kernel the model cannot price as asked (missing dims, a block that does not fit)."""


@dataclass(slots=True)
class OpWork:
    op: Op
    line: int
    """0-based source line of the op."""
    role: str
    phase: str
    execs: float
    """Executions per block."""
    loop: int | None
    """Index of the innermost enclosing loop (latency is grouped per loop)."""
    record: CostRecord
    per_block: bool = False
    """Outside the tile loop of a persistent kernel: done once per block, not per tile."""


@dataclass(slots=True)
class WaveShape:
    """`count` waves of `blocks` blocks, with `per_sm` blocks on the busiest SM."""

    blocks: int
    count: int
    per_sm: int
    read_model: list[float]
    """Per op: DRAM bytes of its reads in this wave if nothing stays in L2 across waves
    (tiles shared by the wave's blocks are fetched once)."""


@dataclass(slots=True)
class KernelProfile:
    kernel: Kernel
    gpu: GpuSpec
    arch: ArchSpec
    dims: dict[str, int]
    grid: tuple[int, ...]
    blocks: int
    resources: ResourceReport
    ops: list[OpWork]
    loop_execs: list[float]
    loop_lines: list[int]
    waves: list[WaveShape]
    tensors: dict[str, tuple[float, list[int]]]
    """Tensor -> (bytes the kernel touches at least once, indices of ops reading it)."""
    warnings: list[str] = field(default_factory=list)
    units: int = -1
    """Units of work the waves are made of: the blocks, or the tiles of a persistent
    kernel (its virtual grid); -1 stands for `blocks`."""
    tile_loops: TileLoops | None = None

    def __post_init__(self) -> None:
        if self.units < 0:
            self.units = self.blocks

    def scale(self, w: OpWork) -> int:
        """How many times the kernel runs `w`'s executions: per block or per tile."""
        return self.blocks if w.per_block else self.units

    @property
    def blocks_per_sm(self) -> int:
        return self.resources.occupancy.blocks


def resolve_gpu(arch: str, gpu: GpuSpec | None) -> tuple[GpuSpec, ArchSpec]:
    """The GPU to price on and the arch whose limits apply (the GPU's own)."""
    spec = get_arch(arch)
    if spec is None:
        raise CostError(f"unknown architecture {arch!r}")
    g = gpu or default_gpu(spec.name)
    gspec = get_arch(g.arch)
    assert gspec is not None
    if spec.name.endswith("a") and spec.name != gspec.name:
        raise CostError(f"{spec.name} code runs only on {spec.name} GPUs; {g.name} is "
                        f"{gspec.name}")
    if spec.compute_capability > gspec.compute_capability:
        raise CostError(f"{g.name} ({gspec.name}) cannot run {spec.name} code")
    return g, gspec


def _launch_dims(kernel: Kernel) -> set[str]:
    """Every dim the grid, the loop bounds and the tensors' extents use."""
    exprs: list[SymExpr] = list(kernel.grid)
    for n in kernel.walk():
        if isinstance(n, ForOp):
            exprs += [n.start, n.stop, n.step]
    for p in kernel.params:
        exprs += list(getattr(p.value.type, "shape", ()))
    return dims_needed(exprs)


def required_dims(kernel: Kernel) -> list[str]:
    """Dims a prediction needs: the grid's, the loop bounds' and the tensors' extents
    (`sm_count()` apart: the target GPU supplies it)."""
    return sorted(_launch_dims(kernel) - {SM_COUNT})


def profile(kernel: Kernel, dims: Mapping[str, int], gpu: GpuSpec | None = None,
            *, arch: str | None = None) -> KernelProfile:
    """Walk `kernel` once with the given dims; raises CostError when it cannot be priced."""
    gpu_spec, arch_spec = resolve_gpu(arch or kernel.arch, gpu)
    env = {k: int(v) for k, v in dims.items()}
    if SM_COUNT not in env and SM_COUNT in _launch_dims(kernel):
        env[SM_COUNT] = gpu_spec.sms  # `sm_count()`: the target GPU's, unless pinned
    missing = [d for d in required_dims(kernel) if d not in env]
    if missing:
        raise CostError(f"--dims needs a value for {', '.join(missing)}")
    warnings = _dim_warnings(kernel, env)
    try:
        grid = tuple(max(0, evaluate(g, env)) for g in kernel.grid)
    except (MissingDimError, ZeroDivisionError) as exc:
        raise CostError(f"cannot evaluate the grid: {exc}") from exc
    blocks = math.prod(grid) if grid else 1
    resources = resource_report(kernel, arch_spec)
    if resources.occupancy.blocks == 0:
        raise CostError(f"no block of {kernel.name} fits on an SM of {gpu_spec.name} "
                        f"(limited by {resources.occupancy.limited_by}): "
                        + "; ".join(resources.warnings))
    ctx = CostContext(kernel, arch_spec, gpu_spec, env, _producers(kernel),
                      _cp_async_depth(kernel), load_exposure(kernel), _folded_fills(kernel))
    tiles = find_tile_loops(kernel, env, grid)
    walker = _Walker(ctx, tiles)
    walker.body(kernel.body, ALL_WARPS, 1.0, None, top=True)
    for role in kernel.roles.values():
        walker.body(role.body, role.name, 1.0, None, top=True)
    warnings += walker.warnings
    gx, gy, gz = (*grid, 1, 1, 1)[:3]
    # waves of blocks; a persistent kernel's are waves of tiles, as many as run at once
    per_wave = gpu_spec.sms * resources.occupancy.blocks
    units = blocks
    if tiles is not None:
        units, per_wave = tiles.tiles, min(per_wave, blocks)
    shapes: list[tuple[int, int]] = []
    if units:
        full, tail = divmod(units, per_wave)
        if full:
            shapes.append((per_wave, full))
        if tail:
            shapes.append((tail, 1))
    waves = []
    seen: dict[tuple[object, ...], float] = {}
    for nblocks, count in shapes:
        model = [sum(a.bytes * _wave_tiles(a, w, nblocks, (gx, gy, gz), tiles, env, seen)
                     for a in w.record.reads) * w.execs for w in walker.ops]
        per_sm = min(resources.occupancy.blocks, -(-nblocks // gpu_spec.sms))
        waves.append(WaveShape(nblocks, count, per_sm, model))
    tensors: dict[str, tuple[float, list[int]]] = {}
    for i, w in enumerate(walker.ops):
        for a in w.record.reads:
            touched, idx = tensors.get(a.tensor, (0.0, []))
            touched += a.bytes * w.execs * (blocks if w.per_block else units)
            if i not in idx:
                idx.append(i)
            tensors[a.tensor] = (touched, idx)
    footprints = {a.tensor: a.footprint for w in walker.ops for a in w.record.reads}
    tensors = {t: (min(b, footprints[t]), idx) for t, (b, idx) in tensors.items()}
    return KernelProfile(kernel, gpu_spec, arch_spec, env, grid, blocks, resources,
                         walker.ops, walker.loop_execs, walker.loop_lines, waves, tensors,
                         warnings, units, tiles)


def cost_context(kernel: Kernel, dims: Mapping[str, int], gpu: GpuSpec | None = None
                 ) -> CostContext:
    """What the cost facets of `kernel` see for these dims (for tools and tests)."""
    gpu_spec, arch_spec = resolve_gpu(kernel.arch, gpu)
    return CostContext(kernel, arch_spec, gpu_spec, {k: int(v) for k, v in dims.items()},
                       _producers(kernel), _cp_async_depth(kernel),
                       load_exposure(kernel), _folded_fills(kernel))


def _dim_warnings(kernel: Kernel, env: dict[str, int]) -> list[str]:
    out = []
    for name, d in kernel.dims.items():
        if name not in env:
            continue
        v = env[name]
        if d.max is not None and v > d.max:
            out.append(f"{name}={v} exceeds the declared max={d.max}")
        if d.multiple_of > 1 and v % d.multiple_of:
            out.append(f"{name}={v} is not a multiple of {d.multiple_of} as declared")
    unknown = sorted(set(env) - set(kernel.dims) - {SM_COUNT})  # the GPU's, never declared
    if unknown:
        out.append(f"unused dims: {', '.join(unknown)}")
    return out


def _folded_fills(kernel: Kernel) -> frozenset[int]:
    return frozenset(id(d) for d, rest in declarations(kernel)
                     if folds_into_wgmma(first_use(d, rest)))


def _producers(kernel: Kernel) -> dict[int, Op]:
    return {id(r): op for op in kernel.ops() for r in op.results}


def _cp_async_depth(kernel: Kernel) -> int:
    """cp.async groups in flight when a loop waits: `n + 1` for the deepest
    `cp_async_wait(n)` inside a loop, 0 when the loops wait for everything (n == 0)."""
    depth = 0

    def visit(nodes: list[Node], in_loop: bool) -> None:
        nonlocal depth
        for n in nodes:
            if isinstance(n, Op) and in_loop and n.prim.effects.waits == "cp_async":
                sym = n.args["n"].sym
                k = sym.const if sym is not None else None
                if k:
                    depth = max(depth, k + 1)
            elif isinstance(n, ForOp):
                visit(n.body, True)
            elif isinstance(n, Role):
                visit(n.body, in_loop)
            elif isinstance(n, IfOp):
                visit(n.then, in_loop)
                visit(n.orelse, in_loop)

    visit(kernel.body, False)
    return depth


def _wave_tiles(a: GlobalAccess, w: OpWork, wave: int, grid: tuple[int, int, int],
                tiles: TileLoops | None, env: Mapping[str, int],
                seen: dict[tuple[object, ...], float]) -> float:
    """Distinct tiles of access `a` among the `wave` units (blocks or tiles) of a wave;
    tiles of a persistent kernel are counted on their coordinates (`seen` caches them)."""
    if tiles is not None and not w.per_block and a.coords:
        key = (a.coords, wave)
        if key not in seen:
            n = distinct_tiles(a.coords, tiles, wave, env)
            seen[key] = _distinct(a.axes, wave, grid) if n is None else n
        return seen[key]
    return _distinct(a.axes, wave, grid)


def _distinct(axes: frozenset[str], wave: int, grid: tuple[int, int, int]) -> float:
    """Distinct tiles among `wave` consecutive blocks (x fastest) for a tile that depends
    on `axes`: blocks that agree on those axes share one tile."""
    gx, gy, gz = grid
    span = {"x": min(gx, wave), "y": min(gy, -(-wave // max(1, gx))),
            "z": min(gz, -(-wave // max(1, gx * gy)))}
    n = 1
    for a in _AXES:
        if a in axes:
            n *= span[a]
    return float(min(wave, n))


def _block_var(a: SymExpr) -> TypeGuard[Var]:
    """A block index with a known range (`block.x` in [0, grid.x)): what the walker counts
    block by block."""
    return isinstance(a, Var) and a.name.startswith("block.") and a.lo is not None \
        and a.hi is not None


def _count_true(node: IfOp, env: dict[str, int], loops: list[tuple[str, range]]
                ) -> tuple[int, int] | None:
    """(iterations where `node`'s condition holds, iterations) over every combination of
    the loop variables' values; None when the condition cannot be evaluated."""
    hits = total = 0
    for values in itertools.product(*(r for _, r in loops)):
        env.update(zip((v for v, _ in loops), values, strict=True))
        t = truth(node.cond, env)
        if t is None:
            return None
        hits, total = hits + t, total + 1
    return hits, total


class _Walker:
    """Collects OpWork in program order with executions per block (per tile inside the
    tile loop of a persistent kernel) and phases."""

    def __init__(self, ctx: CostContext, tiles: TileLoops | None = None) -> None:
        self.ctx = ctx
        self.tiles = tiles
        self.ops: list[OpWork] = []
        self.loop_execs: list[float] = []
        self.loop_lines: list[int] = []
        self.warnings: list[str] = []
        self._missing: set[str] = set()
        self._runtime_ints: set[str] = set()
        """Op results that are ints known only at run time and priced at no value."""
        self._priced_ints: dict[str, int] = {}
        """Op results that are ints known only at run time, with the value they are priced
        at (`load_scalar(..., expect=...)`): a branch on one is decided at that value, as
        a loop bound on one is."""
        self._in_tile = 0
        self._loops: list[tuple[str, range]] = []
        """The enclosing loops' variables and iterations (when their bounds evaluate)."""
        self._loop_nodes: list[ForOp] = []
        """The enclosing loops themselves, to re-evaluate their bounds block by block."""

    def body(self, nodes: list[Node], role: str, execs: float, loop: int | None, *,
             top: bool = False) -> None:
        first_loop = next((i for i, n in enumerate(nodes) if isinstance(n, ForOp)), len(nodes))
        for i, n in enumerate(nodes):
            phase = STEADY if not top else (PROLOGUE if i < first_loop else EPILOGUE)
            if isinstance(n, Role):
                continue  # walked on its own, under its name
            if isinstance(n, ForOp) and self.tiles is not None and id(n) in self.tiles.loops:
                # one iteration is one tile, the unit of the virtual grid: its body is
                # priced like the body of a one-block-per-tile kernel
                self.loop_execs.append(execs)
                self.loop_lines.append(n.span.start.line)
                self._in_tile += 1
                self.body(n.body, role, execs, None, top=True)
                self._in_tile -= 1
            elif isinstance(n, ForOp):
                try:
                    trips = self._trips(n.trip_count)
                except (MissingDimError, ZeroDivisionError) as exc:
                    why = str(exc)
                    if isinstance(exc, MissingDimError) and exc.name in self._runtime_ints:
                        why = (f"`{exc.name}` is read from memory at run time; give its "
                               "load an `expect=` value to price it at")
                    raise CostError(f"cannot evaluate the trip count of the loop at line "
                                    f"{n.span.start.line + 1}: {why}") from exc
                self.loop_execs.append(execs * trips)
                self.loop_lines.append(n.span.start.line)
                var = n.var.sym.name if isinstance(n.var.sym, Var) else n.var.name
                self._loops.append((var, self._iterations(n)))
                self._loop_nodes.append(n)
                self.body(n.body, role, execs * trips, len(self.loop_execs) - 1)
                self._loops.pop()
                self._loop_nodes.pop()
            elif isinstance(n, IfOp):
                share = self._share(n)
                if share > 0:
                    self._branch(n.then, role, execs * share, loop, top, phase)
                if share < 1:
                    self._branch(n.orelse, role, execs * (1 - share), loop, top, phase)
            elif isinstance(n, Op):
                self.op(n, role, execs, loop, phase)

    def _trips(self, count: SymExpr) -> float:
        """The trip count of a loop, averaged over the blocks when it depends on the block
        index.

        A loop bound on `block.x` (causal attention walks the key tiles up to its diagonal
        only) runs a different number of times in every block; the grid's time is the sum
        of its blocks' work spread over the SMs, so what a block costs on average is the
        mean trip count, not the middle block's (a `min` or a `cdiv` makes the two differ)
        nor the longest block's.  Past `_MAX_SHARE` block combinations the middle of each
        range stands in (`evaluate`)."""
        blocks = sorted({a for a in count.atoms() if _block_var(a)
                         and a.name not in self.ctx.env}, key=lambda v: v.name)
        if not blocks:
            return float(max(0, evaluate(count, self.ctx.env)))
        ranges = self._block_ranges(blocks)
        if not all(ranges) or math.prod(len(r) for r in ranges) > _MAX_SHARE:
            return float(max(0, evaluate(count, self.ctx.env)))
        env = dict(self.ctx.env)
        total = 0
        for values in itertools.product(*ranges):
            env.update(zip((v.name for v in blocks), values, strict=True))
            total += max(0, evaluate(count, env))
        return total / math.prod(len(r) for r in ranges)

    def _block_ranges(self, blocks: list[Var]) -> list[range]:
        """The values each block index takes at these launch sizes."""
        return [range(evaluate(v.lo, self.ctx.env), evaluate(v.hi, self.ctx.env))  # type: ignore[arg-type]
                for v in blocks]

    def _iterations(self, loop: ForOp, env: Mapping[str, int] | None = None) -> range:
        env = self.ctx.env if env is None else env
        try:
            return range(*(evaluate(x, env) for x in (loop.start, loop.stop, loop.step)))
        except (MissingDimError, ZeroDivisionError, ValueError):
            return range(0)  # bounds that depend on an outer loop: no exact share below

    def _share(self, node: IfOp) -> float:
        """The share of its executions in which a runtime `if` takes its `then` side.

        A condition on dims is decided by the launch sizes (a tail peeled by the parity of
        a trip count prices only the tail that runs); one on enclosing loop variables is
        counted over their iterations (`if k + 1 < n` runs n - 1 times in n), and over the
        blocks too when it names the block index (`_block_share`).  Any other (a lane, a
        scalar parameter) counts both sides in full: an upper bound."""
        if node.elected:
            return 1.0
        names: set[str] = set()
        blocks: dict[str, Var] = {}
        for leaf in condition_leaves(node.cond):
            if not isinstance(leaf, SymExpr):
                return 1.0
            for a in leaf.atoms():
                if isinstance(a, Var):
                    names.add(a.name)
                    if _block_var(a):
                        blocks[a.name] = a
        if any(v not in blocks and v not in self._priced_ints
               for v in names - {v for v, _ in self._loops}):
            return 1.0
        for (v, _), n in zip(self._loops, self._loop_nodes, strict=True):
            if v in names:  # a loop whose bounds depend on the block: count block by block
                for bound in (n.start, n.stop, n.step):
                    blocks.update((a.name, a) for a in bound.atoms()
                                  if _block_var(a) and a.name not in self.ctx.env)
        if blocks:
            return self._block_share(node, names, list(blocks.values()))
        env = self._condition_env()
        loops = [(v, r) for v, r in self._loops if v in names]
        if math.prod(len(r) for _, r in loops) > _MAX_SHARE:
            return 1.0
        counted = _count_true(node, env, loops)
        if counted is None:
            return 1.0
        hits, total = counted
        return hits / total if total else 1.0

    def _condition_env(self) -> dict[str, int]:
        """What a condition is evaluated under: the dims (keyed `$NAME`) and the priced
        runtime ints (keyed by name, as their variables are)."""
        env: dict[str, int] = {"$" + k: int(v) for k, v in self.ctx.env.items()}
        env.update(self._priced_ints)
        return env

    def _block_share(self, node: IfOp, names: set[str], blocks: list[Var]) -> float:
        """`_share` of a condition on the block index (`if j >= 2 * qt` masks only the
        diagonal key tiles of causal attention): its hits over every block's iterations of
        the enclosing loops, whose bounds may depend on the block as well, over all those
        iterations.  That matches executions priced with the mean trip count (`_trips`).
        Past `_MAX_SHARE` combinations both sides count in full: an upper bound."""
        try:
            ranges = self._block_ranges(blocks)
        except (MissingDimError, ZeroDivisionError):
            return 1.0
        if math.prod(len(r) for r in ranges) > _MAX_SHARE:
            return 1.0
        hits = total = 0
        for bvalues in itertools.product(*ranges):
            benv = dict(self.ctx.env)
            benv.update(zip((v.name for v in blocks), bvalues, strict=True))
            loops = [(v, self._iterations(n, benv))
                     for (v, _), n in zip(self._loops, self._loop_nodes, strict=True)
                     if v in names]
            if total + math.prod(len(r) for _, r in loops) > 4 * _MAX_SHARE:
                return 1.0
            env = self._condition_env()
            env.update(zip((v.name for v in blocks), bvalues, strict=True))
            counted = _count_true(node, env, loops)
            if counted is None:
                return 1.0
            hits, total = hits + counted[0], total + counted[1]
        return hits / total if total else 1.0

    def _branch(self, nodes: list[Node], role: str, execs: float, loop: int | None,
                top: bool, phase: str) -> None:
        """One side of a runtime `if`, `execs` times (see `_share`)."""
        if top:
            for n in nodes:
                if isinstance(n, Op):
                    self.op(n, role, execs, loop, phase)
                else:
                    self.body([n], role, execs, loop)
        else:
            self.body(nodes, role, execs, loop)

    def op(self, op: Op, role: str, execs: float, loop: int | None, phase: str) -> None:
        try:
            facet = op.prim.facet("cost")
        except FacetError as exc:
            raise CostError(f"`{op.prim.key}`: {exc}") from exc
        if isinstance(facet, Unsupported):
            if op.prim.key not in self._missing:
                self._missing.add(op.prim.key)
                self.warnings.append(f"`{op.prim.key}` has no cost model ({facet.why}); "
                                     "counted as free")
            record = FREE
        else:
            try:
                record = facet(op, self.ctx)
            except MissingDimError as exc:
                raise CostError(f"--dims needs a value for {exc.name}") from exc
        if op.results and isinstance(op.results[0].type, IntType):
            name = op.results[0].name
            if record.value is not None:
                self.ctx.env[name] = record.value
                self._priced_ints[name] = record.value
            else:
                self._runtime_ints.add(name)
        per_block = self.tiles is not None and not self._in_tile
        if per_block and phase == STEADY:
            phase = PROLOGUE  # a loop outside the tile loop runs once per block
        self.ops.append(OpWork(op, op.span.start.line, op.role or role, phase, execs, loop,
                               record, per_block))
