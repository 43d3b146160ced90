"""Running a launch: dims and inputs in, outputs and findings out.

Blocks are simulated one after another (they share nothing but global memory; a kernel
whose blocks write each other's shared memory -- TMA multicast in a cluster -- is
refused, not simulated wrong); inside a block the schedule interleaves the processes
and completes asynchronous work.  A block ends when every process has finished, or when
nothing can move -- a deadlock, reported once with every blocked role.
"""

from __future__ import annotations

import contextlib
import itertools
import math
import time
import traceback
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_limits

from cake_core.diagnostics import codes
from cake_core.diagnostics.model import Diagnostic, Related
from cake_core.ir.symbolic import SM_COUNT, BinExpr, Const, Dim, SymExpr
from cake_core.ir.types import TensorType
from cake_core.sim.context import GlobalFault, SimContext, SimUnsupported
from cake_core.sim.dtypes import POISON_BYTE, STORAGE, decode, encode
from cake_core.sim.interp import run_process
from cake_core.sim.layout import SmemFault
from cake_core.sim.program import SimKernel, SimSetupError
from cake_core.sim.runstate import SIM_SM_COUNT, BlockState, Findings, SimRun
from cake_core.sim.schedule import RoundRobin, Schedule
from cake_core.sim.state import AsyncOp, GlobalTensor, Proc
from cake_core.source import Span

#: A block that takes more scheduling steps than this is stopped (a runaway simulation).
MAX_STEPS_PER_BLOCK = 2_000_000
#: The most blocks one simulated launch runs: the simulator runs small shapes, and a grid
#: past this (a constant `grid=(2**62,)`) is reported instead of enumerated.
MAX_BLOCKS = 1 << 16
#: The most shared memory one simulated block holds.  No GPU gives a block more than
#: 228 KiB; a kernel asking for more is already a CK201 finding, and the simulator
#: reports it instead of trying to allocate terabytes.
MAX_SMEM_BYTES = 1 << 20
#: The most elements of one global tensor the simulator allocates.
MAX_TENSOR_ELEMENTS = 1 << 26


@dataclass
class SimResult:
    """One simulated launch under one schedule."""

    kernel: str
    dims: dict[str, int]
    schedule: str
    outputs: dict[str, np.ndarray]
    """Every tensor parameter after the launch, decoded to values (float32 / ints)."""
    diagnostics: list[Diagnostic]
    tensors: dict[str, GlobalTensor] = field(repr=False, default_factory=dict)
    blocks: int = 0
    steps: int = 0
    ops: int = 0
    async_ops: int = 0
    seconds: float = 0.0
    sk: SimKernel | None = field(repr=False, default=None)

    @property
    def ok(self) -> bool:
        return not any(d.severity.value == "error" for d in self.diagnostics)

    def writer(self, tensor: str, index: tuple[int, ...]) -> int:
        """Index (into `sk.ops`) of the op that last wrote `tensor[index]`; -1 if none."""
        t = self.tensors[tensor]
        return -1 if t.writer is None else int(t.writer[index])


def launch_dims(sk: SimKernel, dims: Mapping[str, int]) -> dict[str, int]:
    """Check the dims a launch needs against the kernel's declarations."""
    needed: dict[str, Dim] = {}
    k = sk.kernel
    exprs: list[SymExpr] = list(k.grid)
    for p in k.params:
        if isinstance(p.value.type, TensorType):
            exprs.extend(p.value.type.shape)
    for e in exprs:
        for a in e.atoms():
            if isinstance(a, Dim):
                needed[a.name] = a
    for name, d in k.dims.items():
        if name in dims:
            needed.setdefault(name, d)
    if SM_COUNT in needed or SM_COUNT in dims:
        needed[SM_COUNT] = Dim(SM_COUNT)
        dims = {SM_COUNT: SIM_SM_COUNT, **dims}
    missing = [n for n in needed if n not in dims]
    if missing:
        raise SimSetupError(f"missing dims: {', '.join(missing)} (give e.g. "
                            f"{','.join(f'{n}=128' for n in needed)})")
    out: dict[str, int] = {}
    for name, d in needed.items():
        v = int(dims[name])
        if v < 1:
            raise SimSetupError(f"dim {name}={v} must be positive")
        if v % d.multiple_of:
            raise SimSetupError(f"dim {name}={v} is declared a multiple of {d.multiple_of}")
        if d.max is not None and v > d.max:
            raise SimSetupError(f"dim {name}={v} exceeds its declared max {d.max}")
        out[name] = v
    return out


