"""The analytical time model: cost facets + hardware peaks + coefficients -> seconds.

Two steps, so that calibration can refit coefficients without re-walking kernels:

`profile(kernel, dims, gpu)` walks the kernel once and records, per op, the work of one
execution (its cost facet), how often a block executes it (the product of the trip counts
of its loops, evaluated with the dims), which phase it belongs to (prologue / steady loop /
epilogue), and the grid's waves with the L2 reuse each global read gets inside a wave.  A
persistent kernel is profiled as the one-block-per-tile launch its tile loop replaces
(`persistent.py`): executions per tile, waves of tiles.  Nothing in a profile depends on a
coefficient.

`estimate(profile, coefficients)` turns that into time.  Per wave of resident blocks:

- steady state = the largest of: tensor-core time, CUDA-core time, shared-memory and
  L2->SM bandwidth (each summed over the blocks sharing an SM), DRAM time of the wave's
  distinct bytes, the pipeline latency bound (an iteration cannot be shorter than the
  memory round trip divided by the iterations in flight, `stages - 1`), and each role's
  own chain of compute, synchronization and issue (roles overlap, a role does not overlap
  itself);
- plus what cannot overlap: the pipeline fill (one round trip and the first stage; only
  once for a persistent kernel whose producer runs ahead across tiles), loads every
  iteration waits for (`exposure.py` says which), the prologue and epilogue ops (those
  outside a persistent kernel's tile loop once per block);
- waves run one after another (the last one possibly partial: the tail), and the launch
  overhead comes once.

Every second of the total is attributed to the ops (and so to source lines) that caused
it, and to a category: compute, memory, latency, sync or launch; the largest category is
the bottleneck.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from cake_core.cost.calibration import UNCALIBRATED, Calibration, default_coefficients
from cake_core.cost.evaluate import MissingDimError, dims_needed, evaluate
from cake_core.cost.exposure import load_exposure
from cake_core.cost.persistent import TileLoops, distinct_tiles, find_tile_loops
from cake_core.cost.record import (
    FREE,
    ONCE,
    PIPELINED,
    SERIAL,
    CostContext,
    CostRecord,
    GlobalAccess,
)
from cake_core.cost.resources import ALL_WARPS, ResourceReport, resource_report
from cake_core.hardware import ArchSpec, GpuSpec, default_gpu, get_arch
from cake_core.ir.kernel import ForOp, IfOp, Kernel, Node, Op, Role
from cake_core.ir.symbolic import SymExpr
from cake_core.primitives.facets import FacetError, Unsupported

STEADY, PROLOGUE, EPILOGUE = "steady", "prologue", "epilogue"
CATEGORIES = ("compute", "memory", "latency", "sync", "launch")
_AXES = ("x", "y", "z")


class CostError(Exception):
    """A kernel the model cannot price as asked (missing dims, a block that does not fit)."""


# --- profile --------------------------------------------------------------------------------
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
        return self.resources.occupancy.blocks_per_sm


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


def required_dims(kernel: Kernel) -> list[str]:
    """Dims a prediction needs: the grid's, the loop bounds' and the tensors' extents."""
    exprs: list[SymExpr] = list(kernel.grid)
    for n in kernel.walk():
        if isinstance(n, ForOp):
            exprs += [n.start, n.stop, n.step]
    for p in kernel.params:
        exprs += list(getattr(p.value.type, "shape", ()))
    return sorted(dims_needed(exprs))


