"""`warp-specialize`: one role that both copies (TMA) and computes (wgmma) -> producer and
consumer roles connected by a pipeline.

Recognised input (sm_90a, no roles or one role over every warp, no warp-position
indices): a main loop whose body issues TMA copies and wgmmas, synchronised either by one
raw mbarrier (`expect_tx` + `tma_load(..., bar)` + `bar.wait(parity)` + `syncthreads()`)
or by a pipeline whose producer and consumer are that one role.  The rewrite

- gives the copies to a new producer warpgroup (warps 0..4, few registers): the loop
  header, `acquire`, the `tma_load`s, `commit`;
- gives everything else to the original warps, now the consumer role (high registers):
  the fragments declared before the loop, the loop with `wait`, the math, `release` after
  the last read of the stage (after a `wgmma_wait(0)` when that read is a wgmma), and the
  epilogue;
- adds a stage dimension to single-buffered TMA destinations (a new `STAGES` constant)
  and replaces the raw mbarrier, its init fence and the block barriers by the pipeline.

The kernel grows by one warpgroup: the math warps keep their accumulator slabs.  The
rewrite is offered only when the result verifies.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from cake_core.diagnostics.model import TextEdit
from cake_core.hardware import Feature, get_arch
from cake_core.ir.kernel import Kernel
from cake_core.ir.types import BarrierType, PipelineType
from cake_core.plugins import Tactic, TacticResult
from cake_core.primitives.registry import Provenance
from cake_core.primitives.traits import Trait
from cake_core.rewrite_cost import verified_rewrite
from cake_core.source import SourceFile
from cake_core.syntax import ast
from cake_tactics.kernel_text import (
    WARP_INDICES,
    Stmt,
    all_warps_role,
    fresh_name,
    header_end,
    header_text,
    indent,
    indent_of,
    kernel_def,
    lines_span,
    names_in_text,
    rename,
    smem_args,
    statements,
    writes_buffers,
)

PRODUCER, CONSUMER = "load", "mma"
PRODUCER_OPS = frozenset({"tma_load", "expect_tx", "acquire", "commit", "tile"})
SYNC_OPS = frozenset({"wait", "release", "syncthreads"})
DECL_OPS = frozenset({"smem", "pipeline", "mbarrier"})
INIT_OPS = frozenset({"fence_barrier_init", "syncthreads"})
#: Ops that must not appear in the consumer once the copies have moved out.
FOREIGN_OPS = frozenset({"tma_load", "expect_tx", "acquire", "commit", "wait", "release",
                         "syncthreads", "barrier_sync", "barrier_arrive", "arrive",
                         "cp_async", "cp_async_commit", "cp_async_wait",
                         "fence_barrier_init"})
REGISTER_FILE = 65536


@dataclass
class Plan:
    """What the rewrite needs, read off the kernel."""

    kernel: Kernel
    decls: list[Stmt]
    """Statements kept at the top of the kernel (buffers, ints), in order."""
    sync_decl: Stmt
    """The raw mbarrier or the pipeline declaration (replaced by the new pipeline)."""
    pre: list[Stmt]
    """Consumer statements before the main loop (its fragments)."""
    loop: ast.For
    producer: list[Stmt]
    consumer: list[Stmt]
    release_after: int
    """Index into `consumer` after which the stage goes back."""
    post: list[Stmt]
    pipe: str
    stages: int | None
    """The pipeline's depth (None: single-buffered input, stages come from params)."""
    unstaged: list[str] = field(default_factory=list)
    """Buffers that get a stage dimension."""
    producer_stage: str = "s"
    consumer_stage: str = "s"
    body: list[Stmt] = field(default_factory=list)
    """Every statement the rewrite replaces, in order."""


def _is_sm90(kernel: Kernel) -> bool:
    spec = get_arch(kernel.arch)
    need = {Feature.TMA, Feature.WGMMA, Feature.SETMAXNREG}
    return spec is not None and need <= spec.features


