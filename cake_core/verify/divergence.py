"""CK314 and CK315: what goes wrong when only some threads of a role run an op.

The warps of a role do not run in lockstep, and a run-time `if` on `lane.id` or
`warp.rank` splits them: the lanes of a warp, or the warps of a warpgroup, take different
branches.  Two kinds of ops are wrong there although each is fine on its own:

- collectives (CK314): a shuffle-based row reduction, `ldmatrix` or `mma_sync` needs all
  32 lanes of the warp; `wgmma` and `wgmma_wait` (`.sync.aligned` over a warpgroup) need
  all 128 threads of the warpgroup.  Ops say so with the `WARP_COLLECTIVE` /
  `WARPGROUP_COLLECTIVE` traits, so a plugin's collective is checked the same way;
- a proxy fence (CK315): `fence_proxy_async()` orders the accesses of the thread that
  runs it, so a fence run by some threads leaves the other threads' shared-memory writes
  unordered before the TMA store that reads them.

Both need to know how far a value is the same across threads: the uniformity analysis
below.  Every int value carries its expression with names expanded (`wm = warp.id // 2`
makes `wm` the expression `warp.id // 2`), so following assignments is following the
expression; loop variables are looked up in the bounds of their loop.  A value's
*granularity* is the number of consecutive threads of the block that are sure to share
it: 1 for `lane.id` and `thread.id`, 32 for `warp.id` and `warp.rank`, 128 for
`warpgroup.*`, unbounded for block indices, loop counters with uniform bounds, dims and
constants; `x // c` of a thread index multiplies it by `c` (`warp.id // 4` is uniform
over a warpgroup).  Scalars read from memory are taken as uniform: the verifier does not
follow data.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from cake_core.diagnostics import codes
from cake_core.diagnostics.model import Applicability, Diagnostic, Fix, Related, TextEdit
from cake_core.ir.kernel import ForOp, IfOp, Kernel, Node, Op, Program, Role, Value
from cake_core.ir.symbolic import BinExpr, SymExpr, Var
from cake_core.ir.values import Predicate
from cake_core.primitives.traits import Trait
from cake_core.source import SourceFile, Span
from cake_core.verify.effects import ASYNC_PROXY, Views, arrival_scope, effects_of
from cake_core.verify.unroll import condition_leaves

#: Every code this pass may emit.
CODES = (codes.COLLECTIVE_UNDER_DIVERGENCE, codes.PARTIAL_PROXY_FENCE)

#: Threads of a warp and of a warpgroup.
WARP, WARPGROUP = 32, 128
#: The granularity of a value every thread of the block shares.
UNIFORM = 1 << 30

#: A comparison with its sides swapped (`4 > x` is `x < 4`).
_FLIP = {"<": ">", ">": "<", "<=": ">=", ">=": "<="}

#: Consecutive threads sharing each index of an index space.
_INDEX_GRAIN = {"lane.id": 1, "thread.id": 1, "warp.id": WARP, "warp.rank": WARP,
                "warpgroup.id": WARPGROUP, "warpgroup.rank": WARPGROUP}


@dataclass(frozen=True, slots=True)
class Spread:
    """How many consecutive threads are sure to share a value, and the index that splits it."""

    grain: int
    index: str | None = None

    def splits_warps(self) -> bool:
        """Whether the lanes of one warp may disagree."""
        return self.grain % WARP != 0

    def splits_warpgroups(self) -> bool:
        """Whether the threads of one warpgroup may disagree."""
        return self.grain % WARPGROUP != 0

    def partial(self) -> bool:
        """Whether some threads of a role may disagree with others."""
        return self.grain < UNIFORM


_SAME = Spread(UNIFORM)


def _finer(a: Spread, b: Spread) -> Spread:
    if a.grain == b.grain:
        return a if a.index is not None else b
    return a if _divides_less(a.grain, b.grain) else b


def _divides_less(a: int, b: int) -> bool:
    """Whether grain `a` splits threads at least as finely as `b` (by warp/warpgroup level)."""
    def level(g: int) -> int:
        return 0 if g % WARP else 1 if g % WARPGROUP else 2 if g < UNIFORM else 3
    return (level(a), a) < (level(b), b)


class Uniformity:
    """The spread of expressions, with the loop variables in scope."""

    def __init__(self, role_start: int = 0) -> None:
        self.loops: dict[str, Spread] = {}
        self.role_start = role_start
        """The first warp of the role: `warp.rank` counts from there."""

    def of_expr(self, e: SymExpr) -> Spread:
        if isinstance(e, Var):
            grain = _INDEX_GRAIN.get(e.name)
            if grain is not None:
                return Spread(grain, e.name)
            return self.loops.get(e.name, _SAME)
        if isinstance(e, BinExpr):
            left, right = self.of_expr(e.left), self.of_expr(e.right)
            c = e.right.const
            if e.op == "//" and c is not None and c > 0 and right.grain == UNIFORM \
                    and isinstance(e.left, Var) and left.grain < UNIFORM:
                return Spread(min(left.grain * c, UNIFORM), left.index)
            return _finer(left, right)
        return _SAME

    def of_condition(self, cond: object) -> Spread:
        if not isinstance(cond, Value):
            return _SAME
        p = cond.const
        if isinstance(p, Predicate):
            if p.op != "compare":
                out = _SAME
                for c in p.conditions:
                    out = _finer(out, self.of_condition(c))
                return out
            split = self._threshold(p)
            if split is not None:
                return split
        out = _SAME
        for leaf in condition_leaves(cond):
            if isinstance(leaf, SymExpr):
                out = _finer(out, self.of_expr(leaf))
        return out

    def _threshold(self, p: Predicate) -> Spread | None:
        """`warp.rank < 4` and the like: a thread index against a constant splits the threads
        at one place only, which may fall between warpgroups (then warpgroups agree)."""
        ops, terms = p.chain
        if len(ops) != 1 or ops[0] not in _FLIP:
            return None
        op, (a, b) = ops[0], terms
        if isinstance(b, Var) and isinstance(a, SymExpr) and a.const is not None:
            op, (a, b) = _FLIP[op], (b, a)
        if not (isinstance(a, Var) and a.name in _INDEX_GRAIN and isinstance(b, SymExpr)
                and b.const is not None):
            return None
        at = b.const + (1 if op in ("<=", ">") else 0)
        unit = _INDEX_GRAIN[a.name]
        if a.name == "warp.rank":
            at += self.role_start
        boundary = at * unit
        grain = WARPGROUP if boundary % WARPGROUP == 0 else WARP if boundary % WARP == 0 else 1
        return Spread(grain, a.name)

    def of_loop(self, loop: ForOp) -> Spread:
        out = _SAME
        for e in (loop.start, loop.stop, loop.step):
            out = _finer(out, self.of_expr(e))
        return out


@dataclass(frozen=True, slots=True)
class Guard:
    """A run-time `if` or `for` whose condition or bounds some threads see differently."""

    node: IfOp | ForOp
    spread: Spread

    @property
    def span(self) -> Span:
        return self.node.cond.span if isinstance(self.node, IfOp) else self.node.span


@dataclass(frozen=True, slots=True)
class Placed:
    """An op with the divergent guards around it (outermost first)."""

    op: Op
    guards: tuple[Guard, ...]


def placed_ops(nodes: Sequence[Node], u: Uniformity | None = None,
               guards: tuple[Guard, ...] = ()) -> Iterator[Placed]:
    """The ops of `nodes` in program order, each with the divergent guards it is under."""
    u = u or Uniformity()
    for n in nodes:
        if isinstance(n, Op):
            yield Placed(n, guards)
        elif isinstance(n, IfOp):
            s = u.of_condition(n.cond)
            inner = (*guards, Guard(n, s)) if s.partial() else guards
            yield from placed_ops(n.then, u, inner)
            yield from placed_ops(n.orelse, u, inner)
        elif isinstance(n, ForOp):
            s = u.of_loop(n)
            name = n.var.sym.name if isinstance(n.var.sym, Var) else n.var.name
            saved = u.loops.get(name)
            u.loops[name] = s
            inner = (*guards, Guard(n, s)) if s.partial() else guards
            yield from placed_ops(n.body, u, inner)
            if saved is None:
                u.loops.pop(name, None)
            else:
                u.loops[name] = saved
        elif isinstance(n, Role):
            yield from placed_ops(n.body, Uniformity(n.warp_start), guards)


def check(program: Program, source: SourceFile) -> list[Diagnostic]:
    out: list[Diagnostic] = []
    for kernel in program.kernels:
        out.extend(check_kernel(kernel, source))
    return out


def check_kernel(kernel: Kernel, source: SourceFile) -> list[Diagnostic]:
    scopes: list[tuple[str, list[Node]]] = [("the kernel", [n for n in kernel.body
                                                            if not isinstance(n, Role)])]
    scopes += [(f"role `{r.name}`", [r]) for r in kernel.roles.values()]
    out: list[Diagnostic] = []
    views: Views | None = None
    for label, body in scopes:
        placed = list(placed_ops(body))
        out.extend(_collectives(placed, source))
        if any(p.guards and effects_of(p.op).fence == "proxy_async" for p in placed):
            views = views or Views(kernel)
            out.extend(_partial_fences(placed, label, views, source))
    return out


# --- CK314 -------------------------------------------------------------------------------
def meets_warp(op: Op) -> bool:
    """A raw arrival the lowering makes after the warp's lanes meet (`__syncwarp()`):
    `per="warp"` (lane 0 arrives for its warp) and `per="role"` (the elected thread
    arrives for its warp).  It needs the whole warp as a collective does; only inside
    `elect_one()`, whose one thread has no lanes to meet, does the lowering leave the
    meeting out."""
    return op.prim.effects.arrive_scope is not None and arrival_scope(op) in ("warp", "role")


def _breaking_guard(p: Placed) -> Guard | None:
    """The outermost guard that splits the threads `p.op` must run with, if any."""
    warp = p.op.prim.has(Trait.WARP_COLLECTIVE)
    group = p.op.prim.has(Trait.WARPGROUP_COLLECTIVE)
    meets = meets_warp(p.op)
    if meets and any(isinstance(g.node, IfOp) and g.node.elected for g in p.guards):
        return None
    for g in p.guards:
        if (warp or group or meets) and g.spread.splits_warps():
            return g
        if group and g.spread.splits_warpgroups():
            return g
    return None


def _collectives(placed: list[Placed], source: SourceFile) -> list[Diagnostic]:
    found: dict[int, tuple[Guard, list[Op]]] = {}
    for p in placed:
        g = _breaking_guard(p)
        if g is not None:
            found.setdefault(id(g.node), (g, []))[1].append(p.op)
    out = []
    for g, ops in found.values():
        first = ops[0]
        if meets_warp(first):
            out.append(_split_arrival(g, first, source))
            continue
        lanes = g.spread.splits_warps()
        who = "the lanes of a warp" if lanes else "the warps of a warpgroup"
        unit = "warp" if first.prim.has(Trait.WARP_COLLECTIVE) else "warpgroup"
        what = "loop bounds" if isinstance(g.node, ForOp) else "condition"
        related = [Related(g.span, f"this {what} depends on `{g.spread.index}`")]
        related += [Related(o.span, f"`{o.name}` is under it too") for o in ops[1:3]]
        out.append(codes.COLLECTIVE_UNDER_DIVERGENCE.at(
            first.span, f"`{first.name}` is a {unit} collective, but it runs under a {what} "
            f"on `{g.spread.index}` that {who} may see differently: threads that skip it "
            "leave the others waiting on a collective they never join (undefined behavior: "
            "wrong results or a hang)", related=related,
            notes=(f"the {what} is on line {g.span.start.line + 1}; run the collective on every "
                   f"thread of the {unit} and choose per thread afterwards (`where(...)`), or "
                   "make the condition one every thread of the "
                   f"{unit} agrees on (a role, `warpgroup.rank`, a loop counter)",)))
    return out


def _split_arrival(g: Guard, op: Op, source: SourceFile) -> Diagnostic:
    per = arrival_scope(op)
    who = "lane 0 arrives for the warp" if per == "warp" else \
        "the role's elected thread arrives"
    what = "loop bounds" if isinstance(g.node, ForOp) else "condition"
    return codes.COLLECTIVE_UNDER_DIVERGENCE.at(
        op.span, f"`{source.snippet(op.span)}` meets the lanes of its warp (`__syncwarp()`) "
        f"before {who}, but it runs under a {what} on `{g.spread.index}` that the lanes of a "
        "warp see differently: the lanes that skip it never meet the others (undefined "
        "behavior: a hang, or an arrival that is never made)",
        related=[Related(g.span, f"this {what} depends on `{g.spread.index}`")],
        notes=("to arrive from some lanes only, say so per thread: `if lane.id == 0: "
               "bar.arrive(per=\"thread\")` is one arrival per warp; for one thread of the "
               "role use `with elect_one():` and an elected arrival; otherwise arrive "
               "outside the condition",))


# --- CK315 -------------------------------------------------------------------------------
def _is_generic_write(op: Op) -> bool:
    eff = effects_of(op)
    return bool(eff.smem_writes) and eff.async_group not in ASYNC_PROXY


def _async_reads(op: Op) -> bool:
    eff = effects_of(op)
    return bool(eff.smem_reads) and eff.async_group in ASYNC_PROXY


def _inside(p: Placed, guard: Guard) -> bool:
    return any(g.node is guard.node for g in p.guards)


def _partial_fences(placed: list[Placed], label: str, views: Views,
                    source: SourceFile) -> list[Diagnostic]:
    out = []
    for i, p in enumerate(placed):
        if not p.guards or effects_of(p.op).fence != "proxy_async":
            continue
        guard = p.guards[0]
        writes = [w for w in placed[:i] if _is_generic_write(w.op) and not _inside(w, guard)]
        if not writes:
            continue
        written = {views.ref(v).buffer: w for w in writes for v in effects_of(w.op).smem_writes}
        reader = next(((r, buf) for r in placed[i + 1:] if _async_reads(r.op)
                       for v in effects_of(r.op).smem_reads
                       if (buf := views.ref(v).buffer) in written), None)
        if reader is None:
            continue
        (r, buf), w = reader, written[reader[1]]
        out.append(codes.PARTIAL_PROXY_FENCE.at(
            p.op.span, f"`fence_proxy_async()` runs only where the condition on "
            f"`{guard.spread.index}` holds, but every thread of {label} wrote `{buf}`: a fence "
            "orders only the executing thread's writes, so the TMA store may read the other "
            "threads' writes stale",
            related=[Related(w.op.span, f"every thread of {label} writes `{buf}` here"),
                     Related(guard.span, "the fence is only under this condition"),
                     Related(r.op.span, f"the async proxy reads `{buf}` here")],
            notes=("every thread that wrote must fence its own writes before the barrier "
                   "that precedes the TMA store: run `fence_proxy_async()` on all threads",),
            fixes=_fence_fix(p, guard, source)))
    return out


def _line_range(source: SourceFile, span: Span) -> tuple[int, int]:
    """Byte offsets of the whole lines `span` covers, with the last line's newline."""
    start = span.start.offset - span.start.col_byte
    end = span.end.offset - span.end.col_byte + len(source.line_text(span.end.line).encode())
    if source.data[end:end + 2] == b"\r\n":
        end += 2
    elif source.data[end:end + 1] == b"\n":
        end += 1
    return start, end