def profile(kernel: Kernel, dims: Mapping[str, int], gpu: GpuSpec | None = None,
            *, arch: str | None = None) -> KernelProfile:
    """Walk `kernel` once with the given dims; raises CostError when it cannot be priced."""
    gpu_spec, arch_spec = resolve_gpu(arch or kernel.arch, gpu)
    env = {k: int(v) for k, v in dims.items()}
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
    if resources.occupancy.blocks_per_sm == 0:
        raise CostError(f"no block of {kernel.name} fits on an SM of {gpu_spec.name} "
                        f"(limited by {resources.occupancy.limited_by}): "
                        + "; ".join(resources.warnings))
    ctx = CostContext(kernel, arch_spec, gpu_spec, env, _producers(kernel),
                      _cp_async_depth(kernel), load_exposure(kernel))
    tiles = find_tile_loops(kernel, env, grid)
    walker = _Walker(ctx, tiles)
    walker.body(kernel.body, ALL_WARPS, 1.0, None, top=True)
    for role in kernel.roles.values():
        walker.body(role.body, role.name, 1.0, None, top=True)
    warnings += walker.warnings
    gx, gy, gz = (*grid, 1, 1, 1)[:3]
    # waves of blocks; a persistent kernel's are waves of tiles, as many as run at once
    per_wave = gpu_spec.sms * resources.occupancy.blocks_per_sm
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
        per_sm = min(resources.occupancy.blocks_per_sm, -(-nblocks // gpu_spec.sms))
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
                       load_exposure(kernel))


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
    unknown = sorted(set(env) - set(kernel.dims))
    if unknown:
        out.append(f"unused dims: {', '.join(unknown)}")
    return out


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
        self._in_tile = 0

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
                    trips = max(0, evaluate(n.trip_count, self.ctx.env))
                except (MissingDimError, ZeroDivisionError) as exc:
                    raise CostError(f"cannot evaluate the trip count of the loop at line "
                                    f"{n.span.start.line + 1}: {exc}") from exc
                self.loop_execs.append(execs * trips)
                self.loop_lines.append(n.span.start.line)
                self.body(n.body, role, execs * trips, len(self.loop_execs) - 1)
            elif isinstance(n, IfOp):
                self._branch(n.then, role, execs, loop, top, phase)
                self._branch(n.orelse, role, execs, loop, top, phase)
            elif isinstance(n, Op):
                self.op(n, role, execs, loop, phase)

    def _branch(self, nodes: list[Node], role: str, execs: float, loop: int | None,
                top: bool, phase: str) -> None:
        """Both sides of a runtime `if` are counted in full: an upper bound."""
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
        per_block = self.tiles is not None and not self._in_tile
        if per_block and phase == STEADY:
            phase = PROLOGUE  # a loop outside the tile loop runs once per block
        self.ops.append(OpWork(op, op.span.start.line, op.role or role, phase, execs, loop,
                               record, per_block))


# --- estimate -----------------------------------------------------------------------------
@dataclass(slots=True)
class LineShare:
    line: int
    """1-based source line."""
    share: float
    seconds: float
    category: str
    ops: list[str]


@dataclass(slots=True)
class Prediction:
    kernel: str
    target: str
    """The arch the kernel was compiled for (`arch` is the GPU's)."""
    arch: str
    gpu: str
    dims: dict[str, int]
    calibration: str
    seconds: float
    tensor_flops: float
    cuda_ops: float
    roofline_seconds: float
    bottleneck: str
    bottleneck_detail: str
    categories: dict[str, float]
    terms: dict[str, float]
    work: dict[str, float]
    grid: tuple[int, ...]
    blocks: int
    blocks_per_sm: int
    waves: float
    resources: ResourceReport
    lines: list[LineShare]
    warnings: list[str]

    @property
    def tflops(self) -> float:
        return self.tensor_flops / self.seconds / 1e12 if self.seconds > 0 else 0.0

    @property
    def roofline_fraction(self) -> float:
        return self.roofline_seconds / self.seconds if self.seconds > 0 else 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "kernel": self.kernel,
            "target": self.target,
            "arch": self.arch,
            "gpu": self.gpu,
            "dims": dict(self.dims),
            "calibration": self.calibration,
            "time_s": self.seconds,
            "tflops": self.tflops,
            "roofline_fraction": self.roofline_fraction,
            "roofline_s": self.roofline_seconds,
            "bottleneck": self.bottleneck,
            "bottleneck_detail": self.bottleneck_detail,
            "categories": dict(self.categories),
            "terms": dict(self.terms),
            "work": dict(self.work),
            "grid": list(self.grid),
            "blocks": self.blocks,
            "blocks_per_sm": self.blocks_per_sm,
            "waves": self.waves,
            "resources": self.resources.to_json(),
            "lines": [{"line": ln.line, "share": ln.share, "time_s": ln.seconds,
                       "category": ln.category, "ops": list(ln.ops)} for ln in self.lines],
            "warnings": list(self.warnings),
        }


