"""CK313: an elected arrival that hands over data the role's other warps still use.

A raw `bar.arrive()` (`per="role"`, the default) and `bar.expect_tx(...)` are made by one
elected thread of the role.  The warps of a role do not run in lockstep on the GPU, so
the arrival orders that thread's warp only: when the role's warps have read or written
shared memory since they last met at a barrier, a waiter of the barrier (a producer
about to refill the stage) can overwrite what a slower warp is still reading.

Two mechanical repairs, both safe when the barrier's count was right before:

- every warp arrives (`per="warp"`) and the barrier's count grows by the extra arrivals;
- the role's warps meet first: `barrier_sync(id, warps)` on a named barrier no other
  op of the kernel uses, just above the arrival (costs a barrier per phase, keeps the
  count).
"""

from __future__ import annotations

from cake_core.diagnostics import codes
from cake_core.diagnostics.model import Diagnostic, Fix, Related, TextEdit
from cake_core.ir.kernel import IfOp, Op, walk_nodes
from cake_core.verify.arrivers import Counted
from cake_core.verify.effects import Effects, barrier_parts, effects_of
from cake_core.verify.facts import KernelFacts
from cake_core.verify.unroll import Agent


def leader_release_finding(facts: KernelFacts, agent: Agent, op: Op, eff: Effects,
                           unsynced: list[Op]) -> Diagnostic:
    assert eff.arrive is not None
    name, _ = barrier_parts(eff.arrive)
    last = unsynced[-1]
    what = "arrival" if not eff.expect_bytes else "expect_tx arrival"
    related = [Related(last.span, f"every warp of {agent.label} uses shared memory here")]
    related += [Related(o.span, "and here") for o in _distinct(unsynced[:-1])[-2:]]
    fixes: list[Fix] = []
    per_warp = _per_warp_fix(facts, agent, op, eff, name)
    if per_warp is not None:
        fixes.append(per_warp)
    sync = _sync_fix(facts, agent, op)
    if sync is not None:
        fixes.append(sync)
    return codes.LEADER_RELEASE_RACE.at(
        op.span, f"one elected thread makes this {what} on `{name}` for the {agent.warps} "
        f"warps of {agent.label}, but its warps do not run in lockstep: the arrival orders only "
        "the elected thread's warp, so a waiter can overwrite shared memory another warp is "
        "still using", related=related, fixes=fixes,
        notes=("let every warp arrive (`per=\"warp\"`, counting role warps x count arrivals), "
               "or meet the role's warps at a named barrier just before the arrival",))


def partial_release_finding(agent: Agent, op: Op, eff: Effects, counted: Counted,
                            unsynced: list[Op]) -> Diagnostic:
    """CK313 for a per-thread or per-warp arrival a lane, warp or thread condition keeps
    some warps out of: as with an elected arrival, the warps that do not arrive are not
    ordered before the phase, and they have used shared memory since the role last met."""
    assert eff.arrive is not None
    name, _ = barrier_parts(eff.arrive)
    last = unsynced[-1]
    related = [Related(last.span, f"every warp of {agent.label} uses shared memory here")]
    if counted.guard is not None:
        span = counted.guard.cond.span if isinstance(counted.guard, IfOp) else \
            counted.guard.span
        related.append(Related(span, "this decides who arrives"))
    return codes.LEADER_RELEASE_RACE.at(
        op.span, f"this arrival on `{name}` is made only by {counted.who}: {counted.warps_out} of "
        f"the {agent.warps} warps of {agent.label} do not arrive, and its warps do not run "
        "in lockstep, so a waiter can overwrite shared memory those warps are still using",
        related=related,
        notes=("meet the role's warps at a named barrier (`barrier_sync(id, warps)`) before "
               "the condition, or let every warp arrive (`per=\"warp\"` outside it)",))


def _distinct(ops: list[Op]) -> list[Op]:
    seen: set[int] = set()
    out: list[Op] = []
    for o in ops:
        if id(o) not in seen:
            seen.add(id(o))
            out.append(o)
    return out


def _per_warp_fix(facts: KernelFacts, agent: Agent, op: Op, eff: Effects, name: str
                  ) -> Fix | None:
    """`per="warp"`, and the barrier's count raised by the arrivals that adds."""
    if eff.expect_bytes is not None or op.prim.effects.arrive_scope is None:
        return None
    decl = facts.barriers.get(name)
    if decl is None or "count" not in decl[1].arg_spans or agent.role is None:
        return None
    sites = [o for o in walk_nodes(agent.role.body) if isinstance(o, Op) and _arrives_on(o, name)]
    n = eff.arrive_count or 1
    edits = [_per_edit(facts, op, "warp"),
             TextEdit(decl[1].arg_spans["count"], str(decl[0].count + n * (agent.warps - 1)))]
    if len(sites) != 1:
        return None  # several arrival sites share the count: one edit per site would clash
    return Fix(f"let every warp of {agent.label} arrive: `per=\"warp\"`, count "
               f"{decl[0].count + n * (agent.warps - 1)}", tuple(edits))


def _arrives_on(op: Op, name: str) -> bool:
    eff = effects_of(op)
    return eff.arrive is not None and barrier_parts(eff.arrive)[0] == name


def _per_edit(facts: KernelFacts, op: Op, scope: str) -> TextEdit:
    if "per" in op.arg_spans:
        return TextEdit(op.arg_spans["per"], f'"{scope}"')
    end = op.span.end.offset - 1  # just inside the call's closing parenthesis
    sep = ", " if any(k != "self" for k in op.arg_spans) else ""
    return TextEdit(facts.source.span(end, end), f'{sep}per="{scope}"')


def _sync_fix(facts: KernelFacts, agent: Agent, op: Op) -> Fix | None:
    """A named barrier over the role's warps just above the arrival."""
    free = facts.free_named_barrier()
    if free is None:
        return None
    call = f"barrier_sync({free}, {facts.spell(agent.warps)})"
    return Fix(f"meet the role's warps first: `{call}`", (facts.insert_before(op.span, call),))


__all__ = ["leader_release_finding", "partial_release_finding"]
