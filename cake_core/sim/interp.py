"""Each process as a generator that walks the IR and yields where it may block or switch.

The walk is structural: loops run over their evaluated ranges, `if` takes the branch its
condition picks, a `Role` node runs only in that role's processes.  An op is executed by
its primitive's simulate facet; when the facet answers `Blocked`, the generator yields
it and calls the facet again once the scheduler resumes it.  After every op that touches
memory or synchronisation the generator yields None: a point where the scheduler may
switch to another process or complete an asynchronous copy.  Pure register math does not
yield -- nothing another process does can change its outcome.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import Any

import numpy as np

from cake_core.diagnostics import codes
from cake_core.ir.kernel import ForOp, IfOp, Node, Op, Role
from cake_core.ir.symbolic import Var
from cake_core.ir.types import SmemType
from cake_core.primitives.facets import FacetError, Unsupported
from cake_core.primitives.registry import Primitive
from cake_core.primitives.traits import Trait
from cake_core.sim import lanes
from cake_core.sim.context import SimContext, SimUnsupported
from cake_core.sim.races import join
from cake_core.sim.state import Blocked, Fragment

Facet = Callable[[Op, SimContext], Any]

MAX_LOOP_ITERATIONS = 1_000_000
"""Loop iterations one process of one block may run: a simulated kernel runs on small
shapes, where no loop comes near this; `range(10**12)` is stopped here (CK510)."""

_FACETS: dict[int, Facet] = {}


def facet_of(prim: Primitive) -> Facet:
    fn = _FACETS.get(id(prim))
    if fn is None:
        try:
            found = prim.facet("simulate")
        except FacetError as exc:
            raise SimUnsupported(f"`{prim.key}`: {exc}") from exc
        if isinstance(found, Unsupported):
            raise SimUnsupported(f"`{prim.key}` cannot be simulated: {found.why}")
        fn = _FACETS[id(prim)] = found
    return fn


def run_process(ctx: SimContext) -> Generator[Blocked | None, None, None]:
    yield from _nodes(ctx, ctx.proc.nodes)


def _nodes(ctx: SimContext, nodes: list[Node]) -> Generator[Blocked | None, None, None]:
    for n in nodes:
        if isinstance(n, Op):
            yield from _op(ctx, n)
        elif isinstance(n, ForOp) and id(n) in ctx.sk.lane_fors:
            yield from _divergent_loop(ctx, n)
        elif isinstance(n, ForOp):
            start, stop, step = (ctx.eval_sym(e) for e in (n.start, n.stop, n.step))
            if step <= 0:  # a launch-time step (`sm_count()`) that came out empty
                raise SimUnsupported(f"the loop step `{n.step}` is {step} at this launch")
            name = n.var.sym.name if isinstance(n.var.sym, Var) else n.var.name
            env = ctx.proc.env
            for i in range(start, stop, step):
                # counted even when the body yields nothing: the scheduler's step limit
                # never sees an empty `for i in range(10**12)`
                ctx.iterations += 1
                if ctx.iterations > MAX_LOOP_ITERATIONS:
                    raise SimUnsupported(
                        f"more than {MAX_LOOP_ITERATIONS} loop iterations in one process of "
                        "one block; the simulator stops there", n.span)
                env[name] = i
                yield from _nodes(ctx, n.body)
        elif isinstance(n, IfOp) and id(n) in ctx.sk.lane_ifs:
            yield from _divergent(ctx, n)
        elif isinstance(n, IfOp):
            yield from _nodes(ctx, n.then if ctx.truth(n.cond) else n.orelse)
        elif isinstance(n, Role) and n.name == ctx.proc.role:
            yield from _nodes(ctx, n.body)


def _divergent(ctx: SimContext, n: IfOp) -> Generator[Blocked | None, None, None]:
    """An `if` on the thread's own index: each thread takes its branch, and the threads
    of each run it together, the `then` threads first (`lanes.py`)."""
    proc, start = ctx.proc, ctx.role_start
    now = lanes.active(proc)
    taken = lanes.per_thread(proc, start, lambda: ctx.truth(n.cond))
    for body, who in ((n.then, now & taken), (n.orelse, now & ~taken)):
        if body and who.any():
            yield from lanes.run_with(proc, start, who, _nodes(ctx, body))


def _divergent_loop(ctx: SimContext, n: ForOp) -> Generator[Blocked | None, None, None]:
    """A loop whose trip count differs between threads: each iteration some thread needs
    runs with the threads whose range holds it."""
    proc, start = ctx.proc, ctx.role_start
    ranges = lanes.per_thread_values(
        proc, start, lambda: range(*(ctx.eval_sym(e) for e in (n.start, n.stop, n.step))))
    name = n.var.sym.name if isinstance(n.var.sym, Var) else n.var.name
    steps = sorted({i for r in set(ranges.values()) for i in r[:MAX_LOOP_ITERATIONS + 1]})
    for i in steps:
        ctx.iterations += 1
        if ctx.iterations > MAX_LOOP_ITERATIONS:
            raise SimUnsupported(f"more than {MAX_LOOP_ITERATIONS} loop iterations in one "
                                 "process of one block; the simulator stops there", n.span)
        who = np.zeros_like(lanes.active(proc))
        for (w, lane), r in ranges.items():
            who[w, lane] = i in r
        proc.env[name] = i
        yield from lanes.run_with(proc, start, who, _nodes(ctx, n.body))


def _op(ctx: SimContext, op: Op) -> Generator[Blocked | None, None, None]:
    fn = facet_of(op.prim)
    proc = ctx.proc
    if proc.leader_knows and Trait.SINGLE_THREAD in op.prim.traits:
        # the issuing thread's own op follows its wait; the process has one clock, so its
        # other warps are taken to know from here on too (the simulator misses a race of
        # theirs after this op, never invents one)
        for vc in proc.leader_knows:
            join(proc.vc, vc)
        proc.leader_knows.clear()
    ctx.op = op
    while True:
        r = fn(op, ctx)
        if isinstance(r, Blocked):
            proc.blocked_op = op
            yield r
            ctx.op = op
            continue
        break
    proc.ops += 1
    e = op.prim.effects
    if e.async_group not in ("tma", "bulk_store") and (
            e.async_group != "wgmma" or len(proc.warps) > 4) and any(
            isinstance(op.args[n].type, SmemType) for n in (*e.reads, *e.writes) if n in op.args):
        proc.touched = op  # warps used smem each on their own (CK313: not one warpgroup's wgmma)
    res = op.results
    env = proc.env
    if len(res) == 1:
        old = env.get(res[0].name)
        if isinstance(old, Fragment) and old.pending and old is not r:
            _rebound_in_flight(ctx, op, res[0].name)
        elif isinstance(old, Fragment) and old.read_pending and old is not r:
            ctx.report(codes.SIM_ASYNC_RESULT_READ, op.span,
                       f"`{res[0].name}` is re-bound while a wgmma that reads it as its A "
                       "operand from registers is still in flight; the tensor cores read "
                       "those registers until a wait retires the group",
                       notes=["retire the group first: a `wgmma_wait` that covers it before "
                              "this line"])
        env[res[0].name] = r
    elif len(res) > 1:
        for v, x in zip(res, r, strict=True):
            env[v.name] = x
    for name in ctx.sk.after_op.get(id(op), ()):
        env[name] = r
    if Trait.THREAD_LOCAL not in op.prim.traits:
        yield None


def _rebound_in_flight(ctx: SimContext, op: Op, name: str) -> None:
    """A name is one set of registers: binding a new fragment to it while wgmma groups
    still write the old one clobbers registers the tensor cores are writing (a double
    buffer that reuses an accumulator before the wait that retires it)."""
    ctx.report(codes.SIM_ASYNC_RESULT_READ, op.span,
               f"`{name}` is re-bound while wgmma groups that write it are still in flight; "
               "the new value and the groups' results land in the same registers",
               notes=["retire the groups first: a `wgmma_wait` that covers them before this "
                      "line"])
