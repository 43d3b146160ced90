"""causal-tile-skip: stop the key loops of a causal kernel at the block's diagonal.

A causal attention kernel masks every score whose key lies past its query:

    for j in range(N):                         # every key tile, in every role
        ...
        s = where(le(col_index(s) + j * BN, row_index(s) + R), s, -inf)

Row r of `s` is query `R + r`, so a block whose rows end at `R + rows` has no key at or
past that in play: every tile from `cdiv(R + rows, BN)` on is masked whole.  Such a tile
still costs its TMA loads, two wgmmas and the softmax, about half of all tiles over the
blocks.  The rewrite walks

    NT = min(N, cdiv(max(R0 + rows0, R1 + rows1, ...), BN))

tiles instead, in every loop over `range(N)` (producer and consumers alike, so the
pipeline's stages still pair up), and hands turns over on `NT - 1` where a loop did on
`N - 1` (`if j < N - 1: barrier_arrive(...)`); a test against the last tile of the
sequence itself (`j == cdiv(S, BN) - 1`, a ragged-key mask) is left alone.  A fully
masked tile adds exactly nothing (`p = exp2(-inf) = 0`, the rescale is 1), so the outputs
do not change by a bit: the rewrite is offered only when it verifies and the simulator,
on small shapes with the same random inputs, writes exactly the original's outputs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from cake_core.diagnostics.model import TextEdit, apply_edits
from cake_core.ir.kernel import Kernel
from cake_core.ir.types import FragmentType
from cake_core.plugins import Tactic, TacticResult
from cake_core.primitives.registry import Provenance
from cake_core.rewrite_cost import verified_rewrite
from cake_core.source import SourceFile
from cake_core.syntax import ast
from cake_tactics.double_buffer import _ir_loop, _same_on_small_shapes
from cake_tactics.kernel_text import fresh_name, indent_of, kernel_def, names_in_text, operand

PROV = Provenance("hand-written", "2026-12-05", ("examples/attention_fwd_sm90_causal.cake",))


@dataclass(frozen=True)
class _Mask:
    loop: ast.For
    var: str
    stop: str
    """The loop's `range(...)` argument, as written."""
    block: str
    """The key tile width BN of `j * BN`."""
    end: str
    """One past the last query row the mask's fragment holds: `R + rows`."""


@dataclass(frozen=True)
class _Plan:
    stop: str
    masks: list[_Mask]
    loops: list[ast.For]
    anchor: ast.Stmt
    """The top-level statement the new bound is inserted before."""


def _src(source: SourceFile, node: ast.Node) -> str:
    return source.data[node.span.start.offset:node.span.end.offset].decode()


def _name(e: ast.Expr) -> str | None:
    return e.id if isinstance(e, ast.Name) else None


def _call(e: ast.Expr, fn: str, nargs: int) -> ast.Call | None:
    if isinstance(e, ast.Call) and _name(e.func) == fn and len(e.args) == nargs \
            and not e.keywords:
        return e
    return None


def _range_stop(loop: ast.For) -> ast.Expr | None:
    c = _call(loop.iter, "range", 1)
    return c.args[0] if c is not None else None


def _mask_of(stmt: ast.Stmt, var: str, source: SourceFile, rows: dict[int, int]
             ) -> tuple[str, str] | None:
    """(BN, R + rows) of `x = where(le(col_index(x) + var * BN, row_index(x) + R), x, -inf)`."""
    if not isinstance(stmt, ast.Assign) or len(stmt.targets) != 1:
        return None
    x = _name(stmt.targets[0])
    w = _call(stmt.value, "where", 3)
    cmp = _call(w.args[0], "le", 2) if w is not None else None
    if x is None or w is None or cmp is None or _name(w.args[1]) != x:
        return None
    key, query = cmp.args
    if not (isinstance(key, ast.BinOp) and key.op == "+" and isinstance(query, ast.BinOp)
            and query.op == "+"):
        return None
    col, row = _call(key.left, "col_index", 1), _call(query.left, "row_index", 1)
    if col is None or row is None or _name(col.args[0]) != x or _name(row.args[0]) != x:
        return None
    step = key.right
    if not (isinstance(step, ast.BinOp) and step.op == "*" and _name(step.left) == var):
        return None
    n = rows.get(stmt.value.span.start.offset)
    if n is None:
        return None
    return _src(source, step.right), f"{_src(source, query.right)} + {n}"


