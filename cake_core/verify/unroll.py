"""One concrete run of each role: loops unrolled, conditions decided, sizes chosen.

The synchronization rules reason about what a kernel does over several iterations (a
ring of stages wraps, a barrier's parity flips), which no single reading of the loop
body shows.  So each role is unrolled into the sequence of ops its warps execute for one
block, with every `dim()` given a concrete size large enough that each pipeline ring
wraps twice.  Conditions are decided with the loop indices; one that depends on which
warp or thread runs it (`warp.rank == 0`) is *divergent*: some threads take each side,
so both sides run.

An *agent* is what runs a program: a role, the warps outside every role (they run only
the kernel-level code), or the whole block of a kernel without roles.  Kernel-level
code outside the roles is run by every warp: its barriers and waits belong to every
agent, its other ops (copies, stores) to the first agent alone, so they happen once.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from cake_core.ir.kernel import ForOp, IfOp, Kernel, Node, Op, Role, Value, walk_nodes
from cake_core.ir.symbolic import BinExpr, Const, Dim, SymExpr, Var
from cake_core.ir.types import BarrierType, PipelineType, ScalarType
from cake_core.ir.values import Predicate

#: Index spaces whose value differs between the threads of one role.
THREAD_VARS = frozenset({"warp.id", "warp.rank", "warpgroup.id", "warpgroup.rank", "lane.id",
                         "thread.id"})
#: Concrete values for indices that are uniform over a block but unknown before launch.
BLOCK_VALUES = {"block.x": 1, "block.y": 1, "block.z": 1, "cluster.x": 0, "cluster.y": 0,
                "cluster.z": 0, "cluster.rank": 0}
#: An agent's unrolled program longer than this (ops and loop iterations) is cut short
#: (and not run together).
MAX_STEPS = 40_000

Env = dict[str, int]

_CMP: dict[str, Callable[[int, int], bool]] = {
    "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge,
    "==": operator.eq, "!=": operator.ne}


def evaluate(e: SymExpr, env: Env) -> int | None:
    """The value of an integer expression under `env` (dims are keyed `$NAME`)."""
    if isinstance(e, Const):
        return e.value
    if isinstance(e, Var):
        return env.get(e.name)
    if isinstance(e, Dim):
        return env.get("$" + e.name)
    if isinstance(e, BinExpr):
        a, b = evaluate(e.left, env), evaluate(e.right, env)
        if a is None or b is None:
            return None
        if e.op in ("//", "%", "cdiv") and b == 0:
            return None
        if e.op == "+":
            return a + b
        if e.op == "-":
            return a - b
        if e.op == "*":
            return a * b
        if e.op == "//":
            return a // b
        if e.op == "%":
            return a % b
        if e.op == "cdiv":
            return -(-a // b)
        return min(a, b) if e.op == "min" else max(a, b)
    return None


def truth(v: Value, env: Env) -> bool | None:
    """Whether a condition holds under `env`; None when it cannot be decided."""
    if isinstance(v.const, bool):
        return v.const
    if v.sym is not None:
        x = evaluate(v.sym, env)
        return None if x is None else x != 0
    p = v.const
    if not isinstance(p, Predicate):
        return None
    if p.op == "not":
        inner = truth(p.conditions[0], env)
        return None if inner is None else not inner
    if p.op in ("and", "or"):
        vals = [truth(x, env) for x in p.conditions]
        if p.op == "and":
            return False if False in vals else (None if None in vals else True)
        return True if True in vals else (None if None in vals else False)
    if p.op == "compare":
        ops, operands = p.chain
        nums = [n for x in operands
                if isinstance(x, SymExpr) and (n := evaluate(x, env)) is not None]
        if len(nums) != len(operands):
            return None
        return all(_CMP[o](a, b) for o, a, b in zip(ops, nums, nums[1:], strict=False))
    return None


def condition_leaves(v: Value) -> Iterator[SymExpr | Value]:
    """What a condition is made of: the integer expressions it compares, and the values
    that are neither an expression nor a predicate (a scalar parameter, a constant)."""
    stack: list[object] = [v]
    while stack:
        x = stack.pop()
        if isinstance(x, Value):
            if x.sym is not None:
                stack.append(x.sym)
            elif isinstance(x.const, Predicate):
                stack.append(x.const)
            else:
                yield x
        elif isinstance(x, Predicate):
            if x.op == "compare":
                stack.extend(x.chain[1])
            else:
                stack.extend(x.operands)
        elif isinstance(x, SymExpr):
            yield x


def atoms(v: Value) -> set[str]:
    """Names of the runtime indices and dims a condition depends on."""
    out: set[str] = set()
    for x in condition_leaves(v):
        if isinstance(x, SymExpr):
            for a in x.atoms():
                out.add(a.name if isinstance(a, Var) else "$" + a.name)  # type: ignore[attr-defined]
        elif isinstance(x.type, ScalarType):
            out.add("<scalar>")
    return out


def is_divergent(cond: Value) -> bool:
    return bool(atoms(cond) & THREAD_VARS)


# --- sizes ---------------------------------------------------------------------------------
def ring_size(kernel: Kernel) -> int:
    """The deepest ring the kernel cycles through (pipeline stages, barrier arrays, buffers)."""
    depth = 2
    for op in kernel.ops():
        for r in op.results:
            if isinstance(r.type, PipelineType):
                depth = max(depth, r.type.stages)
            elif isinstance(r.type, BarrierType):
                depth = max(depth, r.type.n)
    for a in kernel.smem:
        if a.kind == "buffer" and len(a.shape) >= 3:
            depth = max(depth, a.shape[0])
    return min(depth, 16)


def concrete_sizes(kernel: Kernel) -> Env:
    """Dim sizes under which every dim-bounded loop runs at least 2*ring+1 times."""
    target = 2 * ring_size(kernel) + 1
    env: Env = dict(BLOCK_VALUES)
    dims: dict[str, Dim] = dict(kernel.dims)
    loops = [n for n in kernel.walk() if isinstance(n, ForOp)]
    for loop in loops:
        for e in (loop.start, loop.stop):
            for a in e.atoms():
                if isinstance(a, Dim):
                    dims.setdefault(a.name, a)
    for d in dims.values():
        env["$" + d.name] = d.multiple_of
    bounded = [lp for lp in loops
               if any(isinstance(a, Dim) for a in lp.stop.atoms() | lp.start.atoms())]
    for d in dims.values():
        mine = [lp for lp in bounded if any(isinstance(a, Dim) and a.name == d.name
                                            for a in lp.stop.atoms() | lp.start.atoms())]
        if not mine:
            continue

        def short(mult: int, d: Dim = d, mine: list[ForOp] = mine) -> bool:
            env["$" + d.name] = d.multiple_of * mult
            return any((_trips(lp, env) or 0) < target for lp in mine)

        hi = 1
        while short(hi) and hi < 1 << 20 and (d.max is None or d.multiple_of * hi * 2 <= d.max):
            hi *= 2
        lo = max(1, hi // 2)
        while lo < hi:  # the smallest size that is long enough
            mid = (lo + hi) // 2
            if short(mid):
                lo = mid + 1
            else:
                hi = mid
        env["$" + d.name] = d.multiple_of * hi
    return env


def _trips(loop: ForOp, env: Env) -> int | None:
    probe = dict(env)
    for a in loop.start.atoms() | loop.stop.atoms():
        if isinstance(a, Var) and a.name not in probe:
            probe[a.name] = 0
    start, stop, step = (evaluate(x, probe) for x in (loop.start, loop.stop, loop.step))
    if start is None or stop is None or not step:
        return None
    return max(0, -(-(stop - start) // step))


# --- agents and their programs ---------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Agent:
    """A group of warps that runs one program: a role, the rest of the block, or all of it."""

    index: int
    name: str
    warps: int
    role: Role | None

    @property
    def label(self) -> str:
        return f"role {self.name!r}" if self.role is not None else self.name


def agents_of(kernel: Kernel) -> list[Agent]:
    roles = list(kernel.roles.values())
    if not roles:
        return [Agent(0, "the block", kernel.warps, None)]
    out = [Agent(i, r.name, r.warps, r) for i, r in enumerate(roles)]
    rest = kernel.warps - sum(r.warps for r in roles)
    if rest > 0:
        out.append(Agent(len(out), "the warps outside every role", rest, None))
    return out


def is_collective(op: Op) -> bool:
    """Ops every warp performs itself even at kernel level: barriers, fences and waits."""
    eff = op.prim.effects
    return eff.fence not in (None, "cp_async_commit") or eff.waits is not None


class Truncated(Exception):
    """An unrolled program grew past MAX_STEPS."""


@dataclass
class Walker:
    """Unrolls one agent's program lazily.

    `env` is shared with the consumer, which adds the concrete stage indices of pipeline
    stages as it sees them, so conditions and indices after an `acquire()` can use them.
    A uniform condition that cannot be decided (it tests a scalar parameter) is taken as
    true: the unrolled program follows one path, and `protocol.py` checks that both
    sides of such an `if` leave the pipelines alike.
    """

    kernel: Kernel
    agent: Agent
    env: Env
    steps: int = 0
    guards: list[tuple[IfOp, bool]] = field(default_factory=list)
    """The divergent `if`s around the op just yielded (outermost first), each with the
    branch it is in (True: `then`): which of the agent's threads run the op."""
    thread_loops: list[ForOp] = field(default_factory=list)
    """The loops around it whose bounds depend on the thread (walked once, see `_loop`)."""

    def run(self) -> Iterator[Op]:
        for node in self.kernel.body:
            if isinstance(node, Role):
                if node is self.agent.role:
                    yield from self._nodes(node.body, inside=True)
            else:
                yield from self._nodes([node], inside=False)

    def _nodes(self, nodes: list[Node], inside: bool) -> Iterator[Op]:
        for node in nodes:
            if isinstance(node, Op):
                if inside or self.agent.index == 0 or is_collective(node):
                    self.steps += 1
                    if self.steps > MAX_STEPS:
                        raise Truncated
                    yield node
            elif isinstance(node, ForOp):
                yield from self._loop(node, inside)
            elif isinstance(node, IfOp):
                yield from self._branch(node, inside)

    def _loop(self, loop: ForOp, inside: bool) -> Iterator[Op]:
        start, stop, step = (evaluate(x, self.env) for x in (loop.start, loop.stop, loop.step))
        if start is None or stop is None or not step:
            start, stop, step = 0, 1, 1  # an unknown bound: look at one iteration
        name = loop.var.sym.name if isinstance(loop.var.sym, Var) else loop.var.name
        saved = self.env.get(name)
        per_thread = bool(_loop_atoms(loop) & THREAD_VARS)
        if per_thread:
            self.thread_loops.append(loop)
        for i in range(start, stop, step):
            # an iteration counts as a step even when it yields no op: an empty
            # `for i in range(10**12)` must be cut short too, not walked to the end
            self.steps += 1
            if self.steps > MAX_STEPS:
                raise Truncated
            self.env[name] = i
            yield from self._nodes(loop.body, inside)
        if per_thread:
            self.thread_loops.pop()
        if saved is None:
            self.env.pop(name, None)
        else:
            self.env[name] = saved

    def _branch(self, node: IfOp, inside: bool) -> Iterator[Op]:
        t = truth(node.cond, self.env)
        if t is True:
            yield from self._nodes(node.then, inside)
        elif t is False:
            yield from self._nodes(node.orelse, inside)
        elif is_divergent(node.cond):
            self.guards.append((node, True))
            yield from self._nodes(node.then, inside)
            self.guards[-1] = (node, False)
            yield from self._nodes(node.orelse, inside)
            self.guards.pop()
        else:
            yield from self._nodes(node.then, inside)


def _loop_atoms(loop: ForOp) -> set[str]:
    return {a.name for e in (loop.start, loop.stop, loop.step) for a in e.atoms()
            if isinstance(a, Var)}


def loop_vars_of(nodes: list[Node]) -> set[str]:
    return {n.var.sym.name for n in walk_nodes(nodes)
            if isinstance(n, ForOp) and isinstance(n.var.sym, Var)}