@dataclass(slots=True)
class _Rates:
    clock: float
    sms: int
    hbm: float
    l2_sm: float
    smem_sm: float
    cuda_sm: float
    l_dram: float
    l_l2: float


def _tensor_rate(p: KernelProfile, c: Mapping[str, float], dtype: str, family: str,
                 n: int) -> float:
    gpu = p.gpu
    peak = gpu.tensor_peak.get(dtype) or gpu.tensor_peak.get("bf16") or 1e12
    eff = c.get(f"tensor_efficiency.{family}", 0.5)
    ach = gpu.achievable
    if dtype in ach and "bf16" in ach and dtype not in ("bf16", "f16"):
        eff *= ach[dtype] / ach["bf16"]
    if family == "wgmma":
        h = c["tensor_n_half"]
        eff *= (n / (n + h)) / (256 / (256 + h))
    return peak / gpu.sms * max(eff, 1e-6)


def _sync_seconds(rec: CostRecord, c: Mapping[str, float]) -> float:
    scale = c["sync_scale"]
    return sum(cnt * c.get(f"sync_ns.{kind}", 10.0) for kind, cnt in rec.sync) * scale * 1e-9


class _OpTimes:
    """Per-op, per-execution times under one set of coefficients (seconds, one block)."""

    __slots__ = ("cuda", "issue", "l2", "smem", "sync", "tc")

    def __init__(self, p: KernelProfile, w: OpWork, c: Mapping[str, float], r: _Rates) -> None:
        rec = w.record
        self.tc = 0.0
        if rec.tensor is not None:
            t = rec.tensor
            self.tc = t.flops / _tensor_rate(p, c, t.dtype, t.family, t.shape[1])
        self.cuda = rec.cuda_ops / r.cuda_sm
        # bank conflicts: an n-way conflicted access moves its bytes in n wavefronts
        self.smem = (rec.smem_read + rec.smem_write) * rec.smem_conflict / r.smem_sm
        self.l2 = (rec.global_read_bytes + rec.global_write_bytes) / r.l2_sm
        self.sync = _sync_seconds(rec, c)
        self.issue = rec.issue * c["issue_ns"] * 1e-9