def _plan(kernel: Kernel, source: SourceFile) -> Plan | None:
    if not _is_sm90(kernel) or kernel.warps % 4 or kernel.warps + 4 > 32 or \
            any(c > 1 for c in kernel.cluster) or len(kernel.roles) > 1:
        return None
    fn = kernel_def(source, kernel)
    if fn is None:
        return None
    body_text = source.snippet(fn.span)
    if any(w in body_text for w in WARP_INDICES):
        return None
    top = statements(source, kernel, fn.body, header_end(source, fn))
    if not kernel.roles:
        worker, outer = top, []
    else:
        in_role = all_warps_role(source, kernel, top)
        if in_role is None:
            return None
        worker, outer = in_role, top[:-1]
    loops = [i for i, s in enumerate(worker) if isinstance(s.node, ast.For)
             and s.has("tma_load") and s.has("wgmma")]
    if len(loops) != 1:
        return None
    li = loops[0]
    loop = worker[li].node
    assert isinstance(loop, ast.For)
    inner = statements(source, kernel, loop.body, loop.span.start.line)
    return _split(kernel, source, outer + worker[:li], loop, inner, worker[li + 1:],
                  top if not kernel.roles else [*outer, top[-1]])


def _bar_of(loop_stmts: list[Stmt]) -> tuple[str, BarrierType | PipelineType] | None:
    bars = {(op.args["bar"].type.name, type(op.args["bar"].type))  # type: ignore[attr-defined]
            for s in loop_stmts for op in s.ops if op.name == "tma_load"}
    if len(bars) != 1:
        return None
    op = next(op for s in loop_stmts for op in s.ops if op.name == "tma_load")
    t = op.args["bar"].type
    assert isinstance(t, BarrierType | PipelineType)
    return t.name, t


def _split(kernel: Kernel, source: SourceFile, pre_all: list[Stmt], loop: ast.For,
           inner: list[Stmt], post: list[Stmt], body: list[Stmt]) -> Plan | None:
    found = _bar_of(inner)
    if found is None:
        return None
    bar, bar_type = found
    raw = isinstance(bar_type, BarrierType)
    if not raw:
        assert isinstance(bar_type, PipelineType)
        if set(bar_type.consumers) != {bar_type.producer}:
            return None
    # buffers the copies fill, and whether they already have a stage dimension
    dsts = [op.args["dst"] for s in inner for op in s.ops if op.name == "tma_load"]
    staged = {d.type.is_view for d in dsts}  # type: ignore[attr-defined]
    if len(staged) != 1 or (raw and staged != {False}) or (not raw and staged != {True}):
        return None
    buffers = sorted({d.type.buffer for d in dsts})  # type: ignore[attr-defined]
    # statements before the loop
    decls: list[Stmt] = []
    pre: list[Stmt] = []
    sync_decl: Stmt | None = None
    mbarriers = 0
    for s in pre_all:
        if s.has("mbarrier"):
            mbarriers += 1
        if (s.has("mbarrier") or s.has("pipeline")) and bar in s.names_bound:
            sync_decl = s
        elif s.only(DECL_OPS) and not s.has("mbarrier", "pipeline"):
            decls.append(s)
        elif s.only(INIT_OPS) and s.ops and raw:
            continue  # the raw barrier's init fence and block barrier go with it
        elif s.ops and s.only({"fragment"} | _math_ops(s)):
            pre.append(s)
        else:
            return None
    if sync_decl is None or (raw and mbarriers != 1):
        return None
    # the loop body: copies, synchronisation, math
    producer: list[Stmt] = []
    consumer: list[Stmt] = []
    acquire_names: set[str] = set()
    wait_names: set[str] = set()
    for s in inner:
        if s.has("acquire"):
            if not isinstance(s.node, ast.Assign) or len(s.ops) != 1:
                return None
            acquire_names |= s.names_bound
        elif s.has("tma_load", "expect_tx", "commit"):
            if not s.only(PRODUCER_OPS):
                return None
            if not s.has("expect_tx", "commit"):
                producer.append(s)
        elif s.has(*SYNC_OPS):
            if not s.only(SYNC_OPS) or len(s.ops) != 1:
                return None
            if s.has("wait") and not raw:
                wait_names |= s.names_bound
        else:
            if s.has(*FOREIGN_OPS) or writes_buffers(s, buffers):
                return None
            consumer.append(s)
    if not producer or not consumer or any(s.has(*FOREIGN_OPS) for s in pre + post):
        return None
    if any(set(smem_args(op)) & set(buffers) for s in post for op in s.ops):
        return None
    # the copies may not depend on anything the math computes
    computed = set().union(*(s.names_bound for s in consumer + pre))
    if any(s.names_read & computed for s in producer):
        return None
    release_after = _release_point(consumer, buffers)
    if release_after is None:
        return None
    taken = names_in_text(source.text)
    if raw:
        ps = cs = fresh_name(taken, "s", "stage")
    else:
        if len(acquire_names) != 1 or len(wait_names) != 1:
            return None
        ps, cs = next(iter(acquire_names)), next(iter(wait_names))
    stages = None if raw else bar_type.stages  # type: ignore[union-attr]
    return Plan(kernel, decls, sync_decl, pre, loop, producer, consumer, release_after, post,
                bar, stages, buffers if raw else [], ps, cs, body)


