"""Synchronisation: the pipeline protocol, raw mbarriers, block and named barriers, fences.

Pipelines keep one cursor per process (stage and parity it expects next) over barriers
the block shares; raw mbarrier arrivals come from every process (`per="thread"` or
`"warp"`) or from the op's elected thread (`per="role"`, `expect_tx`), waits from every
process.  An elected arrival vouches only for what the process's warps did before they
last met at a barrier: the warps of a role are not in lockstep.  Every release point (an
arrival, a barrier) publishes the process's clock and starts a new epoch; every acquire
point joins what was published.
"""

from __future__ import annotations

from cake_core.diagnostics import codes
from cake_core.ir.kernel import Op
from cake_core.sim.context import SimContext
from cake_core.sim.lanes import arrivals, covers
from cake_core.sim.races import VC, join
from cake_core.sim.state import Blocked, GroupBarrier, Proc
from cake_core.sim.waits import check_init, parity_wait
from cake_core.verify.effects import arrival_scope


def _misuse(ctx: SimContext, op: Op, message: str) -> None:
    ctx.report(codes.SIM_BARRIER_MISUSE, op.span, message, key=("CK508", id(op)))


def _bind_phase(ctx: SimContext, op: Op, phase: int) -> None:
    if op.results:
        ctx.env[f"{op.results[0].name}.phase"] = phase
    for name in ctx.sk.after_op.get(id(op), ()):
        ctx.env[f"{name}.phase"] = phase


# --- pipelines -------------------------------------------------------------------------------
def pipeline_acquire(op: Op, ctx: SimContext) -> Blocked | int:
    pipe = ctx.pipeline(op, "self")
    cur = ctx.proc.cursor(pipe.name)
    s = cur.acq_stage
    r = parity_wait(ctx, op, pipe.empty[s], cur.acq_parity)
    if isinstance(r, Blocked):
        return r
    _bind_phase(ctx, op, cur.acq_parity ^ 1)
    cur.acq_stage = (s + 1) % pipe.stages
    if cur.acq_stage == 0:
        cur.acq_parity ^= 1
    cur.acquired.append(s)
    return s


def pipeline_commit(op: Op, ctx: SimContext) -> None:
    pipe = ctx.pipeline(op, "self")
    cur = ctx.proc.cursor(pipe.name)
    if not cur.acquired:
        _misuse(ctx, op, f"commit() on pipeline `{pipe.name}` without a stage acquired")
        return
    s = cur.acquired.popleft()
    nbytes = cur.tx.pop(s, 0)
    bar = pipe.full[s]
    if nbytes:
        bar.expect(nbytes)
    if not bar.arrive(ctx.proc.vc):
        _misuse(ctx, op, f"more arrivals on {bar.label} than it expects")
    ctx.proc.tick()


def pipeline_wait(op: Op, ctx: SimContext) -> Blocked | int:
    pipe = ctx.pipeline(op, "self")
    cur = ctx.proc.cursor(pipe.name)
    s = cur.wait_stage
    r = parity_wait(ctx, op, pipe.full[s], cur.wait_parity)
    if isinstance(r, Blocked):
        return r
    _bind_phase(ctx, op, cur.wait_parity)
    cur.wait_stage = (s + 1) % pipe.stages
    if cur.wait_stage == 0:
        cur.wait_parity ^= 1
    cur.waited.append(s)
    return s


def pipeline_release(op: Op, ctx: SimContext) -> None:
    pipe = ctx.pipeline(op, "self")
    cur = ctx.proc.cursor(pipe.name)
    if not cur.waited:
        _misuse(ctx, op, f"release() on pipeline `{pipe.name}` without a stage waited for")
        return
    s = cur.waited.popleft()
    bar = pipe.empty[s]
    if not bar.arrive(ctx.proc.vc):
        _misuse(ctx, op, f"more arrivals on {bar.label} than it expects")
    ctx.proc.tick()


# --- raw mbarriers ------------------------------------------------------------------------
def _elected_clock(ctx: SimContext, op: Op) -> VC:
    """What one elected thread's arrival publishes.  A process standing for several warps
    vouches only for what they did before they last met: the warps do not run in
    lockstep, and the others may still be using what the arrival hands over."""
    proc = ctx.proc
    if len(proc.warps) == 1 or proc.touched is None:
        return proc.vc  # one warp: the lowering meets its lanes (`__syncwarp`) first
    proc.unsynced_arrival = op
    vc = dict(proc.vc)  # what the elected thread joined (waits) it does pass on
    for c in (proc.comp, *proc.crew):
        vc[c] = proc.synced.get(c, 0)
    return vc


