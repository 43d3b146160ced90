"""Decisions made about a whole kernel before any code is written.

- who runs what: one *group* per role (a warp range), plus the block for top-level code;
  a role whose every op is a one-thread op (TMA issue, barrier traffic, index math) runs
  in a single elected thread, as a hand-written producer warp does;
- the register layout of every fragment (`layouts.Dist`), inferred from the ops that
  constrain it: an accumulator's instruction fixes its layout, element-wise math and
  reductions propagate it, and whatever stays free gets the generic `rows` layout;
- the C++ variable of every name binding, and the block where it must be declared so that
  every use sees it (a name first bound inside a loop and read after it is hoisted);
- per pipeline, how many arrivals complete each barrier phase, and per `acquire`, the
  transaction bytes the TMA copies up to the matching `commit` deliver.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from cake_core.elab.bindings import Bindings
from cake_core.ir.kernel import ForOp, IfOp, Kernel, Node, Op, Role, Value
from cake_core.ir.symbolic import SymExpr, Var
from cake_core.ir.types import (
    BarrierType,
    FragmentType,
    PipelineType,
    StageType,
    TileType,
    TupleType,
    Type,
    const_shape,
)
from cake_core.ir.values import Predicate, ViewOrigin
from cake_core.lower import layouts
from cake_core.lower.layouts import COL, ROW, Dist
from cake_core.primitives.facets import FacetError, Unsupported
from cake_core.primitives.registry import multicast_fanout
from cake_core.primitives.traits import Trait
from cake_core.source import Span
from cake_core.verify.effects import arrival_scope


class LowerError(Exception):
    """A construct that verifies but that the lowering cannot translate (CK601)."""

    def __init__(self, span: Span, message: str) -> None:
        super().__init__(message)
        self.span = span
        self.message = message


@dataclass(frozen=True, slots=True)
class Group:
    """The threads that execute a role (or, with `role` None, the whole block)."""

    role: str | None
    warp_start: int
    warp_stop: int
    regs: int | None
    single: bool
    """The role's body runs in one elected thread."""

    @property
    def warps(self) -> int:
        return self.warp_stop - self.warp_start

    @property
    def threads(self) -> int:
        return self.warps * 32

    @property
    def warpgroups(self) -> int:
        return self.warps // 4 if self.warp_start % 4 == 0 and self.warps % 4 == 0 else 0


SlotKey = tuple[str | None, str, Type]

@dataclass
class PipeInfo:
    name: str
    stages: int
    producer: str
    consumers: tuple[str, ...]
    full_count: int
    empty_count: int
    producer_single: bool


@dataclass
class KernelPlan:
    kernel: Kernel
    bindings: Bindings
    groups: dict[str | None, Group]
    dists: dict[SlotKey, Dist] = field(default_factory=dict)
    slot_names: dict[SlotKey, str] = field(default_factory=dict)
    """C++ base name of each slot (unique within its group)."""
    hoisted: dict[int, list[SlotKey]] = field(default_factory=dict)
    """id(block) -> slots declared at the top of that block."""
    pipes: dict[str, PipeInfo] = field(default_factory=dict)
    tx_bytes: dict[int, int] = field(default_factory=dict)
    """id(acquire op) -> bytes its TMA copies deliver before the matching commit."""
    stage_names: set[str] = field(default_factory=set)
    phase_names: set[str] = field(default_factory=set)
    """Stage names whose `.phase` is read."""

    # -- slots ------------------------------------------------------------------------------
    def result_key(self, op: Op, index: int) -> SlotKey:
        r = op.results[index]
        names = self.bindings.names_of(op) if len(op.results) == 1 else ()
        return (op.role, names[0] if names else r.name, r.type)

    def arg_key(self, role: str | None, v: Value) -> SlotKey:
        name = v.name
        seen = 0
        while name in self.bindings.aliases and seen < 16:
            name, seen = self.bindings.aliases[name], seen + 1
        return (role, name, v.type)


def _walk_ops(nodes: list[Node]) -> Iterator[Op]:
    for n in nodes:
        if isinstance(n, Op):
            yield n
        elif isinstance(n, ForOp | Role):
            yield from _walk_ops(n.body)
        elif isinstance(n, IfOp):
            yield from _walk_ops(n.then)
            yield from _walk_ops(n.orelse)


def build_plan(kernel: Kernel, bindings: Bindings) -> KernelPlan:
    groups: dict[str | None, Group] = {None: Group(None, 0, kernel.warps, None, False)}
    for r in kernel.roles.values():
        groups[r.name] = Group(r.name, r.warp_start, r.warp_stop, r.regs, _single(r))
    plan = KernelPlan(kernel, bindings, groups)
    _infer(plan)
    _slots(plan)
    _pipelines(plan)
    return plan


