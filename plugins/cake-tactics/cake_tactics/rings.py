"""Finding a copy ring in a kernel, in either of its two forms, as a `Ring`.

The **cp.async ring** (as in examples/gemm_sm80.cake), no roles::

    for p in range(S - 1):                     # prologue: buf[p] <- tile p
        cp_async(buf[p], T.tile(..., p)); cp_async_commit()
    for k in range(T):
        cp_async_wait(S - 2); syncthreads()
        nxt = k + S - 1
        cp_async(buf[nxt % S], T.tile(..., nxt)); cp_async_commit()
        s = k % S
        ... reads buf[s] synchronously (ldmatrix, load) ...
    cp_async_wait(0)

The **TMA ring**: the same loops in one role over every warp, the buffers' stages handed
out by a pipeline whose producer and consumer are that role::

    for p in range(S - 1):
        if p < T:
            f = ring.acquire(); tma_load(buf[f], T.tile(..., p), ring); ring.commit()
    for k in range(T):
        s = ring.wait(); syncthreads()
        nxt = k + S - 1
        if nxt < T:
            f = ring.acquire(); tma_load(buf[f], T.tile(..., nxt), ring); ring.commit()
        ... reads buf[s] ...
        ring.release()

A match reads both the statements (to move their text) and the IR (to check the stage
indices numerically, and that the math only reads the stage it is given).  It is kept
apart from the `async-copy` rewrite, which only renders a `Ring` in the other form.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

from cake_core.cost.evaluate import MissingDimError, evaluate
from cake_core.ir.kernel import ForOp, Kernel, Op, Value
from cake_core.ir.symbolic import SymExpr
from cake_core.ir.types import PipelineType
from cake_core.ir.values import ViewOrigin
from cake_core.source import SourceFile
from cake_core.syntax import ast
from cake_tactics.kernel_text import (
    Stmt,
    all_warps_role,
    fresh_name,
    header_end,
    kernel_def,
    names_in_text,
    smem_base,
    split_top_level,
    statements,
    writes_buffers,
)

#: Reads of a stage that complete before the next statement (so `release` may follow).
SYNC_READS = frozenset({"ldmatrix", "load"})


@dataclass
class Copy:
    """One copy of a ring: the buffer it fills and the tile expression, as written."""

    stmt: Stmt
    op: Op
    buffer: str
    src: str


@dataclass(kw_only=True)
class Ring:
    """The common shape of both forms, read off the kernel (built by keyword: its fields
    are many and several share a type)."""

    kernel: Kernel
    form: str
    """"cp_async" or "tma": what the kernel uses now."""
    body: list[Stmt]
    """The kernel body's statements (what the rewrite replaces)."""
    decls: list[Stmt]
    """Buffer declarations, kept at the top."""
    pre: list[Stmt]
    prologue: Stmt
    prologue_var: str
    prologue_copies: list[Copy]
    main: Stmt
    k: str
    trips: str
    """The main loop's trip count as written (`ktiles`)."""
    stage: str
    """The name the math reads the stage through (`s`)."""
    sync: Stmt
    """The `syncthreads()` after the wait (comments included)."""
    ints: list[Stmt]
    nxt: str
    refill: list[Copy]
    compute: list[Stmt]
    post: list[Stmt]
    stages: int
    stages_text: str
    pipe: str = "ring"
    fill: str = "f"


# --- shared checks ------------------------------------------------------------------------
def _same(expr: SymExpr | None, fn: Any, var: str, stages: int) -> bool:
    """Whether `expr` equals fn(var) for the first few rounds of the ring."""
    if expr is None:
        return False
    try:
        return all(evaluate(expr, {var: v}) == fn(v) for v in range(3 * stages + 1))
    except (MissingDimError, ZeroDivisionError, TypeError):
        return False


def _index_sym(op: Op) -> SymExpr | None:
    c = op.args["dst"].const
    if not isinstance(c, ViewOrigin) or len(c.index) != 1:
        return None
    return c.index[0].sym


