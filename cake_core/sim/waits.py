"""Waiting, shared by several facet families: mbarrier parity waits and async-group waits.

A parity wait follows `mbarrier.try_wait.parity`: it passes at once while the barrier's
current phase parity differs from the operand (the phase with that parity has
completed); otherwise it blocks until the phase it found running completes.  The waiter
then acquires the clock of the phase it observed.  For raw mbarriers the observed phase
is also checked against the waiter's history: a wait must see the phase right after the
last one it saw, or the kernel's parity bookkeeping has drifted.
"""

from __future__ import annotations

from cake_core.diagnostics import codes
from cake_core.diagnostics.model import Related
from cake_core.ir.kernel import Op
from cake_core.sim.context import SimContext
from cake_core.sim.races import join
from cake_core.sim.state import AsyncOp, Blocked, MBarrier


def parity_wait(ctx: SimContext, op: Op, bar: MBarrier, parity: int) -> Blocked | int:
    """Wait on `bar` with `parity`; the observed phase once it passes (-1: the phase
    "before" the first, which every barrier starts out having completed)."""
    proc = ctx.proc
    key = id(op)
    if key in proc.retry:
        c0 = proc.retry[key]
        assert isinstance(c0, int)
        if bar.completed <= c0:
            return _blocked(ctx, bar, c0, parity)
        del proc.retry[key]
        observed = c0
        if bar.raw and bar.completed > c0 + 1:
            _drift(ctx, op, bar, observed,
                   f"phases {c0} and {c0 + 1} of {bar.label} both completed while it "
                   f"waited with parity {parity}; a parity wait cannot tell them apart")
    elif bar.completed % 2 != parity:
        observed = bar.completed - 1
    else:
        c0 = bar.completed
        proc.retry[key] = c0
        return _blocked(ctx, bar, c0, parity)
    if observed >= 0:
        join(proc.vc, bar.phase_vcs.get(observed, {}))
    if bar.raw:
        _history(ctx, op, bar, observed, parity)
    return observed


def _blocked(ctx: SimContext, bar: MBarrier, c0: int, parity: int) -> Blocked:
    ops = ctx.block.async_ops
    key = ("tma", id(bar))
    return Blocked(f"waits for phase {c0} of {bar.label} to complete (parity {parity})",
                   lambda: bar.completed > c0,
                   needs=lambda: [a for a in ops if a.channel[1:] == key])


def _history(ctx: SimContext, op: Op, bar: MBarrier, observed: int, parity: int) -> None:
    key = (bar.name, id(bar))
    last = ctx.proc.mbar_seen.get(key)
    ctx.proc.mbar_seen[key] = (observed, id(op))
    if last is None:
        if observed > 0:
            _drift(ctx, op, bar, observed,
                   f"this first wait on {bar.label} (parity {parity}) passes on phase "
                   f"{observed}: phases before it completed unobserved")
        return
    prev, prev_op = last
    if observed > prev + 1:
        _drift(ctx, op, bar, observed,
               f"this wait (parity {parity}) sees phase {observed} of {bar.label}, but the "
               f"last phase this role waited for was {prev}: phase {prev + 1} went by unseen")
    elif observed < prev or (observed == prev and prev_op == id(op)):
        _drift(ctx, op, bar, observed,
               f"this wait (parity {parity}) passes on phase {observed} of {bar.label}, which "
               f"it had already waited for: the parity no longer follows the barrier's "
               "phases, so the wait does not wait")


def _drift(ctx: SimContext, op: Op, bar: MBarrier, observed: int, message: str) -> None:
    ctx.report(codes.SIM_PARITY_DRIFT, op.span, message,
               related=[Related(bar.span, f"{bar.label} is created here")],
               notes=["flip the parity once per completed phase, e.g. wait(k % 2) in the "
                      "k-th iteration, or use a pipeline, which tracks phases itself"],
               data={"barrier": bar.name, "phase": observed}, key=("CK503", id(op)))


def check_init(ctx: SimContext, op: Op, bar: MBarrier) -> None:
    """A raw mbarrier must be initialised, fenced and published before another thread
    (or the TMA engine) uses it."""
    if bar.reported or bar.init_comp == -1:
        return
    mine = bar.init_comp == ctx.proc.comp
    seen = bar.init_comp is not None and ctx.proc.vc.get(bar.init_comp, 0) >= bar.init_epoch
    if mine or (seen and bar.init_fenced):
        return
    bar.reported = True
    why = ("before the thread that initialises it has run the init" if bar.init_comp is None
           else "before its initialisation is visible: the initialising role must run "
           "fence_barrier_init() and a syncthreads() must order the init before this use")
    ctx.report(codes.SIM_DATA_RACE, op.span, f"{ctx.proc.label} uses {bar.label} {why}",
               related=[Related(bar.span, "initialised here")],
               key=("CK501-init", bar.name))


def group_wait(ctx: SimContext, ops: list[AsyncOp], n: int, what: str, *,
               acquire: bool = True) -> Blocked | list[AsyncOp]:
    """Block until every op of `ops` but the newest `n` is complete (`wait_group n`);
    then acquire (and return) those, which leave `ops`.  A newer op that happens to have
    completed stays: the wait promises nothing about it.  `acquire=False`: the caller
    decides who learns of them (a wait made by one thread of a process standing for
    several warps)."""
    covered = ops[:max(len(ops) - n, 0)]
    if not all(a.done for a in covered):
        return Blocked(f"waits until at most {n} {what} are in flight",
                       lambda: all(a.done for a in covered),
                       needs=lambda: [a for a in covered if not a.done])
    for a in covered if acquire else ():
        join(ctx.proc.vc, a.vc)
    del ops[:len(covered)]
    return covered
