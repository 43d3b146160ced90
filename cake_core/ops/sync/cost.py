"""Cost facets of synchronization: each op is an event whose latency the model prices.

Waits that find their phase already complete still cost a poll and a hand-off; that
residue is what the sync latencies stand for.  Time spent waiting for data is not here:
the model charges it to memory latency, where it belongs.
"""

from __future__ import annotations

from cake_core.cost.record import CostContext, CostRecord
from cake_core.ir.kernel import Op


def _event(kind: str) -> CostRecord:
    return CostRecord(sync=((kind, 1.0),), issue=1.0)


def pipeline_acquire(op: Op, ctx: CostContext) -> CostRecord:
    return _event("mbarrier_wait")


def pipeline_commit(op: Op, ctx: CostContext) -> CostRecord:
    return _event("mbarrier_arrive")


def pipeline_wait(op: Op, ctx: CostContext) -> CostRecord:
    return _event("mbarrier_wait")


def pipeline_release(op: Op, ctx: CostContext) -> CostRecord:
    return _event("mbarrier_arrive")


def mbarrier_arrive(op: Op, ctx: CostContext) -> CostRecord:
    return _event("mbarrier_arrive")


def mbarrier_expect_tx(op: Op, ctx: CostContext) -> CostRecord:
    return _event("mbarrier_arrive")


def mbarrier_wait(op: Op, ctx: CostContext) -> CostRecord:
    return _event("mbarrier_wait")


def syncthreads(op: Op, ctx: CostContext) -> CostRecord:
    return _event("block_barrier")


def cluster_sync(op: Op, ctx: CostContext) -> CostRecord:
    return _event("block_barrier")


def barrier_sync(op: Op, ctx: CostContext) -> CostRecord:
    return _event("named_barrier")


def barrier_arrive(op: Op, ctx: CostContext) -> CostRecord:
    return _event("mbarrier_arrive")


def fence_proxy_async(op: Op, ctx: CostContext) -> CostRecord:
    return _event("fence")


def fence_barrier_init(op: Op, ctx: CostContext) -> CostRecord:
    return _event("fence")
