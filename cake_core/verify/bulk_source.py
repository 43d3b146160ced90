"""CK316, and the repair of CK308 for TMA stores: who waits for a bulk store's source.

A `tma_store` is issued by one thread of its role, and its bulk group belongs to that
thread: `tma_store_wait(n)` in the issuing thread is what says the store has read its
shared-memory source.  The other threads of the role know nothing of that wait until they
meet the issuing thread at a barrier placed *after* it.  So a write to the source by the
role's threads (a `store` of a fragment, cp.async chunks) is safe only when such a barrier
lies between the wait and the write; without one it races with the store still reading.

The finding is reported at the overwriting write: that is the access that races, the one
place that is wrong whatever else the kernel does (the wait may be right for a later
one-thread write, and the barrier may be missing for several writes: each names its own).
"""

from __future__ import annotations

from cake_core.diagnostics import codes
from cake_core.diagnostics.model import Diagnostic, Fix, Related, TextEdit
from cake_core.ir.kernel import Op
from cake_core.primitives.traits import Trait
from cake_core.verify.effects import Region
from cake_core.verify.facts import KernelFacts
from cake_core.verify.unroll import Agent


def by_one_thread(op: Op) -> bool:
    """The op runs in the role's issuing thread only (its one-thread ops, `elect_one()`)."""
    return Trait.SINGLE_THREAD in op.prim.traits


def meeting(facts: KernelFacts, agent: Agent) -> str | None:
    """A barrier over the agent's warps, on a named barrier no op of the kernel uses."""
    if agent.role is None:
        return "syncthreads()"
    free = facts.free_named_barrier()
    return None if free is None else f"barrier_sync({free}, {agent.warps})"


def wait_fix(facts: KernelFacts, agent: Agent, write: Op, barrier: Op | None) -> list[Fix]:
    """CK308's repair for a write into a TMA store's source still being read.

    A one-thread write runs in the issuing thread: the wait just above it covers it.  A
    write by the role's threads needs the wait in the issuing thread *before* a barrier
    they pass: before the barrier the role already meets at since the store, or a new
    barrier just above the write, after the wait."""
    if by_one_thread(write):
        return [Fix("wait for the store first", (facts.insert_before(
            write.span, "tma_store_wait(0)"),))]
    if barrier is not None:
        return [Fix("wait for the store in the issuing thread before the barrier that "
                    "releases the other threads", (facts.insert_before(
                        barrier.span, "tma_store_wait(0)"),))]
    meet = meeting(facts, agent)
    if meet is None:
        return []
    indent = facts.indent_of(write.span)
    start = write.span.start.offset - write.span.start.col_byte
    return [Fix(f"wait for the store in the issuing thread, then meet the role's warps: "
                f"`tma_store_wait(0)`, `{meet}`", (TextEdit(
                    facts.source.span(start, start),
                    f"{indent}tma_store_wait(0)\n{indent}{meet}\n"),))]


def overwritten_finding(facts: KernelFacts, agent: Agent, write: Op, region: Region,
                        store: Op, wait: Op) -> Diagnostic:
    meet = meeting(facts, agent)
    fixes = [] if meet is None else [Fix(
        f"meet the role's warps after the wait: `{meet}`",
        (facts.insert_before(write.span, meet),))]
    return codes.BULK_SOURCE_OVERWRITTEN.at(
        write.span, f"the threads of {agent.label} overwrite {region.describe()}, the source "
        f"of the tma_store on line {store.span.start.line + 1}, but only the thread that "
        f"issued the store waited for it (line {wait.span.start.line + 1}) and no barrier "
        "since tells the others: the store may still be reading it",
        related=[Related(store.span, "the store, issued by one thread"),
                 Related(wait.span, "waits in the issuing thread only")],
        notes=("a bulk group belongs to the thread that committed it: put a barrier over the "
               "role's warps after the wait, or a wait before the barrier the role already "
               "meets at",),
        fixes=fixes)


__all__ = ["by_one_thread", "overwritten_finding", "wait_fix"]
