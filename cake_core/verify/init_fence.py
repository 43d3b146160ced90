"""Raw mbarrier initialisation made visible before use (CK310).

`mbarrier(count=...)` is initialised by one thread.  Other threads, and the TMA unit
(the async proxy), see the initialised barrier only after `fence_barrier_init()` and a
block-wide `syncthreads()`; before that a role may arrive on or wait for garbage.  A
`pipeline` does this for its own barriers, so only raw ones are checked.

The finding is at the first use: that is where an uninitialised barrier is touched, and
a declaration is not wrong by itself (the fence may legitimately come later, as long as
it comes before any use).  The declaration is a related location.
"""

from __future__ import annotations

from cake_core.diagnostics import codes
from cake_core.diagnostics.model import Diagnostic, Fix, Related
from cake_core.ir.kernel import Node, Op, walk_nodes
from cake_core.ir.types import BarrierType
from cake_core.primitives.traits import Trait
from cake_core.verify.facts import KernelFacts


def _uses_barrier(node: Node) -> Op | None:
    nodes = [node] if isinstance(node, Op) else list(walk_nodes([node]))
    for n in nodes:
        if isinstance(n, Op) and Trait.ALLOCATES_BARRIER not in n.prim.traits and \
                any(isinstance(v.type, BarrierType) for v in n.args.values()):
            return n
    return None


def check(facts: KernelFacts) -> list[Diagnostic]:
    body = facts.kernel.body
    allocs = [i for i, n in enumerate(body)
              if isinstance(n, Op) and Trait.ALLOCATES_BARRIER in n.prim.traits]
    if not allocs:
        return []
    fence: Op | None = None
    sync: Op | None = None
    alloc: Op | None = None
    for node in body[allocs[0]:]:
        if isinstance(node, Op) and Trait.ALLOCATES_BARRIER in node.prim.traits:
            alloc, fence, sync = node, None, None  # a later barrier needs its own fence
            continue
        use = _uses_barrier(node)
        if use is not None and alloc is not None:
            return [_report(facts, alloc, fence, use)] if sync is None else []
        if isinstance(node, Op) and node.prim.effects.fence == "mbarrier_init":
            fence = node
        elif isinstance(node, Op) and node.prim.effects.fence == "block" and fence is not None:
            sync = node
    return []


def _report(facts: KernelFacts, alloc: Node, fence: Op | None, use: Op) -> Diagnostic:
    assert isinstance(alloc, Op)
    if fence is None:
        missing = "`fence_barrier_init()` and `syncthreads()` publish them"
        lines = f"fence_barrier_init()\n{facts.indent_of(alloc.span)}syncthreads()"
        fix = Fix("publish the barriers: `fence_barrier_init()` then `syncthreads()`",
                  (facts.insert_after(alloc.span, lines),))
    else:
        missing = "a `syncthreads()` after `fence_barrier_init()` publishes them"
        fix = Fix("add `syncthreads()`", (facts.insert_after(fence.span, "syncthreads()"),))
    role = f" in role {use.role!r}" if use.role else ""
    return codes.BARRIER_INIT_NOT_VISIBLE.at(
        use.span, f"the mbarriers created on line {alloc.span.start.line + 1} are used "
        f"here{role} before {missing}: other threads and the TMA unit may see them "
        "uninitialised", related=[Related(alloc.span, "created here")],
        fixes=[fix])

