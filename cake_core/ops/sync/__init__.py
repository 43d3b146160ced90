"""Synchronization: pipeline protocol, raw mbarriers, block and named barriers, fences."""

from __future__ import annotations

from cake_core.diagnostics import codes
from cake_core.hardware import Feature
from cake_core.ir.types import (
    BarrierType,
    ErrorType,
    IntType,
    NoneType,
    PipelineType,
    StageType,
    StrType,
    Type,
)
from cake_core.primitives.facets import FacetModules
from cake_core.primitives.registry import (
    ARRIVAL_SCOPES,
    EffectSpec,
    PipeAction,
    Primitive,
    param,
)
from cake_core.primitives.traits import Trait
from cake_core.primitives.typecheck import CallContext

#: Where this family's facets live; each primitive names its own attribute.
_FACETS = FacetModules(cost="cake_core.ops.sync.cost",
                       simulate="cake_core.ops.sync.sim",
                       lower="cake_core.ops.sync.lower")



def _role_check(ctx: CallContext, side: str) -> bool:
    p = ctx.type("self")
    assert isinstance(p, PipelineType)
    roles = (p.producer,) if side == "producer" else p.consumers
    if ctx.role is not None and ctx.role not in roles:
        want = " or ".join(repr(r) for r in roles)
        # `data` lets the builder drop this as an echo when the pipeline names a role
        # the kernel never declares (that mistake is reported on the pipeline itself)
        ctx.diagnostics.append(codes.BAD_ROLE.at(
            ctx.span, f"`{p.name}.{ctx.prim.name}()` is a {side} operation, but it runs in "
            f"role {ctx.role!r}; the pipeline's {side} is {want}",
            data={"pipeline": p.name}))
        return False
    return True


def _stage_rule(side: str):
    def rule(ctx: CallContext) -> Type:
        if not _role_check(ctx, side):
            return ErrorType()
        p = ctx.type("self")
        assert isinstance(p, PipelineType)
        return StageType(p.name, p.stages, side)

    return rule


def _side_rule(side: str):
    def rule(ctx: CallContext) -> Type:
        if not _role_check(ctx, side):
            return ErrorType()
        return NoneType()

    return rule


def _barrier_rule(ctx: CallContext) -> Type:
    b = ctx.type("self")
    assert isinstance(b, BarrierType)
    if b.n > 1 and not b.indexed:
        return ctx.error(codes.BAD_INDEX, f"`{b.name}` holds {b.n} mbarriers; index one: "
                         f"`{b.name}[i].{ctx.prim.name}(...)`", "self")
    for name in ("bytes", "count"):
        if name in ctx.args and ctx.int(name) is not None and (ctx.int(name) or 0) < 0:
            return ctx.error(codes.BAD_ARGUMENTS, f"`{name}` must be >= 0", name)
    if "per" in ctx.args and ctx.const("per") not in ARRIVAL_SCOPES:
        want = ", ".join(f'"{s}"' for s in ARRIVAL_SCOPES)
        return ctx.error(codes.BAD_ARGUMENTS, f"`per` says who arrives: one of {want}", "per")
    return NoneType()


def _named_rule(ctx: CallContext) -> Type:
    bid, warps = ctx.int("id"), ctx.int("warps")
    if bid is None or warps is None:
        return ctx.error(codes.NOT_CONSTANT, "named barrier id and warp count must be constants")
    if not 0 <= bid < 16:
        return ctx.error(codes.BAD_ARGUMENTS, f"named barrier ids are 0..15, not {bid}", "id")
    if warps < 1:
        return ctx.error(codes.BAD_ARGUMENTS, "a named barrier needs at least one warp", "warps")
    return NoneType()


def _none(ctx: CallContext) -> Type:
    return NoneType()


_P = PipelineType
_B = BarrierType