def _single(role: Role) -> bool:
    """A role that issues an asynchronous copy and otherwise only one-thread ops."""
    ops = list(_walk_ops(role.body))
    return bool(ops) and all(op.prim.has(Trait.SINGLE_THREAD) and arrival_scope(op) == "role"
                             for op in ops) and \
        any(op.prim.effects.async_group is not None for op in ops)


# --- layout inference -------------------------------------------------------------------------
def fragment_shape(t: Type) -> tuple[int, ...]:
    """The constant shape of a fragment type (the verifier guarantees one)."""
    assert isinstance(t, FragmentType)
    shape = const_shape(t.shape)
    assert shape is not None
    return shape


class LayoutContext:
    """What a lower facet's `layouts(op, ctx)` hook sees of the layout inference.

    The hook states the register layouts its op imposes or propagates: it reads the
    layouts known so far with `get` and fixes one with `put`, for any argument or result
    of the op; inference calls every hook, forwards and backwards, until nothing changes.
    """

    def __init__(self, infer: _Infer, op: Op) -> None:
        self._infer = infer
        self.op = op
        self.group = infer.plan.groups[op.role]
        """The threads that run the op (an accumulator's layout depends on them)."""

    def _key(self, v: Value) -> SlotKey:
        for i, r in enumerate(self.op.results):
            if r is v:
                return self._infer.plan.result_key(self.op, i)
        return self._infer.plan.arg_key(self.op.role, v)

    def get(self, v: Value) -> Dist | None:
        """The layout of `v` (an argument or a result of the op), if already known."""
        return self._infer.plan.dists.get(self._key(v))

    def put(self, v: Value, d: Dist) -> None:
        """Fix the layout of `v`; a CK601 when it already has an incompatible one."""
        self._infer.put(self._key(v), d, self.op.span)


LayoutHook = Callable[[Op, LayoutContext], None]


class _Infer:
    def __init__(self, plan: KernelPlan) -> None:
        self.plan = plan
        self.changed = False

    def put(self, key: SlotKey, d: Dist, span: Span) -> None:
        old = self.plan.dists.get(key)
        if old is None:
            self.plan.dists[key] = d
            self.changed = True
        elif not old.compatible(d):
            raise LowerError(span, f"`{key[1]}` is used with two register layouts "
                             f"({old.parent.kind} {old.parent.shape} and {d.parent.kind} "
                             f"{d.parent.shape}); the lowering cannot convert between them")

    def op(self, op: Op) -> None:
        """Apply the op's layout constraints: its lower facet's `layouts` hook, if any."""
        try:
            facet = op.prim.facet("lower")
        except FacetError:
            return  # the writer reports the broken facet at the op
        hook = None if isinstance(facet, Unsupported) else getattr(facet, "layouts", None)
        if callable(hook):
            hook(op, LayoutContext(self, op))


def _infer(plan: KernelPlan) -> None:
    """Propagate layouts to a fixpoint; then give the first fragment nothing constrains the
    generic layout of its group and propagate again, until every fragment has one."""
    k = plan.kernel
    ops = list(k.ops())
    inf = _Infer(plan)
    while True:
        for _ in range(64):
            inf.changed = False
            for op in ops:
                inf.op(op)
            for op in reversed(ops):
                inf.op(op)
            if not inf.changed:
                break
        free = [(op, i, len(r.type.shape)) for op in ops for i, r in enumerate(op.results)
                if isinstance(r.type, FragmentType) and plan.result_key(op, i) not in plan.dists]
        if not free:
            return
        # the highest-rank fragment first: per-row vectors usually come from its reductions
        op, i, _ = max(free, key=lambda f: f[2])
        r = op.results[i]
        assert isinstance(r.type, FragmentType)
        shape = fragment_shape(r.type)
        g = plan.groups[op.role]
        d = layouts.default_dist(shape, g.warps, r.type.dtype.bytes)
        if d is None:
            raise LowerError(op.span, f"fragments of rank {len(shape)} are lowered only when "
                             "an instruction fixes their layout")
        plan.dists[plan.result_key(op, i)] = d


# --- slots: C++ names and declaration blocks ---------------------------------------------------
def _names_in(x: object, out: set[str], depth: int = 0) -> None:
    if depth > 24:
        return
    if isinstance(x, SymExpr):
        out.update(a.name for a in x.atoms() if isinstance(a, Var))
    elif isinstance(x, Value):
        if isinstance(x.type, StageType) and x.sym is None:
            out.add(x.name)
        if x.sym is not None:
            _names_in(x.sym, out, depth + 1)
        if isinstance(x.const, ViewOrigin | Predicate | tuple):
            _names_in(x.const, out, depth + 1)
    elif isinstance(x, ViewOrigin):
        _names_in(x.base, out, depth + 1)
        for i in x.index:
            _names_in(i, out, depth + 1)
    elif isinstance(x, Predicate):
        _names_in(x.operands, out, depth + 1)
    elif isinstance(x, tuple | list):
        for e in x:
            _names_in(e, out, depth + 1)


