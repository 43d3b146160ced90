"""Shared-memory views that can reach outside their buffer (CK405).

The type rules check what is constant at a call: a tile shape divides its view, a
constant buffer index is below its extent.  A tile coordinate or an index written over
loop variables (`sa[s].tile((WM, 16), (wm, kk + 1))` inside `for kk in range(BK // 16)`)
is not constant, yet its range is: loops run over `range(start, stop, step)` with folded
bounds, and warp, lane and stage indices have known extents.  Nothing checks such a view
before the simulator steps past the buffer on the last iteration, and on a GPU it reads
the neighbouring buffer (or the next stage) without any error.

For every view this pass computes the exact set of values each coordinate takes over the
loops, warps and stages around it, and reports a coordinate that can address a tile (or
an index that can address an entry) outside the view.  Coordinates count tiles:
coordinate c of a tile of extent h covers elements [c*h, c*h + h) of an axis.

Exact, not interval, arithmetic: an interval bound of `2*kk - kk` or `(2*kk) % 4` can lie
outside the values the expression really takes, and a false finding here would block
correct kernels.  So the values are enumerated when there are at most MAX_COMBINATIONS
assignments of the indices involved, and otherwise taken at the corners of the index
ranges, which is exact only for an expression monotone in each index that names each
index once (`wm * 4 + kk // 2`); anything else is left alone.  `if` conditions around
the view are applied the same way (`if kk + 1 < KSTEPS:` guards a prefetch).

Silent by design, because the range is not known when the kernel is checked: anything
depending on a launch-time `dim()` (a `range(cdiv(K, BK))` loop, `block.x` of a
dim-sized grid), a loop whose bounds depend on another loop, a loop variable read after
its loop, a condition on a scalar, and cluster indices.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass, replace

from cake_core.diagnostics import codes
from cake_core.diagnostics.model import Diagnostic, Related
from cake_core.ir.kernel import ForOp, IfOp, Kernel, Node, Op, Program, Role, Value
from cake_core.ir.symbolic import BinExpr, Const, Dim, SymExpr, Var
from cake_core.ir.types import SmemType, StageType, TupleType
from cake_core.ir.values import ViewOrigin
from cake_core.primitives.traits import Trait
from cake_core.source import SourceFile, Span
from cake_core.verify.source_text import (
    base_text,
    index_texts,
    loop_header,
    loop_header_span,
    tuple_texts,
)
from cake_core.verify.unroll import condition_leaves, evaluate, truth

#: Every code this pass may emit (tests/test_rule_codes.py holds it to that).
CODES = (codes.SMEM_VIEW_OUT_OF_BOUNDS,)
#: Index assignments enumerated per coordinate; past this only monotone forms are decided.
MAX_COMBINATIONS = 4096
#: Index spaces whose range inside a role is the role's, not the kernel's.
_WARP_SPACES = ("warp.id", "warpgroup.id", "thread.id")


def check(program: Program, source: SourceFile) -> list[Diagnostic]:
    out: list[Diagnostic] = []
    for kernel in program.kernels:
        out.extend(_KernelBounds(kernel, source).run())
    return out


@dataclass(frozen=True, slots=True)
class _Where:
    """What encloses an op: its loops (outermost first), the branches taken to reach
    it (condition, which side), and its role."""

    loops: tuple[ForOp, ...] = ()
    guards: tuple[tuple[Value, bool], ...] = ()
    role: Role | None = None


@dataclass(frozen=True, slots=True)
class _Extreme:
    """One end of a coordinate's range, with the index values that reach it."""

    value: int
    witness: tuple[tuple[Var, int], ...]


@dataclass(frozen=True, slots=True)
class _Axis:
    """One coordinate of a view to check: `count` valid positions, 0..count-1."""

    expr: SymExpr
    text: str
    span: Span
    count: int


@dataclass(frozen=True, slots=True)
class _Finding:
    """A view out of bounds, before findings of one mistake are merged into one."""

    diag: Diagnostic
    end: _Extreme
    also: str
    """How the finding reads as a related range of another one."""