def estimate(p: KernelProfile, coefficients: Mapping[str, float] | None = None,
             calibration: Calibration | None = None) -> Prediction:
    """Price a profile.  `coefficients` override the GPU's defaults; a `calibration`
    (applied first) names itself in the prediction."""
    c = default_coefficients(p.gpu)
    name = UNCALIBRATED
    if calibration is not None:
        c = calibration.apply(c)
        name = calibration.name
    if coefficients:
        c.update(coefficients)
    gpu = p.gpu
    r = _Rates(
        clock=gpu.clock_hz, sms=gpu.sms,
        hbm=gpu.hbm_bandwidth * c["hbm_efficiency"],
        l2_sm=c["l2_bytes_per_clk_sm"] * gpu.clock_hz,
        smem_sm=c["smem_bytes_per_clk_sm"] * gpu.clock_hz,
        cuda_sm=gpu.fp32_peak / 2 / gpu.sms * c["cuda_efficiency"],
        l_dram=c["dram_latency_ns"] * 1e-9, l_l2=c["l2_latency_ns"] * 1e-9)
    times = [_OpTimes(p, w, c, r) for w in p.ops]
    n = len(p.ops)
    contrib: list[dict[str, float]] = [{} for _ in range(n)]
    cat_total = dict.fromkeys(CATEGORIES, 0.0)
    terms_total: dict[str, float] = {}

    def credit(i: int, cat: str, secs: float) -> None:
        if secs > 0:
            contrib[i][cat] = contrib[i].get(cat, 0.0) + secs
            cat_total[cat] += secs

    def spread(idx: list[int], weights: list[float], cat: str, secs: float) -> None:
        tot = sum(weights)
        if secs <= 0:
            return
        if tot <= 0:
            if idx:
                for i in idx:
                    credit(i, cat, secs / len(idx))
            else:
                cat_total[cat] += secs
            return
        for i, wgt in zip(idx, weights, strict=True):
            credit(i, cat, secs * wgt / tot)

    # DRAM bytes per op and wave: tensors small enough to stay in L2 are read once in all
    dram_reads = _dram_reads(p, c)
    reads_total = sum(w.record.global_read_bytes * w.execs * p.scale(w) for w in p.ops)
    dram_total = sum(sum(d[i] for i in range(n)) * ws.count
                     for d, ws in zip(dram_reads, p.waves, strict=True))
    # a round trip is an L2 hit for tensors that stay resident, a DRAM access otherwise
    resident = {t for t, (touched, _) in p.tensors.items()
                if touched <= c["l2_resident_fraction"] * gpu.l2_bytes}
    op_latency = [max((r.l_l2 if a.tensor in resident else r.l_dram for a in w.record.reads),
                      default=r.l_dram) for w in p.ops]

    steady = [i for i, w in enumerate(p.ops) if w.phase == STEADY]
    serial_ops = [i for i, w in enumerate(p.ops) if w.phase != STEADY]
    roles = sorted({p.ops[i].role for i in steady})
    pipelined_loops = _pipelined_loops(p)
    ahead = _runs_ahead(p)
    waited_groups = _waited_groups(p)

    total = 0.0
    for ws, dram in zip(p.waves, dram_reads, strict=True):
        b = ws.per_sm
        writes = [w.record.global_write_bytes * w.execs
                  * (min(ws.blocks, p.blocks) if w.per_block else ws.blocks) for w in p.ops]
        term: dict[str, tuple[float, list[int], list[float], str]] = {}
        tc_w = [times[i].tc * p.ops[i].execs for i in steady]
        term["tensor"] = (b * sum(tc_w), steady, tc_w, "compute")
        cu_w = [times[i].cuda * p.ops[i].execs for i in steady]
        term["cuda"] = (b * sum(cu_w), steady, cu_w, "compute")
        sm_w = [times[i].smem * p.ops[i].execs for i in steady]
        term["smem"] = (b * sum(sm_w), steady, sm_w, "memory")
        l2_w = [times[i].l2 * p.ops[i].execs for i in steady]
        term["l2"] = (b * sum(l2_w), steady, l2_w, "memory")
        dr_w = [dram[i] + writes[i] for i in steady]
        term["dram"] = (sum(dr_w) / r.hbm, steady, dr_w, "memory")
        lat_idx, lat_w = [], []
        for loop, (idx, depth, _bytes) in pipelined_loops.items():
            # Little's law: `depth` iterations in flight cover one round trip
            per_iter = max(op_latency[i] for i in idx) / max(1, depth)
            secs = p.loop_execs[loop] * per_iter
            for i in idx:
                lat_idx.append(i)
                lat_w.append(secs / len(idx))
        term["latency"] = (sum(lat_w), lat_idx, lat_w, "latency")
        chains: dict[str, tuple[list[int], list[float], list[float]]] = {}
        for role in roles:
            idx = [i for i in steady if p.ops[i].role == role]
            comp = [(times[i].tc + times[i].cuda) * p.ops[i].execs for i in idx]
            syn = [(times[i].sync + times[i].issue) * p.ops[i].execs for i in idx]
            chains[f"role:{role}"] = (idx, comp, syn)
            term[f"role:{role}"] = (sum(comp) + sum(syn), idx,
                                    [a + s for a, s in zip(comp, syn, strict=True)], "compute")
        key = max(term, key=lambda k: term[k][0])
        secs, idx, wts, cat = term[key]
        if key in chains:  # a role's own chain: its compute and its synchronization
            idx, comp, syn = chains[key]
            spread(idx, comp, "compute", sum(comp) * ws.count)
            spread(idx, syn, "sync", sum(syn) * ws.count)
        else:
            spread(idx, wts, cat, secs * ws.count)
        for k, (s, *_rest) in term.items():
            terms_total[k] = terms_total.get(k, 0.0) + s * ws.count
        wave = secs
        # start-up: a block waits one round trip for its first stage (and for tiles it loads
        # once), issued together; in the first wave every block streams its first stage at
        # once, later blocks start staggered and fetch it at their SM's L2 bandwidth
        # (later blocks of a persistent kernel are later tiles: a producer role that runs
        # ahead has their first stages in flight already)
        first = ws is p.waves[0]
        starts: list[tuple[float, float, list[int]]] = []  # (first wave, later ones, ops)
        for idx, _depth, iter_bytes in pipelined_loops.values():
            lat = max(op_latency[i] for i in idx)
            later = 0.0 if all(p.ops[i].role in ahead for i in idx) else \
                lat + iter_bytes / r.l2_sm
            starts.append((lat + iter_bytes / (r.hbm / ws.blocks), later, idx))
        once = [i for i, w in enumerate(p.ops) if not w.per_block and any(
            a.latency == ONCE or (a.latency == SERIAL and w.phase != STEADY)
            for a in w.record.reads)]
        if once:
            once_latency = max(op_latency[i] for i in once)
            later = 0.0 if all(p.ops[i].role in ahead for i in once) else once_latency
            starts.append((once_latency, later, once))
        once_block = [i for i, w in enumerate(p.ops) if w.per_block and any(
            a.latency in (ONCE, SERIAL) for a in w.record.reads)]
        if once_block:  # loaded once per block of a persistent kernel
            starts.append((max(op_latency[i] for i in once_block), 0.0, once_block))
        fill_first = max((f for f, _, _ in starts), default=0.0)
        fill_later = max((f for _, f, _ in starts), default=0.0)
        fill_all = fill_first + fill_later * (ws.count - 1) if first else \
            fill_later * ws.count
        if starts:
            owner = max(starts, key=lambda fs: fs[0] if first else fs[1])[2]
            spread(owner, [1.0] * len(owner), "latency", fill_all)
        # loads that every iteration waits for (copies completing together wait once)
        waited = 0.0
        for idx, trips in waited_groups:
            secs = trips * max(op_latency[i] for i in idx)
            for i in idx:
                credit(i, "latency", secs * ws.count / len(idx))
            waited += secs
        # prologue and epilogue ops run on their own; a persistent kernel's work outside
        # its tile loop runs once per block, in the first wave
        serial = serial_once = 0.0
        for i in serial_ops:
            t, w = times[i], p.ops[i]
            if w.per_block and not first:
                continue
            count = 1 if w.per_block else ws.count
            mem = max(b * (t.smem + t.l2), (dram[i] + writes[i]) / r.hbm) * w.execs
            comp = b * (t.tc + t.cuda) * w.execs
            syn = (t.sync + t.issue) * w.execs
            credit(i, "memory", mem * count)
            credit(i, "compute", comp * count)
            credit(i, "sync", syn * count)
            if w.per_block:
                serial_once += mem + comp + syn
            else:
                serial += mem + comp + syn
        terms_total["fill"] = terms_total.get("fill", 0.0) + fill_all
        terms_total["waited"] = terms_total.get("waited", 0.0) + waited * ws.count
        terms_total["serial"] = terms_total.get("serial", 0.0) + serial * ws.count \
            + serial_once
        total += (wave + waited + serial) * ws.count + fill_all + serial_once
    launch = c["launch_us"] * 1e-6
    cat_total["launch"] += launch
    terms_total["launch"] = launch
    total += launch

    tensor_flops = sum((w.record.tensor.flops if w.record.tensor else 0.0) * w.execs
                       * p.scale(w) for w in p.ops)
    cuda_ops = sum(w.record.cuda_ops * w.execs * p.scale(w) for w in p.ops)
    write_total = sum(w.record.global_write_bytes * w.execs * p.scale(w) for w in p.ops)
    compulsory = sum(t for t, _ in p.tensors.values()) + write_total
    roofline = max(_ideal_compute(p, tensor_flops, cuda_ops), compulsory / gpu.hbm_bandwidth)
    bottleneck = max(CATEGORIES, key=lambda k: cat_total[k])
    detail = _detail(p, bottleneck, contrib, terms_total)
    lines = _lines(p, contrib, launch, total)
    work = {"tensor_flops": tensor_flops, "cuda_ops": cuda_ops,
            "dram_bytes": dram_total + write_total,
            "l2_bytes": reads_total + write_total,
            "smem_bytes": sum((w.record.smem_read + w.record.smem_write) * w.execs * p.scale(w)
                              for w in p.ops),
            "compulsory_bytes": compulsory}
    # waves of blocks; of tiles for a persistent kernel (its blocks all run at once)
    per_wave = gpu.sms * p.blocks_per_sm
    if p.tile_loops is not None:
        per_wave = min(per_wave, p.blocks)
    waves = p.units / per_wave if per_wave else math.inf
    return Prediction(p.kernel.name, p.kernel.arch, p.arch.name, gpu.name, dict(p.dims), name,
                      total, tensor_flops, cuda_ops, roofline, bottleneck, detail, cat_total,
                      terms_total, work, p.grid, p.blocks, p.blocks_per_sm, waves,
                      p.resources, lines, list(p.warnings) + list(p.resources.warnings))


