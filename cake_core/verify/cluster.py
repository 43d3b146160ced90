"""TMA multicast and peer arrivals across a thread-block cluster (CK323, CK324, CK325).

A multicast copy writes another block's shared memory and completes on that block's
mbarrier.  Two things the issuing block cannot see for itself must hold:

Arrivals on a peer's mbarrier (`arrive(cta=...)`) reach another block the same way and
follow CK323 and CK324 as well.

- CK323: the peer's barriers are initialised before the copy reaches them.  Each block
  initialises its own; only a `cluster_sync()` after the initialisation (and the
  `fence_barrier_init()` that makes it visible cluster-wide) orders it before any
  block of the cluster issues.  `syncthreads()` orders one block only.
- CK325: a multicast in a loop overwrites the peers' buffer every iteration, so the
  peers must have finished reading the previous iteration's data first.  The issuing
  block's own waits say nothing about the peers; a `cluster_sync()` in the loop (after
  the reads, before the next copy) is the handshake the language has.
- CK324: a block stays alive while peers still write into its shared memory.  A block
  that skips its wait (a branch, a block past the tensor) may exit while a peer's copy
  into it is in flight, or before the peer has even issued it; the copy then lands in
  memory the SM has handed to another block.  The programming model asks for a cluster
  barrier after the last distributed-shared-memory access; CAKE does not prove every
  path of every block waits for its bytes, so it asks for that barrier: a top-level
  `cluster_sync()` after the last multicast, or one ending the loop that holds it.

Both are about where the kernel's top-level statements put the cluster barrier, so the
check walks the top level: a `cluster_sync()` inside a role or a branch does not run on
every thread and is no cluster barrier at all.

The mask itself is checked here too (it needs the kernel's cluster shape, which a type
rule does not see): a rank outside the cluster, or a multicast in a kernel with no
cluster, is a bad argument.
"""

from __future__ import annotations

from cake_core.diagnostics import codes
from cake_core.diagnostics.model import Diagnostic, Fix, Related
from cake_core.ir.kernel import ForOp, Node, Op, walk_nodes
from cake_core.ir.types import BarrierType
from cake_core.primitives.registry import multicast_mask, peer_rank
from cake_core.primitives.traits import Trait
from cake_core.verify.facts import KernelFacts


def _remote(node: Node) -> list[Op]:
    """Ops that touch another block's shared memory: multicasts and peer arrivals."""
    nodes = [node] if isinstance(node, Op) else list(walk_nodes([node]))
    return [n for n in nodes
            if isinstance(n, Op) and (multicast_mask(n) or peer_rank(n) is not None)]


def _what(op: Op) -> str:
    return "multicast" if multicast_mask(op) else "arrival on a peer's mbarrier"


def _allocates_barriers(node: Node) -> bool:
    return isinstance(node, Op) and bool(
        {Trait.ALLOCATES_BARRIER, Trait.DECLARES_PIPELINE} & node.prim.traits)


def _is_cluster_sync(node: Node) -> bool:
    return isinstance(node, Op) and Trait.CLUSTER_BARRIER in node.prim.traits


def cluster_size(facts: KernelFacts) -> int:
    size = 1
    for c in facts.kernel.cluster:
        size *= c
    return size


def check(facts: KernelFacts) -> list[Diagnostic]:
    body = facts.kernel.body
    remote = [op for n in body for op in _remote(n)]
    if not remote:
        return []
    size = cluster_size(facts)
    bad = [_mask_error(facts, op, size) for op in remote]
    found = [d for d in bad if d is not None]
    if found:
        return found
    return [*_unpublished(facts), *_early_exit(facts), *_unguarded_reuse(facts)]


def _mask_error(facts: KernelFacts, op: Op, size: int) -> Diagnostic | None:
    mask = multicast_mask(op)
    param = op.prim.effects.multicast if mask else op.prim.effects.peer
    span = op.arg_spans.get(param or "", op.span)
    if size <= 1:
        return codes.BAD_ARGUMENTS.at(
            span, f"an {_what(op)} needs a thread-block cluster: the kernel has none"
            if not mask else "a multicast copy needs a thread-block cluster: the kernel "
            "has none",
            notes=["declare one on the kernel, e.g. `@kernel(..., cluster=(2, 1))`"])
    if mask >> size:
        return codes.BAD_ARGUMENTS.at(
            span, f"multicast mask {mask:#x} names cluster ranks past {size - 1}: the "
            f"cluster {tuple(facts.kernel.cluster)} has {size} blocks")
    return None


