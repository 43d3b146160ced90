"""Raw mbarrier initialisation made visible before use (CK310).

`mbarrier(count=...)` is initialised by one thread.  Other threads, and the TMA unit
(the async proxy), see the initialised barrier only after `fence_barrier_init()` and a
block-wide `syncthreads()`; before that a role may arrive on or wait for garbage.  A
`pipeline` does this for its own barriers, so only raw ones are checked.
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
    last = allocs[-1]
    fence: Op | None = None
    sync: Op | None = None
    for node in body[last + 1:]:
        use = _uses_barrier(node)
        if use is not None:
            return [_report(facts, body[last], fence, use)] if sync is None else []
        if isinstance(node, Op) and node.prim.effects.fence == "mbarrier_init":
            fence = node
        elif isinstance(node, Op) and node.prim.effects.fence == "block" and fence is not None:
            sync = node
    return []


def _report(facts: KernelFacts, alloc: Node, fence: Op | None, use: Op) -> Diagnostic:
    assert isinstance(alloc, Op)
    if fence is None:
        missing = "`fence_barrier_init()` and `syncthreads()`"
        lines = f"fence_barrier_init()\n{facts.indent_of(alloc.span)}syncthreads()"
        fix = Fix("publish the barriers: `fence_barrier_init()` then `syncthreads()`",
                  (facts.insert_after(alloc.span, lines),))
    else:
        missing = "`syncthreads()` after `fence_barrier_init()`"
        fix = Fix("add `syncthreads()`", (facts.insert_after(fence.span, "syncthreads()"),))
    role = f" in role {use.role!r}" if use.role else ""
    return codes.BARRIER_INIT_NOT_VISIBLE.at(
        alloc.span, f"the mbarriers created here are used{role} (line {use.span.start.line + 1}) "
        f"without {missing} in between: other threads and the TMA unit may see them "
        "uninitialised", related=[Related(use.span, "first use")], fixes=[fix])