def _slots(plan: KernelPlan) -> None:
    """Give every fragment and stage slot a C++ name and the block that declares it."""
    k = plan.kernel
    parent: dict[int, int | None] = {id(k.body): None}
    defs: dict[SlotKey, list[int]] = {}
    uses: dict[SlotKey, list[int]] = {}
    order: list[SlotKey] = []

    def note(d: dict[SlotKey, list[int]], key: SlotKey, block: int) -> None:
        if key not in defs and key not in uses:
            order.append(key)
        d.setdefault(key, []).append(block)

    def stage_key(role: str | None, name: str) -> SlotKey:
        return (role, name, StageType("", 0, ""))

    def visit(nodes: list[Node], role: str | None) -> None:
        block = id(nodes)
        for n in nodes:
            if isinstance(n, Op):
                for v in n.args.values():
                    if isinstance(v.type, FragmentType):
                        note(uses, plan.arg_key(n.role, v), block)
                    elif isinstance(v.type, TupleType) and isinstance(v.const, tuple):
                        for e in v.const:
                            if isinstance(e, Value) and isinstance(e.type, FragmentType):
                                note(uses, plan.arg_key(n.role, e), block)
                    names: set[str] = set()
                    _names_in(v, names)
                    for nm in names:
                        if nm.endswith(".phase"):
                            plan.phase_names.add(nm[:-6])
                            nm = nm[:-6]
                        note(uses, stage_key(n.role, nm), block)
                for i, r in enumerate(n.results):
                    if isinstance(r.type, FragmentType):
                        note(defs, plan.result_key(n, i), block)
                    elif isinstance(r.type, StageType):
                        for nm in (plan.bindings.names_of(n) or (r.name,)):
                            plan.stage_names.add(nm)
                            note(defs, stage_key(n.role, nm), block)
            elif isinstance(n, ForOp):
                parent[id(n.body)] = block
                for e in (n.start, n.stop):
                    names = set()
                    _names_in(e, names)
                    for nm in names:
                        note(uses, stage_key(n.role, nm), block)
                visit(n.body, role)
            elif isinstance(n, IfOp):
                parent[id(n.then)] = block
                parent[id(n.orelse)] = block
                names = set()
                _names_in(n.cond, names)
                for nm in names:
                    note(uses, stage_key(n.role, nm), block)
                visit(n.then, role)
                visit(n.orelse, role)
            elif isinstance(n, Role):
                parent[id(n.body)] = block
                visit(n.body, n.name)

    visit(k.body, None)

    def chain(b: int) -> list[int]:
        out = [b]
        while parent.get(out[-1]) is not None:
            out.append(parent[out[-1]])  # type: ignore[arg-type]
        return out

    taken: dict[str | None, set[str]] = {}
    for key in order:
        if key not in defs:
            continue  # a loop variable, an index space, or a value defined elsewhere
        role, name, _ = key
        used = taken.setdefault(role, set())
        base = name.lstrip("_") or "v"
        if name.startswith("_t") and name[2:].isdigit():
            base = "t" + name[2:]
        cname, i = base, 2
        while cname in used:
            cname, i = f"{base}_{i}", i + 1
        used.add(cname)
        plan.slot_names[key] = cname
        blocks = defs[key] + uses.get(key, [])
        first = chain(defs[key][0])
        common = [b for b in first if all(b in chain(x) for x in blocks)]
        if common and common[0] != defs[key][0]:
            plan.hoisted.setdefault(common[0], []).append(key)


# --- pipelines ---------------------------------------------------------------------------------
def _pipelines(plan: KernelPlan) -> None:
    k = plan.kernel
    for op in k.ops():
        if op.prim.has(Trait.DECLARES_PIPELINE) and op.results:
            t = op.results[0].type
            assert isinstance(t, PipelineType)
            prod = plan.groups.get(t.producer)
            cons = [plan.groups[c] for c in t.consumers if c in plan.groups]
            if prod is None or len(cons) != len(t.consumers):
                raise LowerError(op.span, f"pipeline `{t.name}` names a role the kernel lacks")
            full = 1 if prod.single else prod.warps
            empty = sum(1 if c.single else c.warps for c in cons)
            plan.pipes[t.name] = PipeInfo(t.name, t.stages, t.producer, t.consumers, full, empty,
                                          prod.single)
    for role in k.roles.values():
        _tx_in_block(plan, role.body)
        _arrivals_unconditional(role.body, False)