def _unpublished(facts: KernelFacts) -> list[Diagnostic]:
    """CK323: the first multicast not preceded by a cluster barrier after the last
    barrier allocation (one finding: every later copy has the same cause)."""
    alloc: Op | None = None
    synced = True
    for node in facts.kernel.body:
        if _allocates_barriers(node):
            assert isinstance(node, Op)
            alloc, synced = node, False
            continue
        if _is_cluster_sync(node):
            synced = True
            continue
        casts = _remote(node)
        if casts and not synced:
            return [_report_unpublished(facts, alloc, casts[0], node)]
    return []


def _report_unpublished(facts: KernelFacts, alloc: Op | None, cast: Op,
                        top: Node) -> Diagnostic:
    related = [Related(alloc.span, "the barriers are created here")] if alloc else []
    top_span = top.span
    fix = Fix("publish the barriers to the cluster: `cluster_sync()` before this statement",
              (facts.insert_before(top_span, "cluster_sync()"),))
    return codes.MULTICAST_BEFORE_CLUSTER_SYNC.at(
        cast.span, f"this {_what(cast)} lands on the peers' mbarriers, but no `cluster_sync()` "
        "after their creation made them visible: a peer may not have initialised its "
        "barrier yet, and the copy's bytes are lost or corrupt it",
        related=related, fixes=[fix],
        notes=["`syncthreads()` orders one block only; `fence_barrier_init()` then "
               "`cluster_sync()` publishes every block's barriers to the whole cluster"])


def _early_exit(facts: KernelFacts) -> list[Diagnostic]:
    """CK324: a multicast after the kernel's last top-level cluster barrier."""
    body = facts.kernel.body
    last_cast = max(i for i, n in enumerate(body) if _remote(n))
    if any(_is_cluster_sync(n) for n in body[last_cast + 1:]):
        return []
    top = body[last_cast]
    if isinstance(top, ForOp) and _synced_after_last_cast(top.body):
        return []  # every iteration ends its copies with a cluster barrier, the last too
    cast = _remote(body[last_cast])[-1]
    last = body[-1]
    fix = Fix("keep every block until the cluster is done: `cluster_sync()` at the end",
              (facts.insert_after(last.span, "cluster_sync()", indent_like=body[0].span),))
    return [codes.CLUSTER_EXIT_BEFORE_PEERS.at(
        cast.span, f"this {_what(cast)} reaches a peer's shared memory, but no "
        "`cluster_sync()` follows it: a block that finishes first may exit while a "
        "peer's copy or arrival into it is still in flight",
        related=[Related(last.span, "the kernel's last statement")], fixes=[fix])]


def _synced_after_last_cast(body: list[Node]) -> bool:
    last = max((i for i, n in enumerate(body) if _remote(n)), default=None)
    return last is not None and any(_is_cluster_sync(n) for n in body[last + 1:])


def _barrier_name(op: Op, param: str | None) -> str | None:
    v = op.args.get(param) if param else None
    return v.type.name if v is not None and isinstance(v.type, BarrierType) else None


def _unguarded_reuse(facts: KernelFacts) -> list[Diagnostic]:
    """CK325: a multicast inside a loop whose body has no cluster barrier, and waits on no
    barrier that peers arrive on (`arrive(cta=...)`, the consumer-release handshake)."""
    peered = {_barrier_name(op, op.prim.effects.arrives) for op in facts.kernel.ops()
              if peer_rank(op) is not None} - {None}
    out: list[Diagnostic] = []
    for node in facts.kernel.walk():
        if not isinstance(node, ForOp):
            continue
        inner = list(walk_nodes(node.body))
        if any(isinstance(n, Op) and _is_cluster_sync(n) for n in inner):
            continue
        if any(isinstance(n, Op) and _barrier_name(n, n.prim.effects.waits) in peered
               for n in inner):
            continue
        casts = [n for n in inner if isinstance(n, Op) and multicast_mask(n)]
        if not casts:
            continue
        cast = casts[0]
        out.append(codes.MULTICAST_PEER_REUSE.at(
            cast.span, "this multicast overwrites the peers' buffer on every iteration, but "
            "nothing in the loop waits for the peers to finish reading the previous "
            "iteration's data: a faster block overwrites a tile a slower peer still reads",
            related=[Related(node.span, "the loop")],
            notes=["end each iteration with `cluster_sync()` once the data is consumed "
                   "(after `wgmma_wait(0)`), or have the consumers hand the buffer back to "
                   "the peer too (`empty[s].arrive(cta=peer)`) and wait on that barrier "
                   "before the copy"]))
        break  # one finding: every nested loop shares the cause
    return out