def _math_ops(s: Stmt) -> set[str]:
    return {op.name for op in s.ops if Trait.REGISTER_MATH in op.prim.traits}


def _release_point(consumer: list[Stmt], buffers: list[str]) -> int | None:
    """After which consumer statement the stage can go back: the last read of a staged
    buffer, or the `wgmma_wait(0)` that retires it when the read is a wgmma."""
    last = None
    for i, s in enumerate(consumer):
        if any(set(smem_args(op)) & set(buffers) for op in s.ops):
            last = i
    if last is None:
        return None
    if not any(op.prim.effects.async_group is not None for op in consumer[last].ops):
        return last
    for j in range(last + 1, len(consumer)):
        for op in consumer[j].ops:
            if op.name == "wgmma_wait" and op.args["n"].sym is not None \
                    and op.args["n"].sym.const == 0:
                return j
    return None


# --- text -----------------------------------------------------------------------------------
def _registers(consumer_warps: int, low: int | None) -> tuple[int | None, int | None]:
    if low is None:
        return None, None
    high = (REGISTER_FILE - 128 * low) // (consumer_warps * 32) // 8 * 8
    return low, max(24, min(256, high))


def _smem_decl(s: Stmt, plan: Plan, source: SourceFile, stages_name: str) -> str:
    """A buffer declaration with the stage dimension added when it needs one."""
    op = next((op for op in s.ops if op.name == "smem"), None)
    if op is None or not op.results or \
            op.results[0].type.buffer not in plan.unstaged:  # type: ignore[attr-defined]
        return s.text
    span = op.arg_spans.get("shape")
    if span is None:
        return s.text
    old = source.snippet(span)
    inner = old.strip()
    new = f"({stages_name}, {inner[1:]}" if inner.startswith("(") else \
        f"({stages_name}, {inner})"
    return s.lead + s.own.replace(old, new, 1)


def _render(plan: Plan, source: SourceFile, params: dict[str, Any]) -> tuple[TextEdit, ...]:
    k = plan.kernel
    unit = indent_of(source.line_text(plan.body[0].node.span.start.line))
    step = "    "
    low, high = _registers(k.warps, params.get("producer_regs"))
    prod_rename = {b: f"{b}[{plan.producer_stage}]" for b in plan.unstaged}
    cons_rename = {b: f"{b}[{plan.consumer_stage}]" for b in plan.unstaged}
    taken = names_in_text(source.text)
    stages_name = "STAGES" if "STAGES" not in taken else \
        fresh_name(taken, "WS_STAGES", "PIPE_STAGES")
    blocks: list[str] = []
    # declarations: buffers (staged), ints, then the pipeline in place of the old barrier
    for s in sorted([*plan.decls, plan.sync_decl], key=lambda x: x.first_line):
        if s is plan.sync_decl:
            depth = stages_name if plan.stages is None else _stage_text(s, source)
            blocks.append(f'{s.lead}{plan.pipe} = pipeline(stages={depth}, '
                          f'producer="{PRODUCER}", consumer="{CONSUMER}")')
        else:
            blocks.append(_smem_decl(s, plan, source, stages_name))
    header = header_text(source, plan.loop)
    regs = f", regs={low}" if low is not None else ""
    blocks.append(f'with role("{PRODUCER}", warps=range(0, 4){regs}):')
    blocks.append(step + header)
    blocks.append(f"{step * 2}{plan.producer_stage} = {plan.pipe}.acquire()")
    blocks += [indent(rename(s.text, prod_rename), step * 2) for s in plan.producer]
    blocks.append(f"{step * 2}{plan.pipe}.commit()")
    regs = f", regs={high}" if high is not None else ""
    blocks.append(f'with role("{CONSUMER}", warps=range(4, {4 + k.warps}){regs}):')
    blocks += [indent(s.text, step) for s in plan.pre]
    blocks.append(step + header)
    blocks.append(f"{step * 2}{plan.consumer_stage} = {plan.pipe}.wait()")
    for i, s in enumerate(plan.consumer):
        blocks.append(indent(rename(s.text, cons_rename), step * 2))
        if i == plan.release_after:
            blocks.append(f"{step * 2}{plan.pipe}.release()")
    blocks += [indent(s.text, step) for s in plan.post]
    text = "\n".join(indent(block, unit) for block in blocks)
    start, end = lines_span(source, plan.body)
    edits = [TextEdit(source.span(start, end), text)]
    if k.warps_span is not None:
        edits.append(TextEdit(k.warps_span, str(k.warps + 4)))
    if plan.stages is None:
        edits.append(_stages_constant(source, k, stages_name, int(params["stages"])))
    return tuple(edits)