def mbarrier_arrive(op: Op, ctx: SimContext) -> None:
    scope = arrival_scope(op)
    if scope == "role" and not ctx.leader(op):
        return
    bar = ctx.barrier(op, "self")
    check_init(ctx, op, bar)
    n = ctx.int(op, "count")
    if scope != "role":  # every warp (lane 0) or every thread of this process arrives
        n *= arrivals(ctx.proc, scope)
    lanes = ctx.proc.lanes
    some_warps = lanes is not None and not bool(lanes.any(axis=1).all())
    # an arrival some warps of the process make no part of vouches, like an elected
    # one, only for what those warps did before the process's warps last met
    vc = _elected_clock(ctx, op) if scope == "role" or some_warps else ctx.proc.vc
    if not bar.arrive(vc, n):
        _misuse(ctx, op, f"this arrival makes {bar.count - bar.pending} arrivals on "
                f"{bar.label}, whose phases expect {bar.count}")
    ctx.proc.tick()


def mbarrier_expect_tx(op: Op, ctx: SimContext) -> None:
    if not ctx.leader(op):
        return
    bar = ctx.barrier(op, "self")
    check_init(ctx, op, bar)
    bar.expect(ctx.int(op, "bytes"))
    if not bar.arrive(_elected_clock(ctx, op)):
        _misuse(ctx, op, f"more arrivals on {bar.label} than its count {bar.count}")
    ctx.proc.tick()


def mbarrier_wait(op: Op, ctx: SimContext) -> Blocked | None:
    bar = ctx.barrier(op, "self")
    check_init(ctx, op, bar)
    r = parity_wait(ctx, op, bar, ctx.int(op, "parity") & 1)
    return r if isinstance(r, Blocked) else None


# --- block-wide and named barriers -------------------------------------------------------
def _met(proc: Proc) -> None:
    """The process's warps met: each now knows what its issuing thread waited for."""
    for vc in proc.leader_knows:
        join(proc.vc, vc)
    proc.leader_knows.clear()
    proc.synced, proc.touched = dict(proc.vc), None


def _group_sync(ctx: SimContext, op: Op, bar: GroupBarrier, wait: bool) -> Blocked | None:
    proc = ctx.proc
    key = id(op)
    if key in proc.retry:
        g = proc.retry.pop(key)
        assert isinstance(g, int)
        join(proc.vc, bar.released.get(g, {}))
        _met(proc)
        return None
    g = bar.gen
    if not bar.arrive(len(proc.warps), proc.vc):
        _misuse(ctx, op, f"more warps arrive on named barrier {bar.bid} than the {bar.need} "
                "it counts")
    proc.tick()
    if not wait:
        return None
    if bar.gen > g:
        join(proc.vc, bar.released.get(g, {}))
        _met(proc)
        return None
    proc.retry[key] = g
    what = "syncthreads()" if bar.bid == 0 else f"named barrier {bar.bid} ({bar.need} warps)"
    return Blocked(f"waits at {what}", lambda: bar.gen > g)


def syncthreads(op: Op, ctx: SimContext) -> Blocked | None:
    return _group_sync(ctx, op, ctx.block.group_barrier(0, ctx.block.warps), True)


def cluster_sync(op: Op, ctx: SimContext) -> Blocked | None:
    """The blocks of a cluster are simulated apart (a multicast is refused before the run),
    so what remains of the cluster barrier is its block barrier."""
    return _group_sync(ctx, op, ctx.block.group_barrier(0, ctx.block.warps), True)


def _named(ctx: SimContext, op: Op) -> GroupBarrier:
    bid, warps = ctx.int(op, "id"), ctx.int(op, "warps")
    bar = ctx.block.group_barrier(bid, warps)
    if bar.need != warps:
        _misuse(ctx, op, f"named barrier {bid} is used with {warps} warps here but "
                f"{bar.need} elsewhere")
    return bar


def barrier_sync(op: Op, ctx: SimContext) -> Blocked | None:
    return _group_sync(ctx, op, _named(ctx, op), True)


def barrier_arrive(op: Op, ctx: SimContext) -> None:
    _group_sync(ctx, op, _named(ctx, op), False)


# --- fences --------------------------------------------------------------------------------
def fence_proxy_async(op: Op, ctx: SimContext) -> None:
    """Fences the writes its active threads made; a fence by some of a process's threads
    leaves the writes of all of them (a collective store) unfenced."""
    left = []
    for acc in ctx.proc.unfenced:
        if covers(ctx.proc.lanes, acc.threads):
            acc.fenced = True
        else:
            left.append(acc)
    ctx.proc.unfenced[:] = left


def fence_barrier_init(op: Op, ctx: SimContext) -> None:
    for obj in ctx.block.objects.values():
        if isinstance(obj, list):
            for b in obj:
                if b.init_comp == ctx.proc.comp:
                    b.init_fenced = True
