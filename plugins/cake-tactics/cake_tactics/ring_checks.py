"""The pieces of a copy ring that both of its forms share, and the checks on them.

`rings.py` matches the cp.async ring and the TMA ring; each is two adjacent loops (a
prologue and a main loop over the tiles), copy statements that fill a buffer's stage,
buffer declarations whose leading extent is the stage count, and math that may only read
the stage it is given.  Reading those pieces off the statements and the IR is the same for
both forms, so it lives here and the matchers say only what differs (which primitives
copy, how the stage index is computed).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

from cake_core.cost.evaluate import MissingDimError, evaluate
from cake_core.ir.kernel import ForOp, Kernel, Op, Value
from cake_core.ir.symbolic import SymExpr
from cake_core.ir.values import ViewOrigin
from cake_core.source import SourceFile
from cake_core.syntax import ast
from cake_tactics.kernel_text import (
    Stmt,
    smem_base,
    split_top_level,
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


def same_over_rounds(expr: SymExpr | None, fn: Any, var: str, stages: int) -> bool:
    """Whether `expr` equals fn(var) for the first few rounds of the ring."""
    if expr is None:
        return False
    try:
        return all(evaluate(expr, {var: v}) == fn(v) for v in range(3 * stages + 1))
    except (MissingDimError, ZeroDivisionError, TypeError):
        return False


class RingLoops(NamedTuple):
    """A ring's two loops: the prologue, right before the main loop over `trips` tiles."""

    pro_at: int
    main_at: int
    pro: ast.For
    main: ast.For
    p: str
    k: str
    trips: str


def ring_loops(source: SourceFile, body: list[Stmt]) -> RingLoops | None:
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
    return RingLoops(pi, mi, pro, main, p, k, targs[0])


def _loop_var(node: ast.For) -> str | None:
    return node.target.id if isinstance(node.target, ast.Name) else None


def _range_args(source: SourceFile, node: ast.For) -> list[str] | None:
    it = node.iter
    if not isinstance(it, ast.Call) or it.keywords:
        return None
    return [source.snippet(a.span).strip() for a in it.args]


def copy_of(s: Stmt, source: SourceFile, prim: str) -> Copy | None:
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


def trip_count(kernel: Kernel, node: ast.For) -> int | None:
    for n in kernel.walk():
        if isinstance(n, ForOp) and n.span.start.offset == node.span.start.offset:
            return n.trip_count.const
    return None


def bound_once(fn: ast.FunctionDef, name: str) -> bool:
    """`kernel.values` keeps a name's last binding: its expression is the one the loop
    uses only when the name is bound once."""
    n = 0
    for node in ast.walk(fn):
        if isinstance(node, ast.Assign | ast.AugAssign | ast.For):
            targets = node.targets if isinstance(node, ast.Assign) else (node.target,)
            n += sum(isinstance(m, ast.Name) and m.id == name
                     for t in targets for m in ast.walk(t))
    return n == 1


def reads_only(compute: list[Stmt], buffers: set[str], stage_ok: Any) -> bool:
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


def split_decls(pre: list[Stmt]) -> tuple[list[Stmt] | None, list[Stmt]]:
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


def stage_dim_text(kernel: Kernel, source: SourceFile, decls: list[Stmt],
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


__all__ = ["SYNC_READS", "Copy", "RingLoops", "bound_once", "copy_of", "reads_only",
           "ring_loops", "same_over_rounds", "split_decls", "stage_dim_text", "trip_count"]