def _stage_text(s: Stmt, source: SourceFile) -> str:
    op = next(op for op in s.ops if op.name == "pipeline")
    span = op.arg_spans.get("stages")
    return source.snippet(span).strip() if span is not None else "2"


def _stages_constant(source: SourceFile, kernel: Kernel, name: str, n: int) -> TextEdit:
    """`NAME = n` on its own line just above the kernel's decorator."""
    line = kernel.decorator_span.start.line
    at = source.offset_of(line, 0)
    return TextEdit(source.span(at, at), f"{name} = {n}   # pipeline depth (warp-specialize)\n\n")


# --- the tactic -------------------------------------------------------------------------------
def _applies(kernel: Kernel, source: SourceFile) -> str | None:
    plan = _plan(kernel, source)
    if plan is None:
        return None
    how = "one raw mbarrier" if plan.stages is None else "a pipeline within one role"
    return (f"every warp both issues the TMA copies and runs the wgmmas ({how}): a producer "
            "warpgroup would keep copies in flight while the math warps compute")


def _variants(kernel: Kernel, source: SourceFile) -> Sequence[dict[str, Any]]:
    plan = _plan(kernel, source)
    if plan is None:
        return []
    if plan.stages is None:
        return [{"stages": n, "producer_regs": 40} for n in (2, 3, 4)] + \
            [{"stages": 2, "producer_regs": 24}, {"stages": 2, "producer_regs": None}]
    return [{"producer_regs": 40}, {"producer_regs": 24}, {"producer_regs": None}]


def _apply(kernel: Kernel, source: SourceFile, params: dict[str, Any]) -> TacticResult | None:
    plan = _plan(kernel, source)
    if plan is None:
        return None
    params = dict(params)
    if plan.stages is None:
        st = params.setdefault("stages", 2)
        if not isinstance(st, int) or not 1 <= st <= 16:
            return None
    elif "stages" in params:
        return None  # a pipelined input keeps its depth: the `stages` tactic tunes it
    low = params.setdefault("producer_regs", 40)
    if low is not None and (not isinstance(low, int) or not 24 <= low <= 256 or low % 8):
        return None
    edits = _render(plan, source, params)
    done = verified_rewrite(kernel, source, edits)
    if done is None:
        return None
    low, high = _registers(kernel.warps, low)
    depth = params.get("stages", plan.stages)
    regs = f", setmaxnreg {low}/{high}" if low is not None else ""
    out = dict(params)
    out["predicted"] = done[1]
    return TacticResult(
        edits, f"warp-specialize: a TMA producer warpgroup ({PRODUCER!r}) feeds the "
        f"{kernel.warps} math warps ({CONSUMER!r}) through a {depth}-stage pipeline{regs}",
        out)


WARP_SPECIALIZE = Tactic(
    "warp-specialize",
    "Split a role that both loads (TMA) and computes (wgmma) into producer and consumer "
    "roles joined by a pipeline.",
    _applies, _apply, _variants,
    Provenance("hand-written", "2026-12-02", ("plugins/cake-tactics/tests/data/"
                                              "gemm_mbarrier_sm90.cake",
                                              "plugins/cake-tactics/tests/data/"
                                              "gemm_one_role_sm90.cake")))