def _const(e: SymExpr, dims: Mapping[str, int]) -> int:
    if isinstance(e, Const):
        return e.value
    if isinstance(e, Dim):
        return dims[e.name] if e.name != SM_COUNT else dims.get(e.name, SIM_SM_COUNT)
    if isinstance(e, BinExpr):
        a, b = _const(e.left, dims), _const(e.right, dims)
        return {"+": a + b, "-": a - b, "*": a * b, "min": min(a, b), "max": max(a, b),
                "//": a // b if b else 0, "%": a % b if b else 0,
                "cdiv": -(-a // b) if b else 0}[e.op]
    raise SimSetupError(f"`{e}` is not known at launch")


def check_tensor_sizes(sk: SimKernel, dims: Mapping[str, int]) -> None:
    """Raise SimSetupError when a tensor of the launch is past MAX_TENSOR_ELEMENTS."""
    for name, t in sk.tensor_params().items():
        shape = tuple(_const(d, dims) for d in t.shape)
        if math.prod(shape) > MAX_TENSOR_ELEMENTS:
            raise SimSetupError(f"tensor `{name}` of shape {shape} is too large to simulate "
                                f"(at most {MAX_TENSOR_ELEMENTS} elements); pick smaller dims")


def make_tensors(sk: SimKernel, dims: Mapping[str, int],
                 inputs: Mapping[str, np.ndarray | float]) -> dict[str, GlobalTensor]:
    """Global memory: inputs encoded to their dtype, every other tensor poisoned."""
    out: dict[str, GlobalTensor] = {}
    params = sk.tensor_params()
    unknown = set(inputs) - set(params) - set(sk.scalar_params())
    if unknown:
        raise SimSetupError(f"inputs name no tensor parameter of `{sk.name}`: "
                            f"{', '.join(sorted(unknown))}")
    check_tensor_sizes(sk, dims)
    for name, t in params.items():
        shape = tuple(_const(d, dims) for d in t.shape)
        if name in inputs:
            arr = np.asarray(inputs[name])
            if arr.shape != shape:
                raise SimSetupError(f"input `{name}` has shape {arr.shape}, the kernel expects "
                                    f"{shape}")
            data = np.ascontiguousarray(encode(arr, t.dtype))
        else:
            data = np.full(int(np.prod(shape)) * np.dtype(STORAGE[t.dtype]).itemsize,
                           POISON_BYTE, dtype=np.uint8).view(STORAGE[t.dtype]).reshape(shape)
        out[name] = GlobalTensor(name, t.dtype, shape, data)
    return out


def simulate(sk: SimKernel, dims: Mapping[str, int],
             inputs: Mapping[str, np.ndarray | float], *,
             schedule: Schedule | None = None,
             blocks: Iterable[Sequence[int]] | None = None) -> SimResult:
    """Run every block (or the given block coordinates) of one launch under `schedule`."""
    t0 = time.perf_counter()
    dims = launch_dims(sk, dims)
    tensors = make_tensors(sk, dims, inputs)
    scalars = {n: v for n, v in inputs.items() if n in sk.scalar_params()}
    missing = set(sk.scalar_params()) - set(scalars)
    if missing:
        raise SimSetupError(f"missing scalar inputs: {', '.join(sorted(missing))}")
    sched = schedule or RoundRobin()
    run = SimRun(sk, dims, tensors, scalars, Findings(sk.path), sched.name)
    for span, note in sk.notes:
        run.findings.add(codes.SIM_UNSUPPORTED.at(span, note))
    grid = [_const(g, dims) for g in sk.kernel.grid] + [1, 1]
    grid = grid[:3]
    limit = _over_limits(sk, grid if blocks is None else [1, 1, 1])
    if sk.unsupported is not None:
        span, why = sk.unsupported
        run.findings.add(codes.SIM_UNSUPPORTED.at(span, f"not simulated: {why}"))
        blocks = []
    elif limit is not None:
        run.findings.add(codes.SIM_UNSUPPORTED.at(sk.kernel.name_span,
                                                  f"cannot simulate this: {limit}"))
        blocks = []
    coords = [tuple(int(x) for x in (*b, 0, 0)[:3]) for b in blocks] if blocks is not None \
        else [(x, y, z) for z, y, x in itertools.product(range(grid[2]), range(grid[1]),
                                                          range(grid[0]))]
    for c in coords:
        if not all(0 <= v < g for v, g in zip(c, grid, strict=True)):
            raise SimSetupError(f"block {c} is outside the grid {tuple(grid)}")
    with _one_blas_thread():
        for c in coords:
            linear = c[0] + grid[0] * (c[1] + grid[1] * c[2])
            run_block(run, c, linear, sched)  # type: ignore[arg-type]
    outputs = {n: decode(t.data, t.dtype) for n, t in tensors.items()}
    return SimResult(sk.name, dict(dims), sched.name, outputs, run.findings.diagnostics(),
                     tensors, len(coords), run.steps, run.ops, run.async_ops,
                     time.perf_counter() - t0, sk)


def _over_limits(sk: SimKernel, grid: list[int]) -> str | None:
    """Why the launch is past what the simulator runs (MAX_BLOCKS, MAX_SMEM_BYTES)."""
    n = grid[0] * grid[1] * grid[2]
    if n > MAX_BLOCKS:
        return f"a grid of {n} blocks; the simulator runs at most {MAX_BLOCKS}"
    if sk.smem_bytes > MAX_SMEM_BYTES:
        return f"{sk.smem_bytes} B of shared memory per block; the simulator holds at " \
               f"most {MAX_SMEM_BYTES}"
    return None


def _one_blas_thread() -> contextlib.AbstractContextManager[object]:
    """Tile-sized matmuls gain nothing from BLAS threads, and on a busy machine a threaded
    BLAS stalls for tens of milliseconds per call; limit it while simulating."""
    return threadpool_limits(1, user_api="blas")


def run_block(run: SimRun, coords: tuple[int, int, int], linear: int,
              sched: Schedule) -> None:
    sk = run.sk
    size = -(-max(sk.smem_bytes, 16) // 16) * 16
    block = BlockState(coords, linear, np.full(size, POISON_BYTE, dtype=np.uint8),
                       np.zeros(size, dtype=np.uint8), sk.kernel.warps)
    ctxs: list[SimContext] = []
    for i, spec in enumerate(sk.procs):
        comp = block.component(("proc", i))
        p = Proc(i, spec.role, spec.warps, spec.label, comp, sk.kernel.body)
        p.vc[comp] = 1
        env = p.env
        env.update({"block.x": coords[0], "block.y": coords[1], "block.z": coords[2],
                    "cluster.x": 0, "cluster.y": 0, "cluster.z": 0, "cluster.rank": 0})
        w0 = spec.warps[0]
        role = sk.kernel.roles.get(spec.role or "")
        start = role.warp_start if role is not None else 0
        env.update({"warp.id": w0, "warp.rank": w0 - start, "warpgroup.id": w0 // 4,
                    "warpgroup.rank": (w0 - start) // 4, "lane.id": 0, "thread.id": w0 * 32})
        env.update(run.tensors)
        env.update(run.scalars)
        block.procs.append(p)
        ctx = SimContext(run, block, p)
        p.gen = run_process(ctx)
        ctxs.append(ctx)
    sched.reset(block.procs)
    steps = 0
    while True:
        runnable = [p for p in block.procs
                    if not p.done and (p.blocked is None or p.blocked.ready())]
        heads = _heads(block.async_ops)
        if not runnable and not heads:
            break
        if heads and all(p.done for p in block.procs):
            _pending_at_exit(ctxs[heads[0].proc.index], heads)
        steps += 1
        if steps > MAX_STEPS_PER_BLOCK:
            ctxs[0].report(codes.SIM_UNSUPPORTED, sk.kernel.name_span,
                           f"stopped after {MAX_STEPS_PER_BLOCK} scheduling steps")
            block.faulted = True
            break
        choice = sched.pick(runnable, heads)
        if isinstance(choice, AsyncOp):
            _complete(ctxs[choice.proc.index], block, choice)
        else:
            _step(ctxs[choice.index], block)
    run.steps += steps
    run.ops += sum(p.ops for p in block.procs)
    run.async_ops += block.issued
    live = [p for p in block.procs if not p.done]
    if live and not block.faulted:
        _deadlock(ctxs[live[0].index], live)
    _leftover_tx(ctxs[0], block)


#: Kinds whose operations complete in issue order on their channel: the wgmma groups of
#: one warpgroup chain through the accumulator they share.
ORDERED_KINDS = frozenset({"wgmma"})


def _heads(ops: list[AsyncOp]) -> list[AsyncOp]:
    """The operations that may complete next, in issue order: every pending copy (the
    copies of a cp.async group, the TMA loads counted by one mbarrier and the bulk stores
    of a thread land in any order), and the oldest group of each ordered channel."""
    seen: set[tuple[object, ...]] = set()
    out = []
    for a in ops:
        if a.kind not in ORDERED_KINDS:
            out.append(a)
        elif a.channel not in seen:
            seen.add(a.channel)
            out.append(a)
    return out


def _step(ctx: SimContext, block: BlockState) -> None:
    p = ctx.proc
    p.blocked = None
    assert p.gen is not None
    try:
        ev = next(p.gen)
    except StopIteration:
        _exit(block, p)
        return
    except (SmemFault, GlobalFault) as exc:
        _fault(ctx, block, codes.SIM_OUT_OF_BOUNDS, str(exc))
        return
    except SimUnsupported as exc:
        _fault(ctx, block, codes.SIM_UNSUPPORTED, f"cannot simulate this: {exc}", exc.span)
        return
    except Exception as exc:  # the simulator's own fault: a finding, never a traceback
        _internal(ctx, block, exc)
        return
    p.blocked = ev


def _exit(block: BlockState, p: Proc) -> None:
    p.done = True
    bar = block.bars.get(0)
    if bar is not None:
        bar.exited += len(p.warps)
        bar.check()
    else:
        block.group_barrier(0, block.warps).exited += len(p.warps)


def _fault(ctx: SimContext, block: BlockState, rule: codes.Rule, message: str,
           at: Span | None = None) -> None:
    op = ctx.op
    span = at or (op.span if op is not None else ctx.sk.kernel.name_span)
    ctx.report(rule, span, message, notes=[f"{ctx.proc.label} stopped here"],
               key=(rule.code, id(op), message))
    ctx.proc.done = ctx.proc.faulted = True
    block.faulted = True


def _internal(ctx: SimContext, block: BlockState, exc: Exception) -> None:
    tb = traceback.extract_tb(exc.__traceback__)[-1]
    op = ctx.op
    span = op.span if op is not None else ctx.sk.kernel.name_span
    ctx.report(codes.INTERNAL_ERROR, span,
               f"internal simulator error: {type(exc).__name__}: {exc}",
               notes=[f"at {Path(tb.filename).name}:{tb.lineno} in {tb.name}",
                      "please report this with the kernel that triggered it"],
               key=("CK901", id(op)))
    ctx.proc.done = ctx.proc.faulted = True
    block.faulted = True


def _complete(ctx: SimContext, block: BlockState, a: AsyncOp) -> None:
    block.async_ops.remove(a)
    saved = ctx.op
    ctx.op = a.op
    try:
        a.complete(a)
    except (SmemFault, GlobalFault) as exc:
        ctx.report(codes.SIM_OUT_OF_BOUNDS, a.op.span, str(exc), key=("CK504", id(a.op)))
        block.faulted = True
    except SimUnsupported as exc:
        ctx.report(codes.SIM_UNSUPPORTED, a.op.span, f"cannot simulate this: {exc}",
                   key=("CK510", id(a.op)))
        block.faulted = True
    except Exception as exc:
        _internal(ctx, block, exc)
    finally:
        a.done = True
        ctx.op = saved


def _pending_at_exit(ctx: SimContext, heads: list[AsyncOp]) -> None:
    for a in heads:
        ctx.report(codes.SIM_PENDING_AT_EXIT, a.op.span,
                   f"this {a.kind} was still in flight when every role of the block had "
                   "finished: it may read or write shared memory after the block exits",
                   notes=["wait for it before the role ends (cp_async_wait(0), "
                          "wgmma_wait(0), tma_store_wait(0), or the barrier it signals)"],
                   key=("CK509", id(a.op)))


def _deadlock(ctx: SimContext, live: list[Proc]) -> None:
    first = live[0]
    parts = []
    related = []
    for p in live:
        reason = p.blocked.reason if p.blocked is not None else "cannot continue"
        parts.append(f"{p.label} {reason}")
        if p is not first and p.blocked_op is not None:
            related.append(Related(p.blocked_op.span, f"{p.label} {reason}"))
    span = first.blocked_op.span if first.blocked_op is not None else ctx.sk.kernel.name_span
    ctx.report(codes.SIM_DEADLOCK, span,
               "deadlock: every live role is blocked and nothing in flight can wake it: "
               + "; ".join(parts),
               related=related,
               notes=["the other roles have finished" if len(live) < len(ctx.block.procs)
                      else "no role has finished"],
               data={"blocked": [p.label for p in live]},
               key=("CK502", *sorted(id(p.blocked_op) for p in live)))


def _leftover_tx(ctx: SimContext, block: BlockState) -> None:
    for obj in block.objects.values():
        bars = obj if isinstance(obj, list) else []
        for b in bars:
            if b.tx < 0:
                ctx.report(codes.SIM_BARRIER_MISUSE, b.span,
                           f"{b.label} received {-b.tx} more transaction bytes than its "
                           "expect_tx announced: the copies outran the phase they belong to",
                           key=("CK508-tx", b.name))