def _dram_reads(p: KernelProfile, c: Mapping[str, float]) -> list[list[float]]:
    """DRAM read bytes per op for each wave shape.

    A tensor whose touched bytes fit in the resident share of L2 is read from DRAM once
    over the whole kernel (spread over the waves by their blocks); a larger one pays the
    wave model: every wave fetches the distinct tiles its blocks read, never less than its
    share of the compulsory bytes.
    """
    resident = c["l2_resident_fraction"] * p.gpu.l2_bytes
    out = []
    for ws in p.waves:
        row = [0.0] * len(p.ops)
        share = ws.blocks / p.units if p.units else 0.0
        for touched, idx in p.tensors.values():
            model = sum(ws.read_model[i] for i in idx)
            want = touched * share if touched <= resident else max(model, touched * share)
            for i in idx:
                row[i] += want * (ws.read_model[i] / model if model else 1.0 / len(idx))
        out.append(row)
    return out


def _pipelined_loops(p: KernelProfile) -> dict[int, tuple[list[int], int, float]]:
    """Loop -> (its pipelined read ops, iterations in flight, bytes per iteration)."""
    loops: dict[int, tuple[list[int], int, float]] = {}
    for i, w in enumerate(p.ops):
        if w.loop is None or w.phase != STEADY or not w.execs:
            continue
        for a in w.record.reads:
            if a.latency != PIPELINED:
                continue
            idx, depth, nbytes = loops.get(w.loop, ([], 1 << 30, 0.0))
            if i not in idx:
                idx.append(i)
            per_iter = w.execs / p.loop_execs[w.loop] if p.loop_execs[w.loop] else 0.0
            loops[w.loop] = (idx, min(depth, max(1, a.depth)), nbytes + a.bytes * per_iter)
    return loops