def _indent(source: SourceFile, span: Span) -> str:
    line = source.line_text(span.start.line)
    return line[: len(line) - len(line.lstrip())]


def _fence_fix(p: Placed, guard: Guard, source: SourceFile) -> list[Fix]:
    """Move the fence out of its `if`: safe when the `if` holds nothing else (read from the
    text: int assignments make no op), unsafe when the `if` guards other lines too."""
    node = guard.node
    if not isinstance(node, IfOp) or len(p.guards) != 1 or p.op not in node.then \
            or node.orelse:
        return []
    call = source.snippet(p.op.span)
    at = _indent(source, node.span)
    start, end = _line_range(source, node.span)
    fence_lines = range(p.op.span.start.line, p.op.span.end.line + 1)
    others = [ln for ln in range(node.span.start.line + 1, node.span.end.line + 1)
              if ln not in fence_lines and source.line_text(ln).strip()]
    if not others:
        # the guard holds the fence and nothing else: the fence simply runs everywhere
        return [Fix(f"run `{call}` on every thread", (TextEdit(
            source.span(start, end), f"{at}{call}\n"),), Applicability.SAFE)]
    fs, fe = _line_range(source, p.op.span)
    return [Fix(f"move `{call}` out of the condition, after it", (
        TextEdit(source.span(fs, fe), ""),
        TextEdit(source.span(end, end), f"{at}{call}\n")), Applicability.UNSAFE)]


__all__ = ["CODES", "Guard", "Placed", "Spread", "Uniformity", "check", "check_kernel",
           "placed_ops"]
