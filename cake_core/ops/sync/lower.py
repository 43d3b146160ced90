"""Lower facets of synchronisation: pipelines, raw mbarriers, block and named barriers, fences.

A pipeline keeps, in each role that uses it, one cursor per side: the producer's
`<pipe>_acquire` (next stage, parity of the *empty* barriers it waits for, starting at 1:
a fresh barrier's phase "-1" counts as complete, so the first pass over the ring does not
block) and `<pipe>_commit`; each consumer's `<pipe>_wait` (parity of the *full* barriers,
starting at 0) and `<pipe>_release`.  One phase variable per (barrier set, role), flipped
each time the cursor wraps around the ring.

Arrivals: a role that runs in one elected thread arrives once; any other role arrives
once per warp (`__syncwarp()` then lane 0), after every lane of the warp has finished
with the stage.  The barrier counts set at initialisation match (see `plan.PipeInfo`).
"""

from __future__ import annotations

from cake_core.ir.kernel import Op
from cake_core.ir.types import StageType
from cake_core.lower.context import LowerContext
from cake_core.lower.emitter import c_identifier
from cake_core.lower.plan import LowerError
from cake_core.primitives.registry import peer_rank
from cake_core.verify.effects import arrival_scope

_STAGE = StageType("", 0, "")


def _stage_result(op: Op, ctx: LowerContext) -> tuple[str, str, str | None]:
    """The stage variable (`int s` or `s`), and its `.phase` companion when one is read."""
    r = op.results[0]
    names = ctx.plan.bindings.names_of(op) or (r.name,)
    name = names[0]
    hit = ctx.lookup(("var", name))
    if isinstance(hit, str):
        cname, decl = hit, ""
    else:
        cname = ctx.plan.slot_names.get((op.role, name, _STAGE)) or c_identifier(name)
        decl = "int "
        ctx.declare(("var", name), cname)
    for other in names[1:]:
        ctx.declare(("var", other), cname)
    phase = None
    if name in ctx.plan.phase_names:
        hit = ctx.lookup(("var", f"{name}.phase"))
        if isinstance(hit, str):
            phase = hit
        else:
            phase = ctx.names.internal(f"{cname}_phase")
            ctx.declare(("var", f"{name}.phase"), phase)
            phase = "uint32_t " + phase  # declared where it is first set
    return cname, decl, phase


def _cursor(ctx: LowerContext, op: Op, side: str) -> tuple[dict[str, str], int]:
    t, names = ctx.pipe(op.args["self"])
    if side not in names or not ctx.visible(names[side]):
        raise LowerError(op.span, f"`{t.name}.{op.prim.name}()` runs outside the role that "
                         f"owns this side of the pipeline")
    return names, t.stages


def pipeline_acquire(op: Op, ctx: LowerContext) -> str:
    names, stages = _cursor(ctx, op, "acquire")
    cname, decl, phase = _stage_result(op, ctx)
    tx = ctx.plan.tx_bytes.get(id(op), 0)
    who = "true" if ctx.g.single else "leader"
    pre = ""
    if phase is not None:  # the full barrier's phase this stage is filled for
        pre = f"{phase} = {names['acquire']}.phase ^ 1u; "
    ctx.features.add("mbarrier")
    return (f"{pre}{decl}{cname} = cake_pipe_acquire({names['acquire']}, {names['full']}, "
            f"{names['empty']}, {stages}, {tx}u, {who});")


def pipeline_commit(op: Op, ctx: LowerContext) -> str:
    names, stages = _cursor(ctx, op, "commit")
    ctx.features.add("mbarrier")
    if ctx.g.single:
        return f"cake_pipe_arrive({names['commit']}, {names['full']}, {stages}, true);"
    return f"__syncwarp(); cake_pipe_arrive({names['commit']}, {names['full']}, {stages}, " \
           "lane == 0);"


def pipeline_wait(op: Op, ctx: LowerContext) -> str:
    names, stages = _cursor(ctx, op, "wait")
    cname, decl, phase = _stage_result(op, ctx)
    pre = f"{phase} = {names['wait']}.phase; " if phase is not None else ""
    ctx.features.add("mbarrier")
    return f"{pre}{decl}{cname} = cake_pipe_wait({names['wait']}, {names['full']}, {stages});"