PRIMITIVES = (
    Primitive(
        "acquire", "sync", (param("self", _P),), _stage_rule("producer"),
        """Producer: wait until the next stage is empty and return its index.

Waits on the stage's *empty* barrier with the phase the pipeline tracks (empty barriers
start at phase 1, so the first pass over the ring does not block).""",
        effects=EffectSpec(waits="self", pipe_action=PipeAction.ACQUIRE), receiver=_P,
        requires=frozenset({Feature.MBARRIER}), facets=_FACETS.of("pipeline_acquire"),
        traits=frozenset({Trait.SINGLE_THREAD}),
    ),
    Primitive(
        "commit", "sync", (param("self", _P),), _side_rule("producer"),
        """Producer: publish the stage just filled.

With TMA copies the arrival carries the stage's transaction bytes (derived from the
copies issued since `acquire`); with other writes it is a plain arrival.""",
        effects=EffectSpec(arrives="self", pipe_action=PipeAction.COMMIT), receiver=_P,
        requires=frozenset({Feature.MBARRIER}), facets=_FACETS.of("pipeline_commit"),
        traits=frozenset({Trait.SINGLE_THREAD}),
    ),
    Primitive(
        "wait", "sync", (param("self", _P),), _stage_rule("consumer"),
        """Consumer: wait until the next stage is full and return its index.""",
        effects=EffectSpec(waits="self", pipe_action=PipeAction.WAIT), receiver=_P,
        requires=frozenset({Feature.MBARRIER}), facets=_FACETS.of("pipeline_wait"),
    ),
    Primitive(
        "release", "sync", (param("self", _P),), _side_rule("consumer"),
        """Consumer: hand the stage back to the producer (arrive on its empty barrier).

Every consumer role must release every stage it waited for, after its last read of it.""",
        effects=EffectSpec(arrives="self", pipe_action=PipeAction.RELEASE), receiver=_P,
        requires=frozenset({Feature.MBARRIER}), facets=_FACETS.of("pipeline_release"),
    ),
    Primitive(
        "arrive", "sync",
        (param("self", _B), param("count", IntType, default=1),
         param("per", StrType, default="role", const=True,
               doc='who arrives: "thread", "warp" or "role" (one elected thread)'),
         param("cta", IntType, default=-1,
               doc="cluster rank whose barrier (at this one's offset) gets the arrivals; "
                   "-1: this block's")),
        _barrier_rule,
        """Arrive `count` times on a raw mbarrier; `per` says who arrives.

- `per="thread"`: every thread of the role arrives `count` times (role threads x count
  arrivals); each thread's own accesses before it are ordered before the phase.
- `per="warp"`: each warp of the role arrives `count` times, from lane 0 once the warp's
  lanes have met (`__syncwarp`): role warps x count arrivals.
- `per="role"` (default): one elected thread of the role arrives `count` times.  Only
  that thread's warp is ordered before the arrival: in a role of several warps the
  others may still be reading what the arrival hands over (CK313), unless a
  `barrier_sync` over the role's warps comes first.

The barrier's phase completes when its initial count is reached, so the arrivals summed
over the roles that arrive must equal the count the barrier was created with.

`cta=r` (in a cluster) arrives on block `r`'s barrier at this barrier's offset instead
(`mbarrier.arrive.release.cluster` through `mapa`): a consumer handing a stage back to
the peer that multicasts into it.  Every block is assumed to make the mirrored arrival,
so the checker counts it as an arrival on this block's barrier.""",
        effects=EffectSpec(arrives="self", arrive_scope="per", peer="cta"), receiver=_B,
        requires=frozenset({Feature.MBARRIER}),
        facets=_FACETS.of("mbarrier_arrive"),
        traits=frozenset({Trait.SINGLE_THREAD}),
    ),
    Primitive(
        "expect_tx", "sync", (param("self", _B), param("bytes", IntType)), _barrier_rule,
        """Arrive on an mbarrier and add `bytes` to the transaction count of its current phase.

The phase completes when all arrivals happened and the TMA copies signalled that many
bytes.  Must equal exactly the bytes the copies deliver.""",
        effects=EffectSpec(arrives="self", tx_bytes=True), receiver=_B,
        requires=frozenset({Feature.MBARRIER_TX}), facets=_FACETS.of("mbarrier_expect_tx"),
        unsupported=("transaction counts on mbarriers (expect_tx) need sm_90; on sm_80 count "
                     "arrivals only (cp_async with mbarrier.arrive)"),
        traits=frozenset({Trait.SINGLE_THREAD}),
    ),
    Primitive(
        "wait", "sync", (param("self", _B), param("parity", IntType)), _barrier_rule,
        """Block until the mbarrier phase with the given `parity` (0 or 1) has completed.""",
        effects=EffectSpec(waits="self"), receiver=_B, requires=frozenset({Feature.MBARRIER}),
        facets=_FACETS.of("mbarrier_wait"),
    ),
    Primitive(
        "syncthreads", "sync", (), _none,
        """Block-wide barrier (bar.sync 0): every thread of the block, in every role, arrives.""",
        effects=EffectSpec(fence="block"), facets=_FACETS.of("syncthreads"),
        traits=frozenset({Trait.BLOCK_BARRIER}),
    ),
    Primitive(
        "cluster_sync", "sync", (), _none,
        """Cluster-wide barrier: every thread of every block of the cluster arrives and waits.

Lowered to `barrier.cluster.arrive.release` + `barrier.cluster.wait.acquire`.
Needed after `fence_barrier_init()` before a TMA multicast delivers into a peer's smem
(CK323), and at the end of a kernel whose peers multicast into its smem (CK324).  It
orders the block like `syncthreads()` as well.""",
        effects=EffectSpec(fence="block"), requires=frozenset({Feature.CLUSTERS}),
        facets=_FACETS.of("cluster_sync"),
        traits=frozenset({Trait.BLOCK_BARRIER, Trait.CLUSTER_BARRIER}),
        unsupported="thread-block clusters need sm_90; use syncthreads() within a block",
    ),
    Primitive(
        "barrier_sync", "sync",
        (param("id", IntType, const=True), param("warps", IntType, const=True)), _named_rule,
        """Named barrier (bar.sync id, warps*32): wait until `warps` warps arrived on `id`.""",
        effects=EffectSpec(fence="named"), facets=_FACETS.of("barrier_sync"),
    ),
    Primitive(
        "barrier_arrive", "sync",
        (param("id", IntType, const=True), param("warps", IntType, const=True)), _named_rule,
        """Arrive on named barrier `id` without waiting (bar.arrive): the producer side.""",
        effects=EffectSpec(fence="named_arrive"), facets=_FACETS.of("barrier_arrive"),
    ),
    Primitive(
        "fence_proxy_async", "sync", (), _none,
        """Order this thread's generic-proxy smem writes before later async-proxy (TMA) reads.

Needed between `store(smem_view, ...)` and a `tma_store` reading the same buffer.""",
        effects=EffectSpec(fence="proxy_async"), requires=frozenset({Feature.TMA}),
        facets=_FACETS.of("fence_proxy_async"),
        unsupported=("fence.proxy.async orders generic-proxy writes before TMA reads, and TMA "
                     "needs sm_90; on sm_80 a plain store() needs no proxy fence"),
        traits=frozenset({Trait.SINGLE_THREAD}),
    ),
    Primitive(
        "fence_barrier_init", "sync", (), _none,
        """Make mbarrier initialisation visible to the async proxy and other threads.

Follow with `syncthreads()` (or a cluster sync) before any role uses the barriers.""",
        effects=EffectSpec(fence="mbarrier_init"), requires=frozenset({Feature.MBARRIER}),
        facets=_FACETS.of("fence_barrier_init"),
        traits=frozenset({Trait.BARRIER_INIT_FENCE}),
    ),
)