def _plan(kernel: Kernel, source: SourceFile) -> _Plan | None:
    fn = kernel_def(source, kernel)
    if fn is None:
        return None
    rows = {op.span.start.offset: int(t.shape[0].const) for op in kernel.ops()
            if op.name == "where" and op.results
            and isinstance(t := op.results[0].type, FragmentType) and len(t.shape) == 2
            and t.shape[0].const is not None}
    masks: list[_Mask] = []
    loops: dict[str, list[ast.For]] = {}
    for node in ast.walk(fn):
        if not isinstance(node, ast.For):
            continue
        stop = _range_stop(node)
        var = _name(node.target)
        if stop is None or var is None:
            continue
        loops.setdefault(_src(source, stop), []).append(node)
        for inner in ast.walk(node):
            if isinstance(inner, ast.Stmt):
                m = _mask_of(inner, var, source, rows)
                if m is not None:
                    masks.append(_Mask(node, var, _src(source, stop), *m))
    stops = {m.stop for m in masks}
    if len(stops) != 1 or len({m.block for m in masks}) != 1:
        return None
    (bound,) = stops
    anchor = next((s for s in fn.body if any(
        s.span.start.offset <= lp.span.start.offset < s.span.end.offset
        for lp in loops[bound])), None)
    if anchor is None:
        return None
    return _Plan(bound, masks, loops[bound], anchor)


def _edits(plan: _Plan, source: SourceFile) -> tuple[tuple[TextEdit, ...], str]:
    nt = fresh_name(names_in_text(source.text), "NT", "n_tiles", "key_tiles")
    ends = sorted({m.end for m in plan.masks})
    last = ends[0] if len(ends) == 1 else f"max({', '.join(ends)})"
    bound = f"min({plan.stop}, cdiv({last}, {plan.masks[0].block}))"
    at = plan.anchor.span.start
    line_start = source.offset_of(at.line, 0)
    pad = indent_of(source.line_text(at.line))
    edits = [TextEdit(source.span(line_start, line_start),
                      f"{pad}{nt} = {bound}   # key tiles up to the block's diagonal\n")]
    handoff = re.compile(rf"(<\s*){re.escape(operand(plan.stop))}(\s*-\s*1\b)")
    for loop in plan.loops:
        stop = _range_stop(loop)
        assert stop is not None
        edits.append(TextEdit(source.span(stop.span.start.offset, stop.span.end.offset), nt))
        for node in ast.walk(loop):
            if isinstance(node, ast.If):
                test = _src(source, node.test)
                new = handoff.sub(rf"\g<1>{nt}\g<2>", test)
                if new != test:
                    edits.append(TextEdit(source.span(node.test.span.start.offset,
                                                      node.test.span.end.offset), new))
    return tuple(edits), bound


def _applies(kernel: Kernel, source: SourceFile) -> str | None:
    plan = _plan(kernel, source)
    if plan is None:
        return None
    lines = ", ".join(str(m.loop.span.start.line + 1) for m in plan.masks)
    return (f"the key loops at line {lines} run to `{plan.stop}` although every tile past "
            "the block's last query is masked whole")


def _variants(kernel: Kernel, source: SourceFile) -> list[dict[str, Any]]:
    return [{}] if _plan(kernel, source) is not None else []


def _apply(kernel: Kernel, source: SourceFile, params: dict[str, Any]) -> TacticResult | None:
    plan = _plan(kernel, source)
    if plan is None:
        return None
    edits, bound = _edits(plan, source)
    done = verified_rewrite(kernel, source, edits)
    if done is None:
        return None
    speedup = done[1].get("speedup")
    if speedup is not None and speedup <= 1.001:
        return None  # the loops already stop at the diagonal
    # small launches whose key loop runs 4 and 5 tiles: some blocks then skip some
    loop = _ir_loop(kernel, plan.masks[0].loop)
    after = apply_edits(source.text, edits)
    if loop is None or not _same_on_small_shapes(kernel, loop, source.text, after,
                                                 source.path):
        return None
    return TacticResult(
        edits, f"skip the key tiles above the diagonal: walk `{bound}` tiles (the rest are "
        "masked whole, so the outputs are the same)", {"predicted": done[1]})


CAUSAL_TILE_SKIP = Tactic(
    "causal-tile-skip",
    "In a causal kernel, stop every key loop at the block's diagonal: the tiles past the "
    "block's last query are masked whole and add nothing.",
    _applies, _apply, _variants, PROV)

__all__ = ["CAUSAL_TILE_SKIP"]