class _Loops(NamedTuple):
    """A ring's two loops: the prologue, right before the main loop over `trips` tiles."""

    pro_at: int
    main_at: int
    pro: ast.For
    main: ast.For
    p: str
    k: str
    trips: str


def _ring_loops(source: SourceFile, body: list[Stmt]) -> _Loops | None:
    """The only two loops of `body`, adjacent, when the main one is `range(trips)`."""
    loops = [i for i, s in enumerate(body) if isinstance(s.node, ast.For)]
    if len(loops) != 2 or loops[1] != loops[0] + 1:
        return None
    pi, mi = loops
    pro, main = body[pi].node, body[mi].node
    assert isinstance(pro, ast.For) and isinstance(main, ast.For)
    p, k = _loop_var(pro), _loop_var(main)
    targs = _range_args(source, main)
    if p is None or k is None or targs is None or len(targs) != 1:
        return None
    return _Loops(pi, mi, pro, main, p, k, targs[0])


def _loop_var(node: ast.For) -> str | None:
    return node.target.id if isinstance(node.target, ast.Name) else None


def _range_args(source: SourceFile, node: ast.For) -> list[str] | None:
    it = node.iter
    if not isinstance(it, ast.Call) or it.keywords:
        return None
    return [source.snippet(a.span).strip() for a in it.args]


def _copy(s: Stmt, source: SourceFile, prim: str) -> Copy | None:
    if len(s.ops) < 1 or not isinstance(s.node, ast.ExprStmt):
        return None
    copies = [op for op in s.ops if op.name == prim]
    if len(copies) != 1 or not s.only({prim, "tile"}):
        return None
    op = copies[0]
    buf = smem_base(op, "dst")
    span = op.arg_spans.get("src")
    if buf is None or span is None:
        return None
    return Copy(s, op, buf, source.snippet(span).strip())


def _trip(kernel: Kernel, node: ast.For) -> int | None:
    for n in kernel.walk():
        if isinstance(n, ForOp) and n.span.start.offset == node.span.start.offset:
            return n.trip_count.const
    return None


def _value(kernel: Kernel, name: str) -> Value | None:
    return kernel.values.get(name)


def _sym(kernel: Kernel, name: str) -> SymExpr | None:
    v = kernel.values.get(name)
    return v.sym if v is not None else None


def _bound_once(fn: ast.FunctionDef, name: str) -> bool:
    """`kernel.values` keeps a name's last binding: its expression is the one the loop
    uses only when the name is bound once."""
    n = 0
    for node in ast.walk(fn):
        if isinstance(node, ast.Assign | ast.AugAssign | ast.For):
            targets = node.targets if isinstance(node, ast.Assign) else (node.target,)
            n += sum(isinstance(m, ast.Name) and m.id == name
                     for t in targets for m in ast.walk(t))
    return n == 1