def _waited_groups(p: KernelProfile) -> list[tuple[list[int], float]]:
    """Serial loads of the steady loops, grouped by what one wait covers: the copies of
    one iteration that complete on the same barrier share a round trip; any other
    serial load is waited for on its own.  Each group comes with its executions."""
    groups: dict[tuple[object, ...], list[int]] = {}
    trips: dict[tuple[object, ...], float] = {}
    for i, w in enumerate(p.ops):
        if w.phase != STEADY:
            continue
        for a in w.record.reads:
            if a.latency != SERIAL:
                continue
            key: tuple[object, ...] = (w.loop, w.role, a.group) if a.group else (i,)
            idx = groups.setdefault(key, [])
            if i not in idx:
                idx.append(i)
            t = p.loop_execs[w.loop] if w.loop is not None else 1.0
            trips[key] = max(trips.get(key, 0.0), t)
    return [(idx, trips[k]) for k, idx in groups.items()]


def _runs_ahead(p: KernelProfile) -> set[str]:
    """Roles of a persistent kernel that start the next tile's copies while the others
    finish the current tile: roles whose tile-loop work is all inside inner loops (no
    per-tile prologue or epilogue of their own), other than the kernel's only role."""
    if p.tile_loops is None:
        return set()
    out = set()
    for role in {w.role for w in p.ops if not w.per_block}:
        if role == ALL_WARPS:
            continue
        tile_ops = [w for w in p.ops if w.role == role and not w.per_block]
        if all(w.phase == STEADY or w.record == FREE for w in tile_ops):
            out.add(role)
    return out


