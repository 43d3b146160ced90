"""A kernel prepared for simulation: its processes, buffers and name bindings.

Preparation happens once per kernel and is independent of the dims and inputs: which
processes run (one per role, or one per warp when the role's code depends on `warp.id`),
where every buffer sits in shared memory, and which names an op's result is bound to.
The last point exists because the IR keeps a `Value` per name binding: `dist = cn - d`
makes the `sub` op's result and a second value `dist` that later ops read.  The
assignment itself is no IR node, so the simulator learns from the source's syntax tree
that `dist` receives the `sub` result when that op runs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from cake_core.elab.bindings import bindings_of
from cake_core.ir.kernel import ForOp, IfOp, Kernel, Node, Op, Role, Value, walk_nodes
from cake_core.ir.symbolic import SymExpr, Var
from cake_core.ir.types import ScalarType, TensorType
from cake_core.ir.values import Predicate, ViewOrigin
from cake_core.primitives.registry import multicast_mask, peer_rank
from cake_core.sim.layout import Buffer, buffers_of
from cake_core.source import SourceFile, Span
from cake_core.syntax import ast

_PER_WARP = {"warp.id", "warp.rank"}
_PER_WARPGROUP = {"warpgroup.id", "warpgroup.rank"}
_PER_THREAD = {"lane.id", "thread.id"}


class SimSetupError(Exception):
    """The kernel cannot be simulated as given (it does not check clean, bad dims, ...)."""

    def __init__(self, message: str, diagnostics: list | None = None) -> None:
        super().__init__(message)
        self.diagnostics = diagnostics or []


@dataclass(frozen=True, slots=True)
class ProcSpec:
    """One process: the role it runs (None: a kernel without roles; "" : warps that belong
    to no role and run only the kernel's top-level code) and the warps it stands for."""

    role: str | None
    warps: tuple[int, ...]
    label: str


@dataclass(eq=False)
class SimKernel:
    kernel: Kernel
    source: SourceFile | None
    buffers: dict[str, Buffer]
    smem_bytes: int
    procs: list[ProcSpec]
    groups: dict[str | None, tuple[int, ...]]
    """Processes that execute the ops of a role (None: top-level ops, run by all)."""
    after_op: dict[int, tuple[str, ...]] = field(default_factory=dict)
    """id(op) -> names the op's result is also bound to (assignments in the source)."""
    name_alias: dict[str, str] = field(default_factory=dict)
    """`y = x` with no op: y resolves to whatever x is bound to."""
    ops: list[Op] = field(default_factory=list)
    op_index: dict[int, int] = field(default_factory=dict)
    notes: list[tuple[Span, str]] = field(default_factory=list)
    unsupported: tuple[Span, str] | None = None
    """Why no block of this kernel is simulated (reported once; never a wrong answer)."""
    """Constructs the simulator approximates (reported as CK510 warnings)."""
    lane_ifs: set[int] = field(default_factory=set)
    """id(IfOp) of the conditions on a thread's own index (`lane.id`, `thread.id`,
    `elect_one()`): evaluated thread by thread (`lanes.py`)."""
    lane_fors: set[int] = field(default_factory=set)
    """id(ForOp) of the loops whose bounds depend on a thread's own index."""

    @property
    def name(self) -> str:
        return self.kernel.name

    @property
    def path(self) -> str:
        return self.source.path if self.source is not None else "<input>"

    def tensor_params(self) -> dict[str, TensorType]:
        return {p.name: p.value.type for p in self.kernel.params
                if isinstance(p.value.type, TensorType)}

    def scalar_params(self) -> dict[str, ScalarType]:
        return {p.name: p.value.type for p in self.kernel.params
                if isinstance(p.value.type, ScalarType)}

    # -- construction ------------------------------------------------------------------
    @classmethod
    def prepare(cls, kernel: Kernel, source: SourceFile | None = None,
                module: ast.Module | None = None) -> SimKernel:
        buffers, total = buffers_of(kernel)
        sk = cls(kernel, source, buffers, total, [], {})
        sk.ops = list(kernel.ops())
        cast = next((op for op in sk.ops if multicast_mask(op)), None)
        if cast is not None:
            sk.unsupported = (cast.span, "TMA multicast writes the shared memory of other "
                              "blocks of the cluster, and the simulator runs the blocks of a "
                              "cluster apart; `cake run --emulate` runs them together")
        elif (peer := next((op for op in sk.ops if peer_rank(op) is not None), None)):
            sk.unsupported = (peer.span, "an arrival on a peer block's mbarrier reaches "
                              "another block of the cluster, and the simulator runs the "
                              "blocks of a cluster apart; `cake run --emulate` runs them "
                              "together")
        elif any(c > 1 for c in kernel.cluster):
            sk.notes.append((kernel.decorator_span, "the blocks of a cluster are simulated as "
                             "independent blocks: cluster_sync() orders its own block only"))
        sk.op_index = {id(op): i for i, op in enumerate(sk.ops)}
        sk._plan_processes()
        if module is not None:
            sk._bind_names(module)
        return sk

    @classmethod
    def from_text(cls, text: str, path: str = "<input>", kernel: str | None = None
                  ) -> SimKernel:
        """Check `text` and prepare one of its kernels; SimSetupError if it has errors."""
        # an upward import the layers contract lists (pyproject.toml): text-in entry point
        from cake_core.check import check_text

        result = check_text(text, path, passes=[])  # the verifier may object; simulate anyway
        errors = [d for d in result.diagnostics if d.severity.value == "error"]
        if errors or result.program is None:
            raise SimSetupError(f"{path} has {len(errors)} error(s); fix them before "
                                "simulating", result.diagnostics)
        kernels = result.program.kernels
        if kernel is None and len(kernels) != 1:
            names = ", ".join(k.name for k in kernels) or "none"
            raise SimSetupError(f"{path} defines {len(kernels)} kernels ({names}); name one")
        chosen = kernels[0] if kernel is None else next(
            (k for k in kernels if k.name == kernel), None)
        if chosen is None:
            names = ", ".join(k.name for k in kernels)
            raise SimSetupError(f"{path} has no kernel `{kernel}` (it defines {names})")
        module = result.parse.module if result.parse is not None else None
        return cls.prepare(chosen, result.source, module)

    @classmethod
    def from_file(cls, path: str | Path, kernel: str | None = None) -> SimKernel:
        p = Path(path)
        try:
            text = p.read_text(encoding="utf-8")
        except OSError as exc:
            raise SimSetupError(f"cannot read {p}: {exc.strerror}") from exc
        return cls.from_text(text, p.as_posix(), kernel)

    def _plan_processes(self) -> None:
        k = self.kernel
        top = [n for n in k.body if not isinstance(n, Role)]
        self.lane_ifs = {id(n) for n in walk_nodes(k.body) if isinstance(n, IfOp)
                         and (n.elected or index_vars([_cond_only(n)]) & _PER_THREAD)}
        self.lane_fors = {id(n) for n in walk_nodes(k.body) if isinstance(n, ForOp)
                          and _bound_vars(n) & _PER_THREAD}
        top_vars = index_vars(top)
        specs: list[ProcSpec] = []
        groups: dict[str | None, list[int]] = {}
        units: list[tuple[str | None, range, set[str], Span]] = []
        if not k.roles:
            units.append((None, range(k.warps), top_vars, k.name_span))
        else:
            covered: set[int] = set()
            for r in k.roles.values():
                units.append((r.name, range(r.warp_start, r.warp_stop),
                              top_vars | index_vars(r.body), r.span))
                covered.update(range(r.warp_start, r.warp_stop))
            idle = [w for w in range(k.warps) if w not in covered]
            if idle:
                units.append(("", range(idle[0], idle[-1] + 1), top_vars, k.name_span))
        for role, warps, used, span in units:
            body = top if role is None or role == "" else [*top, k.roles[role]]
            if data_vars(body) & _PER_THREAD:
                self.notes.append((span, "`lane.id` and `thread.id` used as data take the "
                                   "value of the first thread running the code"))
            chunks: list[tuple[int, ...]]
            # a condition on `lane.id` or `thread.id` splits no process: it is evaluated
            # thread by thread (`lanes.py`); a warp-by-warp run would make each warp
            # perform the role's collective ops (a fragment store of the whole tile) alone
            if used & _PER_WARP:
                chunks = [(w,) for w in warps]
            elif used & _PER_WARPGROUP and len(warps) % 4 == 0:
                chunks = [tuple(warps[i:i + 4]) for i in range(0, len(warps), 4)]
            else:
                chunks = [tuple(warps)]
            for ch in chunks:
                idx = len(specs)
                specs.append(ProcSpec(role, ch, _label(role, ch, len(chunks) > 1)))
                groups.setdefault(role, []).append(idx)
        self.procs = specs
        self.groups = {r: tuple(v) for r, v in groups.items()}
        self.groups[None] = tuple(range(len(specs)))

    def _bind_names(self, module: ast.Module) -> None:
        bindings = bindings_of(self.kernel, module)
        self.after_op = bindings.after_op
        self.name_alias = bindings.aliases


def _label(role: str | None, warps: tuple[int, ...], split: bool) -> str:
    w = f"warp {warps[0]}" if len(warps) == 1 else f"warps {warps[0]}-{warps[-1]}"
    if role is None:
        return w if split else "the block"
    if role == "":
        return f"{w} (no role)"
    return f"role '{role}' {w}" if split else f"role '{role}'"


def index_vars(nodes: Sequence[Node], *, control: bool = False) -> set[str]:
    """Names of the runtime index variables (`warp.id`, `block.x`, ...) code depends on;
    `control`: only those that steer its control flow (conditions, loop bounds)."""
    out: set[str] = set()
    for n in walk_nodes(nodes):
        if isinstance(n, Op) and not control:
            for v in n.args.values():
                _collect_vars(v, out, 0)
        elif isinstance(n, ForOp):
            for e in (n.start, n.stop, n.step):
                _collect_vars(e, out, 0)
        elif isinstance(n, IfOp) and not n.elected:
            # elect_one splits no process: the role's first process holds its thread 0
            _collect_vars(n.cond, out, 0)
    return {v for v in out if "." in v}


def data_vars(nodes: Sequence[Node]) -> set[str]:
    """Names of the runtime index variables code uses as data, in op arguments (a
    condition or a loop bound on one is evaluated thread by thread instead)."""
    out: set[str] = set()
    for n in walk_nodes(nodes):
        if isinstance(n, Op):
            for v in n.args.values():
                _collect_vars(v, out, 0)
    return {v for v in out if "." in v}


def _bound_vars(n: ForOp) -> set[str]:
    out: set[str] = set()
    for e in (n.start, n.stop, n.step):
        _collect_vars(e, out, 0)
    return out


def _cond_only(n: IfOp) -> IfOp:
    """The `if` without its branches: what its condition alone depends on."""
    return IfOp(n.cond, [], [], n.span, n.role)


def _collect_vars(x: object, out: set[str], depth: int) -> None:
    if depth > 32:
        return
    if isinstance(x, SymExpr):
        out.update(a.name for a in x.atoms() if isinstance(a, Var))
    elif isinstance(x, Value):
        if x.sym is not None:
            _collect_vars(x.sym, out, depth + 1)
        if x.const is not None and not isinstance(x.const, str | float | int | bool):
            _collect_vars(x.const, out, depth + 1)
    elif isinstance(x, ViewOrigin):
        _collect_vars(x.base, out, depth + 1)
        for i in x.index:
            _collect_vars(i, out, depth + 1)
    elif isinstance(x, Predicate):
        _collect_vars(x.operands, out, depth + 1)
    elif isinstance(x, tuple | list):
        for e in x:
            _collect_vars(e, out, depth + 1)