# --- the cp.async ring --------------------------------------------------------------------
def cp_async_ring(kernel: Kernel, source: SourceFile) -> Ring | None:
    if kernel.roles:
        return None
    fn = kernel_def(source, kernel)
    if fn is None:
        return None
    body = statements(source, kernel, fn.body, header_end(source, fn))
    loops = _ring_loops(source, body)
    if loops is None:
        return None
    pi, mi, pro, main, p, k, trips = loops
    # the prologue: copies into buf[p], then one commit
    pro_body = statements(source, kernel, pro.body, pro.span.start.line)
    if not pro_body or not pro_body[-1].only({"cp_async_commit"}) or not pro_body[-1].ops:
        return None
    found = [_copy(s, source, "cp_async") for s in pro_body[:-1]]
    pro_copies = [c for c in found if c is not None]
    if not pro_copies or len(pro_copies) != len(found):
        return None
    # the main loop
    inner = statements(source, kernel, main.body, main.span.start.line)
    if len(inner) < 5:
        return None
    wait, sync = inner[0], inner[1]
    if not wait.only({"cp_async_wait"}) or not wait.ops or not sync.only({"syncthreads"}) \
            or not sync.ops:
        return None
    n = wait.ops[0].args["n"].sym
    stages = (n.const + 2) if n is not None and n.const is not None else None
    if stages is None or stages < 2 or _trip(kernel, pro) != stages - 1:
        return None
    i = 2
    ints: list[Stmt] = []
    while i < len(inner) and not inner[i].ops and isinstance(inner[i].node, ast.Assign):
        ints.append(inner[i])
        i += 1
    refill: list[Copy] = []
    while i < len(inner) and inner[i].has("cp_async"):
        c = _copy(inner[i], source, "cp_async")
        if c is None:
            return None
        refill.append(c)
        i += 1
    if not refill or i >= len(inner) or not inner[i].only({"cp_async_commit"}) \
            or not inner[i].ops:
        return None
    rest = inner[i + 1:]
    # which name holds the tile being refilled, and which the stage being read
    nxt = next((nm for s in ints for nm in s.names_bound
                if _same(_sym(kernel, nm), lambda v: v + stages - 1, k, stages)), None)
    stage_stmts = [s for s in rest if not s.ops and isinstance(s.node, ast.Assign)
                   and len(s.names_bound) == 1
                   and _same(_sym(kernel, next(iter(s.names_bound))),
                             lambda v: v % stages, k, stages)]
    if nxt is None or len(stage_stmts) != 1:
        return None
    stage = next(iter(stage_stmts[0].names_bound))
    if not _bound_once(fn, nxt) or not _bound_once(fn, stage):
        return None
    compute = [s for s in rest if s is not stage_stmts[0]]
    buffers = {c.buffer for c in pro_copies + refill}
    # indices: prologue fills stage p, the refill stage (k + S - 1) % S, the math reads k % S
    if not all(_same(_index_sym(c.op), lambda v: v, p, stages)
               for c in pro_copies):
        return None
    if not all(_same(_index_sym(c.op), lambda v: (v + stages - 1) % stages, k, stages)
               for c in refill):
        return None
    if not _math_reads_ok(compute, buffers, k, stages):
        return None
    post = body[mi + 1:]
    if not post or not post[0].only({"cp_async_wait"}) or not post[0].ops or \
            post[0].ops[0].args["n"].sym is None or post[0].ops[0].args["n"].sym.const != 0:
        return None
    if any(s.has("cp_async", "cp_async_commit", "cp_async_wait") for s in post[1:]):
        return None
    decls, pre = _split_decls(body[:pi])
    if decls is None:
        return None
    stages_text = _stage_dim_text(kernel, source, decls, buffers)
    if stages_text is None:
        return None
    taken = names_in_text(source.text)
    return Ring(kernel=kernel, form="cp_async", body=body, decls=decls, pre=pre,
                prologue=body[pi], prologue_var=p, prologue_copies=pro_copies, main=body[mi],
                k=k, trips=trips, stage=stage, sync=sync, ints=ints, nxt=nxt, refill=refill,
                compute=compute, post=post[1:], stages=stages, stages_text=stages_text,
                pipe=fresh_name(taken, "ring", "pipe"), fill=fresh_name(taken, "f", "fill"))


def _math_reads_ok(compute: list[Stmt], buffers: set[str], k: str, stages: int) -> bool:
    """The math reads the ring only at stage k % S, only synchronously, never writes it."""
    return _reads_only(compute, buffers,
                       lambda v: len(v.const.index) >= 1 and _same(
                           v.const.index[0].sym, lambda x: x % stages, k, stages))


