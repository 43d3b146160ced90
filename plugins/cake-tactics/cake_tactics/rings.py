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
apart from the `async-copy` rewrite, which only renders a `Ring` in the other form.  The
pieces both forms share (the two loops, a copy statement, the buffer declarations, the
check that the math only reads its stage) are read by `ring_checks`; this module says what
differs between the forms.
"""

from __future__ import annotations

from dataclasses import dataclass

from cake_core.ir.kernel import Kernel, Op, Value
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
    statements,
)
from cake_tactics.ring_checks import (
    Copy,
    bound_once,
    copy_of,
    reads_only,
    ring_loops,
    same_over_rounds,
    split_decls,
    stage_dim_text,
    trip_count,
)


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


# --- helpers of one form -------------------------------------------------------------------
def _index_sym(op: Op) -> SymExpr | None:
    c = op.args["dst"].const
    if not isinstance(c, ViewOrigin) or len(c.index) != 1:
        return None
    return c.index[0].sym


def _value(kernel: Kernel, name: str) -> Value | None:
    return kernel.values.get(name)


def _sym(kernel: Kernel, name: str) -> SymExpr | None:
    v = kernel.values.get(name)
    return v.sym if v is not None else None


# --- the cp.async ring --------------------------------------------------------------------
def cp_async_ring(kernel: Kernel, source: SourceFile) -> Ring | None:
    if kernel.roles:
        return None
    fn = kernel_def(source, kernel)
    if fn is None:
        return None
    body = statements(source, kernel, fn.body, header_end(source, fn))
    loops = ring_loops(source, body)
    if loops is None:
        return None
    pi, mi, pro, main, p, k, trips = loops
    # the prologue: copies into buf[p], then one commit
    pro_body = statements(source, kernel, pro.body, pro.span.start.line)
    if not pro_body or not pro_body[-1].only({"cp_async_commit"}) or not pro_body[-1].ops:
        return None
    found = [copy_of(s, source, "cp_async") for s in pro_body[:-1]]
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
    if stages is None or stages < 2 or trip_count(kernel, pro) != stages - 1:
        return None
    i = 2
    ints: list[Stmt] = []
    while i < len(inner) and not inner[i].ops and isinstance(inner[i].node, ast.Assign):
        ints.append(inner[i])
        i += 1
    refill: list[Copy] = []
    while i < len(inner) and inner[i].has("cp_async"):
        c = copy_of(inner[i], source, "cp_async")
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
                if same_over_rounds(_sym(kernel, nm), lambda v: v + stages - 1, k, stages)),
               None)
    stage_stmts = [s for s in rest if not s.ops and isinstance(s.node, ast.Assign)
                   and len(s.names_bound) == 1
                   and same_over_rounds(_sym(kernel, next(iter(s.names_bound))),
                                        lambda v: v % stages, k, stages)]
    if nxt is None or len(stage_stmts) != 1:
        return None
    stage = next(iter(stage_stmts[0].names_bound))
    if not bound_once(fn, nxt) or not bound_once(fn, stage):
        return None
    compute = [s for s in rest if s is not stage_stmts[0]]
    buffers = {c.buffer for c in pro_copies + refill}
    # indices: prologue fills stage p, the refill stage (k + S - 1) % S, the math reads k % S
    if not all(same_over_rounds(_index_sym(c.op), lambda v: v, p, stages)
               for c in pro_copies):
        return None
    if not all(same_over_rounds(_index_sym(c.op), lambda v: (v + stages - 1) % stages, k,
                                stages)
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
    decls, pre = split_decls(body[:pi])
    if decls is None:
        return None
    stages_text = stage_dim_text(kernel, source, decls, buffers)
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
    return reads_only(compute, buffers,
                      lambda v: len(v.const.index) >= 1 and same_over_rounds(
                          v.const.index[0].sym, lambda x: x % stages, k, stages))


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
    decls, pre_top = split_decls([s for s in top[:-1] if s is not pipes[0]])
    if decls is None or pre_top:
        return None
    loops = ring_loops(source, body)
    if loops is None:
        return None
    pi, mi, pro, main, p, k, trips = loops
    stages = pipe_t.stages
    if stages < 2 or trip_count(kernel, pro) != stages - 1:
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
    if v is None or not bound_once(fn, nxt) or \
            not same_over_rounds(v.sym, lambda x: x + stages - 1, k, stages):
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
    stages_text = stage_dim_text(kernel, source, decls, buffers)
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
        c = copy_of(s, source, "tma_load")
        if c is None:
            return None
        idx = c.op.args["dst"].const
        if not isinstance(idx, ViewOrigin) or len(idx.index) != 1 or idx.index[0].name != fill:
            return None
        copies.append(c)
    return fill, copies


def _math_reads_stage_var(compute: list[Stmt], buffers: set[str], stage: str) -> bool:
    return reads_only(compute, buffers,
                      lambda v: bool(v.const.index) and v.const.index[0].name == stage)


def find_ring(kernel: Kernel, source: SourceFile) -> Ring | None:
    """The kernel's copy ring in whichever form it is written, None for any other shape."""
    return cp_async_ring(kernel, source) or tma_ring(kernel, source)