def _ideal_compute(p: KernelProfile, tensor_flops: float, cuda_ops: float) -> float:
    dtypes = {w.record.tensor.dtype for w in p.ops if w.record.tensor is not None}
    peak = min((p.gpu.tensor_peak.get(d, p.gpu.tensor_peak.get("bf16", 1e12)) for d in dtypes),
               default=p.gpu.tensor_peak.get("bf16", 1e12))
    return tensor_flops / peak + cuda_ops / (p.gpu.fp32_peak / 2)


_TERM_NAMES = {"tensor": "tensor cores", "cuda": "CUDA cores", "smem": "shared-memory bandwidth",
               "l2": "L2 bandwidth", "dram": "DRAM bandwidth", "latency": "pipeline latency",
               "fill": "pipeline fill", "waited": "loads waited for", "serial": "prologue/epilogue",
               "launch": "launch overhead"}


def _detail(p: KernelProfile, category: str, contrib: list[dict[str, float]],
            terms: dict[str, float]) -> str:
    """A short phrase for the bottleneck: which unit, which instruction family, which role."""
    if category == "launch":
        return "launch overhead (the kernel is too small to hide it)"
    owners = [(c.get(category, 0.0), i) for i, c in enumerate(contrib)]
    top = max(owners, default=(0.0, -1))[1]
    w = p.ops[top] if top >= 0 else None
    if category == "compute":
        if w is not None and w.record.tensor is not None:
            t = w.record.tensor
            return f"tensor cores ({t.family} {t.dtype}, m{t.shape[0]}n{t.shape[1]}k{t.shape[2]})"
        return "CUDA cores"
    if category == "memory":
        mem_terms = {k: v for k, v in terms.items() if k in ("dram", "l2", "smem")}
        best = max(mem_terms, key=lambda k: mem_terms[k]) if mem_terms else "dram"
        if best == "smem" and w is not None and w.record.smem_conflict > 1.0:
            return (f"{_TERM_NAMES[best]} ({w.op.prim.key} at line {w.line + 1}: bank "
                    f"conflicts, {w.record.smem_conflict:.3g}x the conflict-free wavefronts)")
        return _TERM_NAMES[best]
    if category == "latency":
        if w is not None and any(a.latency == SERIAL and w.phase == STEADY
                                 for a in w.record.reads):
            return "memory latency (a load waited for in every iteration)"
        stages = {a.depth + 1 for w in p.ops for a in w.record.reads if a.latency == PIPELINED}
        if stages:
            return f"memory latency (pipeline of {min(stages)} stages)"
        return "memory latency (loads without a pipeline)"
    if category == "sync" and w is not None:
        return f"synchronization in role {w.role!r} ({w.op.prim.key})"
    return category


def _lines(p: KernelProfile, contrib: list[dict[str, float]], launch: float,
           total: float) -> list[LineShare]:
    per_line: dict[int, dict[str, float]] = {}
    names: dict[int, list[str]] = {}
    for w, c in zip(p.ops, contrib, strict=True):
        if not c:
            continue
        d = per_line.setdefault(w.line, {})
        for k, v in c.items():
            d[k] = d.get(k, 0.0) + v
        lst = names.setdefault(w.line, [])
        if w.op.prim.key not in lst:
            lst.append(w.op.prim.key)
    deco = p.kernel.decorator_span.start.line
    per_line.setdefault(deco, {})["launch"] = per_line.get(deco, {}).get("launch", 0.0) + launch
    names.setdefault(deco, []).append("launch")
    out = []
    for line in sorted(per_line):
        d = per_line[line]
        secs = sum(d.values())
        out.append(LineShare(line + 1, secs / total if total else 0.0, secs,
                             max(d, key=lambda k: d[k]), names.get(line, [])))
    return out


def predict(kernel: Kernel, dims: Mapping[str, int], gpu: GpuSpec | None = None, *,
            calibration: Calibration | None = None,
            coefficients: Mapping[str, float] | None = None) -> Prediction:
    """profile + estimate in one call."""
    return estimate(profile(kernel, dims, gpu), coefficients, calibration)