def _reads_only(compute: list[Stmt], buffers: set[str], stage_ok: Any) -> bool:
    """Every access of the math to the ring's buffers is a synchronous read of a stage
    `stage_ok` accepts.  Views derived inside the math (`sa[s].tile(...)`, `.T`) are
    checked where they are made."""
    derived: set[str] = set()
    for s in compute:
        if s.has("cp_async", "cp_async_commit", "cp_async_wait", "syncthreads", "tma_load",
                 "acquire", "commit", "wait", "release", "barrier_sync", "wgmma"):
            return False
        if writes_buffers(s, buffers):
            return False
        for op in s.ops:
            for arg in op.args:
                if smem_base(op, arg) not in buffers:
                    continue
                if op.name not in SYNC_READS | {"tile"}:
                    return False
                v = op.args[arg]
                view = _stage_view(v)
                if not (view is not None and stage_ok(view)) and \
                        v.name.removesuffix(".T") not in derived:
                    return False
            if op.name == "tile":
                derived.update(r.name for r in op.results)
    return True


def _stage_view(v: Value) -> Value | None:
    """The view that indexes a buffer's stage dimension (`sa[s]` in `sa[s][0]`)."""
    seen = 0
    while isinstance(v.const, ViewOrigin) and seen < 8:
        if not isinstance(v.const.base.const, ViewOrigin):
            return v
        v = v.const.base
        seen += 1
    return None


def _split_decls(pre: list[Stmt]) -> tuple[list[Stmt] | None, list[Stmt]]:
    decls, rest = [], []
    for s in pre:
        if s.has("smem"):
            if not s.only({"smem"}):
                return None, []
            decls.append(s)
        elif s.has("pipeline", "mbarrier", "cp_async", "tma_load", "syncthreads",
                   "fence_barrier_init"):
            return None, []
        else:
            rest.append(s)
    return decls, rest


def _stage_dim_text(kernel: Kernel, source: SourceFile, decls: list[Stmt],
                    buffers: set[str]) -> str | None:
    """How the buffers' leading (stage) extent is written, the same for all of them."""
    texts = set()
    for s in decls:
        for op in s.ops:
            if op.name != "smem" or not op.results or \
                    op.results[0].type.buffer not in buffers:  # type: ignore[attr-defined]
                continue
            span = op.arg_spans.get("shape")
            if span is None:
                return None
            inner = source.snippet(span).strip()
            if not inner.startswith("("):
                return None
            texts.add(split_top_level(inner[1:-1])[0].strip())
    return texts.pop() if len(texts) == 1 else None