class _KernelBounds:
    def __init__(self, kernel: Kernel, source: SourceFile) -> None:
        self.kernel = kernel
        self.source = source
        self.loop_vars = {n.var.sym for n in kernel.walk()
                          if isinstance(n, ForOp) and isinstance(n.var.sym, Var)}
        self.seen: set[int] = set()

    def run(self) -> Iterator[Diagnostic]:
        """One finding per iteration that leaves a buffer: an unrolled body reading
        `kk` and `kk + 1` of two buffers past the end is one mistake (the loop's step
        or range), reported at its first view with the others as related ranges."""
        groups: dict[object, list[_Finding]] = {}
        for f in self._nodes(self.kernel.body, _Where()):
            key = tuple((v, x) for v, x in f.end.witness if v in self.loop_vars) or id(f)
            groups.setdefault(key, []).append(f)
        for first, *rest in groups.values():
            if not rest:
                yield first.diag
                continue
            yield replace(first.diag,
                          related=(*(Related(f.diag.span, f.also) for f in rest),
                                   *first.diag.related),
                          data={**first.diag.data, "views": 1 + len(rest)})

    def _nodes(self, nodes: list[Node], where: _Where) -> Iterator[_Finding]:
        for n in nodes:
            if isinstance(n, Op):
                yield from self._op(n, where)
            elif isinstance(n, ForOp):
                yield from self._nodes(n.body, _Where((*where.loops, n), where.guards,
                                                      where.role))
            elif isinstance(n, IfOp):
                yield from self._nodes(n.then, _Where(where.loops,
                                                      (*where.guards, (n.cond, True)),
                                                      where.role))
                yield from self._nodes(n.orelse, _Where(where.loops,
                                                        (*where.guards, (n.cond, False)),
                                                        where.role))
            elif isinstance(n, Role):
                yield from self._nodes(n.body, _Where(where.loops, where.guards, n))

    # -- the views of one op ---------------------------------------------------------------
    def _op(self, op: Op, where: _Where) -> Iterator[_Finding]:
        for name, v in op.args.items():
            if isinstance(v.type, SmemType):
                yield from self._indexed(v, op.arg_spans.get(name, v.span), where)
        view = op.args.get("self")
        if Trait.SMEM_VIEW in op.prim.traits and view is not None and \
                isinstance(view.type, SmemType):
            f = self._tile(op, where)
            if f is not None:
                yield f

    def _indexed(self, v: Value, span: Span, where: _Where) -> Iterator[_Finding]:
        """`buf[i, ...]` with int indices (a pipeline stage always fits: the builder
        matched its stage count to the extent)."""
        holder, written = v, True  # the outermost subscript is the one written at `span`
        while isinstance(holder.const, ViewOrigin):
            origin = holder.const
            if id(origin) not in self.seen:
                self.seen.add(id(origin))
                f = self._index(origin, span if written else holder.span, where, written)
                if f is not None:
                    yield f
            holder, written = origin.base, False

    def _index(self, origin: ViewOrigin, span: Span, where: _Where,
               written: bool) -> _Finding | None:
        base = origin.base
        if not isinstance(base.type, SmemType):
            return None
        texts = index_texts(self.source, span, len(origin.index)) if written else None
        for j, idx in enumerate(origin.index):
            extent = base.type.shape[j].const if j < len(base.type.shape) else None
            if isinstance(idx.type, StageType) or idx.sym is None or extent is None:
                continue
            text, at = texts[j] if texts else (str(idx.sym), span)
            found = self._outside(_Axis(idx.sym, text, at, extent), where)
            if found is None:
                continue
            end = found[1] or found[0]
            assert end is not None
            name = base_text(self.source, span, base) if texts else base.name
            verb = _reaches(end) if end is found[1] else "is"
            msg = (f"index {j} (`{text}`) {verb} {end.value}{self._when(end, where)}, but "
                   f"dimension {j} of `{name}` has extent {extent} (0..{extent - 1})")
            diag = codes.SMEM_VIEW_OUT_OF_BOUNDS.at(
                at, msg, related=self._related(end, where),
                notes=["indexing a buffer's leading dimensions picks whole entries (a "
                       "stage, a slab); an index past the extent addresses the memory "
                       "after the buffer"],
                data={"index": j, "range": _range(found), "extent": extent})
            return _Finding(diag, end, f"`{text}` is {end.value} there too, outside "
                            f"dimension {j} of `{name}` (0..{extent - 1})")
        return None

    def _tile(self, op: Op, where: _Where) -> _Finding | None:
        view, shape_v, coords_v = op.args["self"], op.args.get("shape"), op.args.get("coords")
        t = view.type
        if shape_v is None or coords_v is None or not isinstance(t, SmemType):
            return None
        shape = _ints(shape_v)
        coords = coords_v.const if isinstance(coords_v.type, TupleType) else (coords_v,)
        if shape is None or not isinstance(coords, tuple) or len(coords) != len(shape) or \
                len(shape) != len(t.shape):
            return None
        cspan = op.arg_spans.get("coords", op.span)
        texts = tuple_texts(self.source, cspan, len(coords)) \
            if isinstance(coords_v.type, TupleType) else [(self.source.snippet(cspan), cspan)]
        vname = self.source.snippet(op.arg_spans["self"]) if "self" in op.arg_spans \
            else view.name
        for i, (c, h, full) in enumerate(zip(coords, shape, t.shape, strict=True)):
            extent = full.const
            if not isinstance(c, Value) or c.sym is None or extent is None or h <= 0:
                continue
            text, at = texts[i] if texts else (str(c.sym), cspan)
            n = extent // h
            found = self._outside(_Axis(c.sym, text, at, n), where)
            if found is None:
                continue
            end = found[1] or found[0]
            assert end is not None
            if end is found[1]:
                verb = _reaches(end)
                note = (f"coordinates count tiles: tile {end.value} covers "
                        f"[{end.value * h}, {end.value * h + h}) of an axis {extent} long")
            else:
                verb = "is"
                note = (f"coordinates count tiles: tile {end.value} would start "
                        f"{-end.value * h} elements before the view")
            msg = (f"coordinate {i} (`{text}`) {verb} {end.value}{self._when(end, where)}, "
                   f"but `{vname}` holds {n} tile{'s' if n != 1 else ''} of {h} along that "
                   f"axis (0..{n - 1})")
            diag = codes.SMEM_VIEW_OUT_OF_BOUNDS.at(
                at, msg, related=self._related(end, where), notes=[note],
                data={"coordinate": i, "range": _range(found), "tiles": n, "tile": h,
                      "extent": extent})
            return _Finding(diag, end, f"`{text}` is {end.value} there too, outside the "
                            f"{n} tiles of `{vname}` along that axis")
        return None

    # -- ranges ------------------------------------------------------------------------------
    def _outside(self, axis: _Axis, where: _Where
                 ) -> tuple[_Extreme | None, _Extreme | None] | None:
        """The ends of the axis's range that fall outside 0..count-1 (None: in bounds, or
        the range is not known)."""
        ends = self._extremes(axis.expr, where)
        if ends is None:
            return None
        lo, hi = ends
        low = lo if lo.value < 0 else None
        high = hi if hi.value >= axis.count else None
        if low is None and high is None:
            return None
        return low, high

    def _extremes(self, e: SymExpr, where: _Where) -> tuple[_Extreme, _Extreme] | None:
        atoms = e.atoms()
        if not atoms:
            c = e.const
            return None if c is None else (_Extreme(c, ()), _Extreme(c, ()))
        guards, atoms = self._guards(atoms, where)
        if guards is None:
            return None
        domains: dict[Var, range] = {}
        for a in atoms:
            r = self._domain(a, where) if isinstance(a, Var) else None
            if r is None or not isinstance(a, Var):
                return None
            domains[a] = r
        if len({v.name for v in domains}) != len(domains):
            return None  # two indices of one name: evaluation by name would mix them
        variables = sorted(domains, key=lambda v: v.name)
        total = 1
        for v in variables:
            total *= len(domains[v])
        if total == 0:
            return None  # a loop that never runs
        mine = [v for v in variables if v in e.atoms()]
        if total <= MAX_COMBINATIONS:
            combos = itertools.product(*(domains[v] for v in variables))
        elif not guards and _monotone_once(e):
            combos = itertools.product(*((domains[v][0], domains[v][-1]) for v in variables))
        else:
            return None
        lo: _Extreme | None = None
        hi: _Extreme | None = None
        for combo in combos:
            env = {v.name: x for v, x in zip(variables, combo, strict=True)}
            if any(truth(cond, env) is not want for cond, want in guards):
                continue
            x = evaluate(e, env)
            if x is None:
                return None
            if lo is None or x < lo.value:
                lo = _Extreme(x, tuple((v, env[v.name]) for v in mine))
            if hi is None or x > hi.value:
                hi = _Extreme(x, tuple((v, env[v.name]) for v in mine))
        if lo is None or hi is None:
            return None  # no assignment passes the conditions: the view is never made
        return lo, hi

    def _guards(self, atoms: set[SymExpr], where: _Where
                ) -> tuple[list[tuple[Value, bool]] | None, set[SymExpr]]:
        """The enclosing conditions that constrain the indices in `atoms` (transitively),
        and every index they involve; None when such a condition cannot be evaluated."""
        pending = [(c, w, _cond_atoms(c)) for c, w in where.guards]
        atoms = set(atoms)
        names = {_name(a) for a in atoms}
        used: list[tuple[Value, bool]] = []
        changed = True
        while changed:
            changed = False
            for item in list(pending):
                cond, want, cond_atoms = item
                if cond_atoms is not None and not ({_name(a) for a in cond_atoms} & names):
                    continue
                if cond_atoms is None:
                    return None, atoms  # a condition on a scalar may constrain anything
                pending.remove(item)
                used.append((cond, want))
                atoms |= cond_atoms
                names |= {_name(a) for a in cond_atoms}
                changed = True
        return used, atoms

    def _domain(self, v: Var, where: _Where) -> range | None:
        for loop in reversed(where.loops):
            if loop.var.sym == v:
                start, stop, step = loop.start.const, loop.stop.const, loop.step.const
                if start is None or stop is None or not step:
                    return None
                return range(start, stop, step)
        if v in self.loop_vars:
            return None  # a loop variable outside its loop
        role = where.role
        if role is not None and v.name in _WARP_SPACES:
            ws, we = role.warp_start, role.warp_stop
            return {"warp.id": range(ws, we), "warpgroup.id": range(ws // 4, (we - 1) // 4 + 1),
                    "thread.id": range(32 * ws, 32 * we)}[v.name]
        lo = v.lo.const if v.lo is not None else None
        hi = v.hi.const if v.hi is not None else None
        if lo is None or hi is None:
            return None
        return range(lo, hi)

    # -- wording -----------------------------------------------------------------------------
    def _when(self, end: _Extreme, where: _Where) -> str:
        parts = []
        for v, x in end.witness:
            loop = next((lp for lp in reversed(where.loops) if lp.var.sym == v), None)
            if loop is None:
                parts.append(f"when {v.name} = {x}")
                continue
            r = self._domain(v, where)
            header = loop_header(self.source, loop)
            if r is not None and len(r) > 1 and x == r[-1]:
                parts.append(f"on the last iteration of `{header}` ({v.name} = {x})")
            elif r is not None and len(r) > 1 and x == r[0]:
                parts.append(f"on the first iteration of `{header}` ({v.name} = {x})")
            elif r is not None and x in r:
                parts.append(f"on iteration {r.index(x) + 1} of `{header}` ({v.name} = {x})")
            else:
                parts.append(f"in `{header}` ({v.name} = {x})")
        return " " + " and ".join(parts) if parts else ""

    def _related(self, end: _Extreme, where: _Where) -> list[Related]:
        out = []
        for v, _ in end.witness:
            loop = next((lp for lp in reversed(where.loops) if lp.var.sym == v), None)
            r = self._domain(v, where)
            if loop is not None and r is not None:
                out.append(Related(loop_header_span(self.source, loop),
                                   f"`{v.name}` takes the values {_values(r)}"))
        return out


# --- helpers -----------------------------------------------------------------------------------
def _name(a: SymExpr) -> str:
    return a.name if isinstance(a, Var | Dim) else str(a)


def _cond_atoms(cond: Value) -> set[SymExpr] | None:
    """The indices and dims a condition depends on; None when it depends on something
    that is not an integer expression (a scalar parameter, a value of unknown kind)."""
    out: set[SymExpr] = set()
    for x in condition_leaves(cond):
        if isinstance(x, SymExpr):
            out |= x.atoms()
        elif not isinstance(x.const, bool):
            return None
    return out


def _monotone_once(e: SymExpr) -> bool:
    """Monotone in each index, each named once: its extremes are at the range corners."""
    counts: dict[SymExpr, int] = {}

    def walk(x: SymExpr) -> bool:
        if isinstance(x, Const):
            return True
        if isinstance(x, Var | Dim):
            counts[x] = counts.get(x, 0) + 1
            return counts[x] == 1
        if not isinstance(x, BinExpr):
            return False
        if x.op in ("+", "-", "min", "max"):
            return walk(x.left) and walk(x.right)
        if x.op == "*":
            return (x.left.const is not None or x.right.const is not None) and \
                walk(x.left) and walk(x.right)
        if x.op in ("//", "cdiv"):
            return bool(x.right.const) and walk(x.left)
        return False

    return walk(e)


def _ints(v: Value) -> tuple[int, ...] | None:
    elts = v.const if isinstance(v.type, TupleType) else (v,)
    if not isinstance(elts, tuple):
        return None
    out = []
    for e in elts:
        c = e.sym.const if isinstance(e, Value) and e.sym is not None else None
        if c is None:
            return None
        out.append(c)
    return tuple(out)


def _reaches(end: _Extreme) -> str:
    return "reaches" if end.witness else "is"


def _range(found: tuple[_Extreme | None, _Extreme | None]) -> list[int | None]:
    lo, hi = found
    return [None if lo is None else lo.value, None if hi is None else hi.value]


def _values(r: range) -> str:
    if len(r) <= 4:
        return ", ".join(str(x) for x in r)
    return f"{r[0]}, {r[1]}, ..., {r[-1]}"