def pipeline_release(op: Op, ctx: LowerContext) -> str:
    names, stages = _cursor(ctx, op, "release")
    ctx.features.add("mbarrier")
    if ctx.g.single:
        return f"cake_pipe_arrive({names['release']}, {names['empty']}, {stages}, true);"
    return f"__syncwarp(); cake_pipe_arrive({names['release']}, {names['empty']}, {stages}, " \
           "lane == 0);"


def mbarrier_arrive(op: Op, ctx: LowerContext) -> str:
    """Exactly the arrivals `per` names: every thread, lane 0 of every warp once the warp's
    lanes have met, or the role's elected thread once its own warp's lanes have met (the
    other warps of the role are not ordered before it: CK313).  Inside `elect_one()` the
    code already runs in that one thread, whose lanes are elsewhere: a `__syncwarp()` there
    would wait for lanes that never come, so the arrival is made as it stands.  Under a
    condition that splits a warp's lanes the meeting cannot be made either, which the
    verifier reports (CK314); `per="thread"` lowers to one arrival per thread that runs it,
    the count `arrivers.py` takes."""
    bar = ctx.barrier(op.args["self"])
    count = ctx.int_value(op.args["count"])
    ctx.features.add("mbarrier")
    code = f"cake_mbar_arrive({bar});" if count == "1" else f"cake_mbar_arrive_n({bar}, {count});"
    peer = peer_rank(op)
    if peer is not None:
        ctx.features.add("cluster")
        code = f"cake_mbar_arrive_cluster({bar}, {ctx.int_value(peer)}, {count});"  # type: ignore[arg-type]
    scope = arrival_scope(op)
    if scope == "thread":
        return code
    if ctx.g.single or ctx.elected:  # already in the one elected thread: no lanes to meet
        return code
    if scope == "warp":
        return f"__syncwarp(); if (lane == 0) {{ {code} }}"
    return "__syncwarp(); " + ctx.leader(code)


def mbarrier_expect_tx(op: Op, ctx: LowerContext) -> str:
    bar = ctx.barrier(op.args["self"])
    nbytes = ctx.int_value(op.args["bytes"])
    ctx.features.add("mbarrier")
    return ctx.leader(f"cake_mbar_arrive_expect_tx({bar}, {nbytes});")


def mbarrier_wait(op: Op, ctx: LowerContext) -> str:
    bar = ctx.barrier(op.args["self"])
    parity = ctx.int_value(op.args["parity"])
    ctx.features.add("mbarrier")
    p = parity if parity in ("0", "1") else f"uint32_t({parity}) & 1u"
    return f"cake_mbar_wait({bar}, {p});"


def syncthreads(op: Op, ctx: LowerContext) -> str:
    return "__syncthreads();"


def cluster_sync(op: Op, ctx: LowerContext) -> str:
    ctx.features.add("cluster")
    return "cake_cluster_sync();"


def _named(op: Op, ctx: LowerContext, fn: str) -> str:
    bid = ctx.int_value(op.args["id"])
    warps = op.args["warps"].sym.const if op.args["warps"].sym is not None else None
    if warps is None:
        raise LowerError(op.span, "a named barrier's warp count must be a constant")
    return f"{fn}({bid}, {warps * 32});"


def barrier_sync(op: Op, ctx: LowerContext) -> str:
    return _named(op, ctx, "cake_bar_sync")


def barrier_arrive(op: Op, ctx: LowerContext) -> str:
    return _named(op, ctx, "cake_bar_arrive")


def fence_proxy_async(op: Op, ctx: LowerContext) -> str:
    ctx.features.add("tma")
    return "cake_fence_proxy_async();"


def fence_barrier_init(op: Op, ctx: LowerContext) -> str:
    ctx.features.add("mbarrier")
    return "cake_fence_barrier_init();"


__all__ = ["barrier_arrive", "barrier_sync", "cluster_sync", "fence_barrier_init",
           "fence_proxy_async",
           "mbarrier_arrive", "mbarrier_expect_tx", "mbarrier_wait", "pipeline_acquire",
           "pipeline_commit", "pipeline_release", "pipeline_wait", "syncthreads"]