# --- the TMA ring ------------------------------------------------------------------------------
def tma_ring(kernel: Kernel, source: SourceFile) -> Ring | None:
    if len(kernel.roles) != 1:
        return None
    role = next(iter(kernel.roles.values()))
    if role.regs is not None:
        return None
    fn = kernel_def(source, kernel)
    if fn is None:
        return None
    top = statements(source, kernel, fn.body, header_end(source, fn))
    body = all_warps_role(source, kernel, top)
    if body is None:
        return None
    pipes = [s for s in top[:-1] if s.has("pipeline")]
    if len(pipes) != 1 or not pipes[0].only({"pipeline"}):
        return None
    pipe_t = pipes[0].ops[0].results[0].type
    if not isinstance(pipe_t, PipelineType) or pipe_t.producer != role.name or \
            tuple(pipe_t.consumers) != (role.name,):
        return None
    decls, pre_top = _split_decls([s for s in top[:-1] if s is not pipes[0]])
    if decls is None or pre_top:
        return None
    loops = _ring_loops(source, body)
    if loops is None:
        return None
    pi, mi, pro, main, p, k, trips = loops
    stages = pipe_t.stages
    if stages < 2 or _trip(kernel, pro) != stages - 1:
        return None
    pro_fill = _guarded_fill(source, kernel, pro.body, p, trips)
    if pro_fill is None:
        return None
    fill, pro_copies = pro_fill
    inner = statements(source, kernel, main.body, main.span.start.line)
    if len(inner) < 4:
        return None
    wait, sync = inner[0], inner[1]
    if not wait.only({"wait"}) or not wait.ops or not isinstance(wait.node, ast.Assign) or \
            len(wait.names_bound) != 1 or not sync.only({"syncthreads"}) or not sync.ops:
        return None
    stage = next(iter(wait.names_bound))
    i = 2
    ints: list[Stmt] = []
    while i < len(inner) and not inner[i].ops and isinstance(inner[i].node, ast.Assign):
        ints.append(inner[i])
        i += 1
    if i >= len(inner) or not isinstance(inner[i].node, ast.If):
        return None
    guard = inner[i].node
    assert isinstance(guard, ast.If)
    test = guard.test
    if not isinstance(test, ast.Compare) or test.ops != ("<",) or \
            not isinstance(test.operands[0], ast.Name):
        return None
    nxt = test.operands[0].id
    v = _value(kernel, nxt)
    if v is None or not _bound_once(fn, nxt) or \
            not _same(v.sym, lambda x: x + stages - 1, k, stages):
        return None
    refill_fill = _guarded_fill(source, kernel, (guard,), nxt, trips)
    if refill_fill is None or refill_fill[0] != fill:
        return None
    refill = refill_fill[1]
    rest = inner[i + 1:]
    if not rest or not rest[-1].only({"release"}) or not rest[-1].ops:
        return None
    compute = rest[:-1]
    buffers = {c.buffer for c in pro_copies + refill}
    if not _math_reads_stage_var(compute, buffers, stage):
        return None
    post = body[mi + 1:]
    if any(s.has("tma_load", "acquire", "commit", "wait", "release") for s in post):
        return None
    stages_text = _stage_dim_text(kernel, source, decls, buffers)
    if stages_text is None:
        return None
    pipe = pipe_t.name
    return Ring(kernel=kernel, form="tma", body=top, decls=decls, pre=body[:pi],
                prologue=body[pi], prologue_var=p, prologue_copies=pro_copies, main=body[mi],
                k=k, trips=trips, stage=stage, sync=sync, ints=ints, nxt=nxt, refill=refill,
                compute=compute, post=post, stages=stages, stages_text=stages_text, pipe=pipe,
                fill=fill)


def _guarded_fill(source: SourceFile, kernel: Kernel, nodes: tuple[ast.Stmt, ...], var: str,
                  trips: str) -> tuple[str, list[Copy]] | None:
    """`if var < trips:` + `f = pipe.acquire()` + tma_loads into `buf[f]` + `pipe.commit()`."""
    if len(nodes) != 1 or not isinstance(nodes[0], ast.If) or nodes[0].orelse:
        return None
    guard = nodes[0]
    test = guard.test
    if not isinstance(test, ast.Compare) or test.ops != ("<",) or \
            source.snippet(test.operands[0].span).strip() != var or \
            source.snippet(test.operands[1].span).strip() != trips:
        return None
    inner = statements(source, kernel, guard.body, guard.span.start.line)
    if len(inner) < 3 or not inner[0].only({"acquire"}) or not inner[0].ops or \
            not isinstance(inner[0].node, ast.Assign) or len(inner[0].names_bound) != 1 or \
            not inner[-1].only({"commit"}) or not inner[-1].ops:
        return None
    fill = next(iter(inner[0].names_bound))
    copies = []
    for s in inner[1:-1]:
        c = _copy(s, source, "tma_load")
        if c is None:
            return None
        idx = c.op.args["dst"].const
        if not isinstance(idx, ViewOrigin) or len(idx.index) != 1 or idx.index[0].name != fill:
            return None
        copies.append(c)
    return fill, copies


def _math_reads_stage_var(compute: list[Stmt], buffers: set[str], stage: str) -> bool:
    return _reads_only(compute, buffers,
                       lambda v: bool(v.const.index) and v.const.index[0].name == stage)



def find_ring(kernel: Kernel, source: SourceFile) -> Ring | None:
    """The kernel's copy ring in whichever form it is written, None for any other shape."""
    return cp_async_ring(kernel, source) or tma_ring(kernel, source)