_PER_THREAD_INDICES = ("warp.", "warpgroup.", "lane.", "thread.")


def _pipe_arrival(op: Op) -> bool:
    """An arrival that counts towards a pipeline barrier's phase (a commit or a release);
    a copy's transaction bytes (`tx_bytes`) complete a phase but are no arrival count."""
    e = op.prim.effects
    return e.arrives is not None and not e.tx_bytes and \
        isinstance(op.args[e.arrives].type, PipelineType)


def _pipe_step(op: Op, effect: str) -> str | None:
    """The pipeline a producer step waits on (`effect` "waits": it opens a stage) or
    arrives on (`effect` "arrives": it publishes the stage), else None."""
    action = op.prim.effects.pipe_action
    if action is None or action.side != "producer":
        return None
    arg = getattr(op.prim.effects, effect)
    if arg is None or not isinstance(op.args[arg].type, PipelineType):
        return None
    return _pipe_name(op.args[arg])


def _arrivals_unconditional(nodes: list[Node], guarded: bool) -> None:
    """Every warp of a role makes the role's pipeline arrivals (one per warp, or the leader's
    one): an arrival under a condition that differs between warps would miscount."""
    for n in nodes:
        if isinstance(n, Op) and guarded and _pipe_arrival(n):
            raise LowerError(n.span, f"`{n.prim.name}()` under a condition on the warp, lane or "
                             "thread index: the lowering counts one arrival per warp of the "
                             "role, so every warp must reach it")
        if isinstance(n, ForOp):
            _arrivals_unconditional(n.body, guarded)
        elif isinstance(n, IfOp):
            names: set[str] = set()
            _names_in(n.cond, names)
            inner = guarded or any(x.startswith(_PER_THREAD_INDICES) for x in names)
            _arrivals_unconditional(n.then, inner)
            _arrivals_unconditional(n.orelse, inner)


def _tx_in_block(plan: KernelPlan, nodes: list[Node]) -> None:
    for i, n in enumerate(nodes):
        pipe = _pipe_step(n, "waits") if isinstance(n, Op) else None
        if isinstance(n, Op) and pipe is not None:
            total, closed = 0, False
            for m in nodes[i + 1:]:
                if isinstance(m, Op) and _pipe_step(m, "arrives") == pipe:
                    closed = True
                    break
                total += _tx_bytes(m, pipe)
            if not closed and total:
                raise LowerError(n.span, f"the TMA copies after this acquire() must reach "
                                 f"`{pipe}.commit()` in the same block for the lowering to "
                                 "announce their bytes")
            plan.tx_bytes[id(n)] = total
        elif isinstance(n, ForOp):
            _tx_in_block(plan, n.body)
        elif isinstance(n, IfOp):
            _tx_in_block(plan, n.then)
            _tx_in_block(plan, n.orelse)


def _pipe_name(v: Value) -> str:
    t = v.type
    return t.name if isinstance(t, PipelineType | BarrierType) else v.name


def _tx_bytes(n: Node, pipe: str) -> int:
    """Bytes the copies of `n` deliver to `pipe`'s current stage as transaction bytes."""
    if isinstance(n, Op):
        e = n.prim.effects
        if e.tx_bytes and e.arrives is not None and _pipe_name(n.args[e.arrives]) == pipe and \
                isinstance(n.args[e.arrives].type, PipelineType):
            return sum(_tile_bytes(n.args[r].type) for r in e.reads) * multicast_fanout(n)
        return 0
    if isinstance(n, ForOp):
        trips = n.trip_count.const
        inner = sum(_tx_bytes(m, pipe) for m in n.body)
        if inner and trips is None:
            raise LowerError(n.span, "TMA copies into a pipeline stage inside a loop with a "
                             "run-time trip count: the lowering cannot announce their bytes")
        return inner * (trips or 0)
    if isinstance(n, IfOp):
        a = sum(_tx_bytes(m, pipe) for m in n.then)
        b = sum(_tx_bytes(m, pipe) for m in n.orelse)
        if a != b:
            raise LowerError(n.span, "the branches of this `if` copy different numbers of bytes "
                             "into the pipeline stage")
        return a
    return 0


def _tile_bytes(t: Type) -> int:
    """Bytes of a global tile a copy reads (0 for anything else it reads)."""
    if not isinstance(t, TileType):
        return 0
    size = t.dtype.bytes
    for d in const_shape(t.shape) or ():
        size *= d
    return size


__all__ = ["COL", "ROW", "Group", "KernelPlan", "LayoutContext", "LayoutHook", "LowerError",
           "PipeInfo", "build_plan", "fragment_shape"]
