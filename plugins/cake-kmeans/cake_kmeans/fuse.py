"""`fuse-online-argmin`: four statements of running-argmin bookkeeping -> one primitive.

The pattern, matched on the typed IR (ops and the identity of their operands, never on
text alone):

    v, i = row_argmin(dist)                       # row_argmin(x=dist) -> (v, i)
    closer = lt(v, best_v)                        # lt(a=v, b=best_v), also `v < best_v`
    best_i = where(closer, i + offset, best_i)    # where(cond=closer, a=add(i, offset), b=best_i)
    best_v = where(closer, v, best_v)             # where(cond=closer, a=v, b=best_v)

(the two `where`s in either order; `i` alone means offset 0), as consecutive statements
of one block whose temporaries (`v`, `i`, `closer`, the shifted index) nothing else
reads.  `lt` is required: `le` would let a later chunk win a tie, which `argmin_update`
does not do.  The rewrite is offered only when the edited file verifies.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from cake_core.diagnostics.model import TextEdit
from cake_core.ir.kernel import ForOp, IfOp, Kernel, Node, Op, Role, Value
from cake_core.ir.types import IntType
from cake_core.plugins import Tactic, TacticResult
from cake_core.primitives.registry import Provenance
from cake_core.rewrite_cost import verified_rewrite
from cake_core.source import SourceFile, Span


@dataclass(frozen=True)
class OnlineArgmin:
    """One occurrence of the unfused pattern, with what the fused call needs."""

    reduce: Op
    ops: tuple[Op, ...]
    """Every op of the pattern (row_argmin, lt, the index add if any, both wheres)."""
    dist: str
    best_v: str
    best_i: str
    offset: str
    span: Span
    """From the first statement's first character to the end of the last one's line."""

    @property
    def line(self) -> int:
        return self.reduce.span.start.line + 1


def _blocks(nodes: list[Node]) -> list[list[Node]]:
    out = [nodes]
    for n in nodes:
        if isinstance(n, ForOp | Role):
            out += _blocks(n.body)
        elif isinstance(n, IfOp):
            out += _blocks(n.then) + _blocks(n.orelse)
    return out


def _values_read(op: Op) -> list[Value]:
    out: list[Value] = []
    for v in op.args.values():
        out.append(v)
        if isinstance(v.const, tuple):
            out += [e for e in v.const if isinstance(e, Value)]
    return out


def _readers(kernel: Kernel, value: Value) -> list[Op]:
    return [op for op in kernel.ops() if any(v is value for v in _values_read(op))]


def _int_text(source: SourceFile, op: Op, arg: str) -> str | None:
    """The offset as written (`j * BN`), when it is an int."""
    v = op.args[arg]
    if not isinstance(v.type, IntType) or v.sym is None:
        return None
    span = op.arg_spans.get(arg)
    return source.snippet(span).strip() if span is not None else str(v.sym)


def _updates(op: Op, closer: Value, new: Value, old: Value | None = None) -> bool:
    """`old = where(closer, new, old)`: the select rebinds the name it keeps."""
    if op.name != "where" or op.args["cond"] is not closer or op.args["a"] is not new:
        return False
    keep = op.args["b"]
    return (old is None or keep is old) and bool(op.results) and op.results[0].name == keep.name


def _shifted_index(source: SourceFile, add: Op, select: Node | None, idx: Value,
                   closer: Value) -> tuple[str, str] | None:
    """`best_i = where(closer, i + offset, best_i)` -> (offset text, best_i)."""
    if not add.results or not isinstance(select, Op):
        return None
    other = "b" if add.args["a"] is idx else "a" if add.args["b"] is idx else None
    if other is None or not _updates(select, closer, add.results[0]):
        return None
    offset = _int_text(source, add, other)
    return None if offset is None else (offset, select.args["b"].name)


def _statement_span(source: SourceFile, ops: list[Op]) -> Span:
    first = min(op.span.start.line for op in ops)
    last = max(op.span.end.line for op in ops)
    text = source.line_text(first)
    start = source.offset_of(first, 0) + len(text.encode()) - len(text.lstrip().encode())
    end = source.offset_of(last, 0) + len(source.line_text(last).encode())
    return source.span(start, end)


def _match(kernel: Kernel, source: SourceFile, block: list[Node], pos: int
           ) -> OnlineArgmin | None:
    red = block[pos]
    if not isinstance(red, Op) or red.name != "row_argmin" or len(red.results) != 2:
        return None
    v, i = red.results
    nodes = block[pos + 1:pos + 5]  # lt, [add], where, where
    cmp = nodes[0] if nodes else None
    if not isinstance(cmp, Op) or cmp.name != "lt" or cmp.args["a"] is not v \
            or not cmp.results:
        return None
    best_v, closer = cmp.args["b"], cmp.results[0]
    used: list[Op] = [red, cmp]
    index_update: tuple[str, str] | None = None
    value_update = False
    k = 1
    while k < len(nodes) and (index_update is None or not value_update):
        n = nodes[k]
        if not isinstance(n, Op):
            return None
        if n.name == "add" and index_update is None:
            select = nodes[k + 1] if k + 1 < len(nodes) else None
            index_update = _shifted_index(source, n, select, i, closer)
            if index_update is None:
                return None
            used += [n, select]  # type: ignore[list-item]
            k += 2
        elif not value_update and _updates(n, closer, v, best_v):
            value_update = True
            used.append(n)
            k += 1
        elif index_update is None and _updates(n, closer, i):
            index_update = ("0", n.args["b"].name)
            used.append(n)
            k += 1
        else:
            return None
    if index_update is None or not value_update:
        return None
    # the pattern's temporaries must die inside it, and its lines hold nothing else
    inside = {id(op) for op in used}
    temps = [v, i, closer] + [op.results[0] for op in used if op.name == "add"]
    if any(id(r) not in inside for t in temps for r in _readers(kernel, t)):
        return None
    span = _statement_span(source, used)
    x_span = red.arg_spans.get("x")
    for op in kernel.ops():
        within_x = x_span is not None and x_span.start.offset <= op.span.start.offset \
            and op.span.end.offset <= x_span.end.offset  # re-evaluated by the fused call
        if id(op) not in inside and not within_x \
                and span.start.line <= op.span.start.line <= span.end.line:
            return None
    dist = source.snippet(red.arg_spans["x"]).strip() if "x" in red.arg_spans \
        else red.args["x"].name
    return OnlineArgmin(red, tuple(used), dist, best_v.name, index_update[1],
                        index_update[0], span)


def find_online_argmins(kernel: Kernel, source: SourceFile) -> list[OnlineArgmin]:
    out = []
    for block in _blocks(kernel.body):
        for pos, n in enumerate(block):
            if isinstance(n, Op) and n.name == "row_argmin":
                m = _match(kernel, source, block, pos)
                if m is not None:
                    out.append(m)
    return out


def _replacement(source: SourceFile, m: OnlineArgmin) -> str:
    """The fused call, keeping the whole-line comments that sat between the statements."""
    first = m.span.start.line
    indent = source.line_text(first)[:len(source.line_text(first))
                                     - len(source.line_text(first).lstrip())]
    kept = [source.line_text(ln).strip() for ln in range(first + 1, m.span.end.line + 1)
            if source.line_text(ln).strip().startswith("#")]
    call = f"argmin_update({m.best_v}, {m.best_i}, {m.dist}, {m.offset})"
    return "".join(f"{c}\n{indent}" for c in kept) + call


def _applies(kernel: Kernel, source: SourceFile) -> str | None:
    found = find_online_argmins(kernel, source)
    if not found:
        return None
    lines = ", ".join(str(m.line) for m in found)
    return (f"row_argmin + lt + where running-best update (line {lines}) is one "
            "argmin_update: no (R,) temporaries, the tie rule stated once")


def _variants(kernel: Kernel, source: SourceFile) -> Sequence[dict[str, Any]]:
    return [{}] if find_online_argmins(kernel, source) else []


def _apply(kernel: Kernel, source: SourceFile, params: dict[str, Any]) -> TacticResult | None:
    found = find_online_argmins(kernel, source)
    line = params.get("line")
    if line is not None:
        found = [m for m in found if m.line == line]
    if not found:
        return None
    edits = tuple(TextEdit(m.span, _replacement(source, m)) for m in found)
    done = verified_rewrite(kernel, source, edits)
    if done is None:
        return None
    lines = ", ".join(str(m.line) for m in found)
    return TacticResult(edits, f"fuse the running argmin at line {lines} into argmin_update",
                        {"lines": [m.line for m in found], "predicted": done[1]})


FUSE_ONLINE_ARGMIN = Tactic(
    "fuse-online-argmin",
    "Fuse row_argmin + lt + where into one argmin_update (running per-row argmin).",
    _applies, _apply, _variants,
    Provenance("hand-written", "2026-12-02", ("examples/kmeans_assign_sm90.cake",)))
