"""What a simulate facet sees: the running process, its block, and checked memory access.

One `SimContext` exists per process of a block.  Facets read their arguments through it
(`ctx.view(op, "dst")`, `ctx.operand(op, "a")`), move bytes through it (`smem_read`,
`smem_write`, `global_read`, `global_write`: these apply the layout, zero-fill and clip
tiles, and do the dynamic checks -- uninitialised bytes, races, bounds), and start
asynchronous work through `issue`.  Findings go through `report`, which keeps one
diagnostic per distinct bug however many blocks or schedules hit it.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from cake_core.diagnostics import codes
from cake_core.diagnostics.codes import Rule
from cake_core.diagnostics.model import Related
from cake_core.ir.kernel import Op, Value
from cake_core.ir.symbolic import SM_COUNT, BinExpr, Const, Dim, SymExpr, Var, apply_op
from cake_core.ir.types import BarrierType, NoneType, SmemType
from cake_core.ir.values import Predicate, ViewOrigin
from cake_core.sim.dtypes import STORAGE
from cake_core.sim.lanes import holds_thread0
from cake_core.sim.layout import SmemFault, SmemView
from cake_core.sim.races import VC, Access, Conflict
from cake_core.sim.runstate import SIM_SM_COUNT, BlockState, SimRun
from cake_core.sim.state import AsyncOp, Fragment, MBarrier, PipelineRT, Proc, TileRef
from cake_core.source import Span

if TYPE_CHECKING:
    from cake_core.sim.program import SimKernel


class SimUnsupported(Exception):
    """A construct the simulator cannot execute (reported as CK510).

    `span`, when given, is where to report it (a loop, which is no op)."""

    def __init__(self, message: str, span: Span | None = None) -> None:
        super().__init__(message)
        self.span = span


class GlobalFault(Exception):
    """A global access the hardware would not clip (reported as CK504)."""


_INIT = {1: (np.uint8, 0xFF), 2: (np.uint16, 0xFFFF), 4: (np.uint32, 0xFFFFFFFF),
         8: (np.uint64, 0xFFFFFFFFFFFFFFFF)}


class SimContext:
    """The facets' window on the simulation, bound to one process of one block."""

    def __init__(self, run: SimRun, block: BlockState, proc: Proc) -> None:
        self.run = run
        self.sk: SimKernel = run.sk
        self.block = block
        self.proc = proc
        self.op: Op | None = None
        self.iterations = 0
        """Loop iterations this process has run, against MAX_LOOP_ITERATIONS."""

    # -- evaluation ----------------------------------------------------------------------
    @property
    def env(self) -> dict[str, object]:
        return self.proc.env

    def eval_sym(self, e: SymExpr) -> int:
        if isinstance(e, Const):
            return e.value
        if isinstance(e, Var):
            v = self.proc.env.get(e.name)
            if not isinstance(v, int):
                raise SimUnsupported(f"the index `{e.name}` has no value here")
            return v
        if isinstance(e, Dim):
            v = self.run.dims.get(e.name)
            if v is None:  # `sm_count()` used only in the body: the simulator's own count
                if e.name != SM_COUNT:
                    raise SimUnsupported(f"the dim `{e.name}` has no value in this launch")
                return SIM_SM_COUNT
            return v
        if isinstance(e, BinExpr):
            a, b = self.eval_sym(e.left), self.eval_sym(e.right)
            if e.op in ("//", "%", "cdiv") and b == 0:
                raise SimUnsupported(f"division by zero in `{e}`")
            return apply_op(e.op, a, b)
        raise SimUnsupported(f"cannot evaluate `{e}`")

    def value(self, v: Value) -> object:
        """The runtime value of an IR value in this process, right now."""
        if v.sym is not None:
            return self.eval_sym(v.sym)
        t, c = v.type, v.const
        if isinstance(t, SmemType):
            return self.view_of(v)
        if isinstance(t, BarrierType):
            return self.barrier_of(v)
        if isinstance(c, Predicate):
            return self.predicate(c)
        if isinstance(c, tuple):
            return tuple(self.value(e) if isinstance(e, Value) else e for e in c)
        if c is not None:
            return c
        if isinstance(t, NoneType):
            return None
        return self.lookup(v.name)

    def lookup(self, name: str) -> object:
        env = self.proc.env
        seen = 0
        while name not in env:
            alias = self.sk.name_alias.get(name)
            if alias is not None and seen < 16:
                name, seen = alias, seen + 1
                continue
            if name.endswith(".T"):
                name = name[:-2]
                continue
            raise SimUnsupported(f"`{name}` has no value when this op runs")
        return env[name]

    def truth(self, v: Value) -> bool:
        return bool(self.value(v))

    def predicate(self, p: Predicate) -> bool:
        if p.op == "compare":
            ops, operands = p.chain
            vals = [self._operand_value(x) for x in operands]
            pairs = zip(ops, vals, vals[1:], strict=False)
            return all(_compare(str(o), a, b) for o, a, b in pairs)
        if p.op == "not":
            return not self._truthy(p.conditions[0])
        truths = [self._truthy(x) for x in p.conditions]
        return all(truths) if p.op == "and" else any(truths)

    def _operand_value(self, x: object) -> object:
        if isinstance(x, SymExpr):
            return self.eval_sym(x)
        if isinstance(x, Value):
            return self.value(x)
        return x

    def _truthy(self, x: object) -> bool:
        return bool(self._operand_value(x))

    def view_of(self, v: Value) -> SmemView:
        c = v.const
        if isinstance(c, ViewOrigin):
            base = self.view_of(c.base)
            idx = tuple(int(self.value(i)) for i in c.index)  # type: ignore[call-overload]
            view = base.index(idx)
        else:
            obj = self.lookup(v.name)
            if not isinstance(obj, SmemView):
                raise SimUnsupported(f"`{v.name}` is not a shared-memory view at run time")
            view = obj
        assert isinstance(v.type, SmemType)
        return view.retyped(v.type)

    def barrier_of(self, v: Value) -> list[MBarrier] | MBarrier:
        c = v.const
        if isinstance(c, ViewOrigin):
            arr = self.barrier_of(c.base)
            i = int(self.value(c.index[0]))  # type: ignore[call-overload]
            assert isinstance(arr, list)
            if not 0 <= i < len(arr):
                raise SmemFault(f"mbarrier index {i} is out of range for `{c.base.name}` "
                                f"(it holds {len(arr)})")
            return arr[i]
        obj = self.lookup(v.name)
        assert isinstance(obj, list | MBarrier)
        return obj

    # -- typed argument access -------------------------------------------------------------
    def arg(self, op: Op, name: str) -> object:
        return self.value(op.args[name])

    def int(self, op: Op, name: str) -> int:
        x = self.value(op.args[name])
        assert isinstance(x, int)
        return x

    def view(self, op: Op, name: str) -> SmemView:
        return self.view_of(op.args[name])

    def tile(self, op: Op, name: str) -> TileRef:
        t = self.value(op.args[name])
        assert isinstance(t, TileRef)
        return t

    def barrier(self, op: Op, name: str) -> MBarrier:
        b = self.value(op.args[name])
        if isinstance(b, list):
            if len(b) != 1:
                raise SimUnsupported(f"`{op.args[name].name}` holds {len(b)} mbarriers")
            return b[0]
        assert isinstance(b, MBarrier)
        return b

    def pipeline(self, op: Op, name: str) -> PipelineRT:
        p = self.value(op.args[name])
        assert isinstance(p, PipelineRT)
        return p

    def frag(self, op: Op, name: str, *, pending_ok: bool = False) -> Fragment:
        f = self.value(op.args[name])
        if not isinstance(f, Fragment):
            raise SimUnsupported(f"`{op.args[name].name}` is not a fragment at run time")
        if not pending_ok:
            self._check_read(op, name, f)
        return f

    def operand(self, op: Op, name: str) -> np.ndarray | float | builtins.int | bool:
        """A math operand: a fragment's array (checked ready) or a scalar."""
        x = self.value(op.args[name])
        if isinstance(x, Fragment):
            self._check_read(op, name, x)
            return x.array
        if isinstance(x, bool | int | float | np.ndarray | np.generic):
            return x  # type: ignore[return-value]
        raise SimUnsupported(f"`{op.args[name].name}` is not a number or fragment")

    def _check_read(self, op: Op, name: str, f: Fragment) -> None:
        """Report a read of registers that hold no defined value: wgmma groups still write
        them (CK506), or nothing has written them since `fill=None` (CK511)."""
        if f.pending:
            self._not_ready(op, name)
        if f.undefined:
            self._undefined(op, name)

    def _not_ready(self, op: Op, name: str) -> None:
        v = op.args[name]
        self.report(codes.SIM_ASYNC_RESULT_READ, op.arg_spans.get(name, op.span),
                    f"`{v.name}` is read while wgmma groups that write it are still in flight; "
                    "its registers hold no defined value until wgmma_wait retires them",
                    notes=["add `wgmma_wait(0)` (or a count that covers the groups writing it) "
                           "before this read"],
                    key=("CK506", id(op), name))

    def _undefined(self, op: Op, name: str) -> None:
        v = op.args[name]
        self.report(codes.SIM_UNFILLED_READ, op.arg_spans.get(name, op.span),
                    f"`{v.name}` is read before anything wrote it: it was declared with "
                    "`fill=None`, and its registers hold no defined value",
                    notes=["write it first with `wgmma(..., accumulate=False)`, or drop "
                           "`fill=None`"],
                    key=("CK511", id(op), name))

    # -- groups ----------------------------------------------------------------------------
    def group(self, op: Op) -> tuple[builtins.int, ...]:
        return self.sk.groups.get(op.role, self.sk.groups[None])

    def leader(self, op: Op) -> bool:
        """Whether this process issues the op's single-thread work (TMA, raw arrivals)."""
        g = self.group(op)
        return (not g or g[0] == self.proc.index) and holds_thread0(self.proc)

    @property
    def role_start(self) -> builtins.int:
        """The first warp of the process's role (0 outside roles)."""
        role = self.sk.kernel.roles.get(self.proc.role or "")
        return role.warp_start if role is not None else 0

    def share(self, op: Op, n_elems: builtins.int, itemsize: builtins.int
              ) -> np.ndarray | None:
        """This process's elements of a copy the op's whole group performs together.

        Thread t of the group copies the 16-byte chunks t, t + T, t + 2T, ... (T threads):
        the warps of one process get the chunks their threads own.  None: all of them.
        """
        g = self.group(op)
        if len(g) <= 1:
            return None
        warps = sorted(w for i in g for w in self.block.procs[i].warps)
        mine = np.isin(np.arange(len(warps)), [warps.index(w) for w in self.proc.warps])
        chunk = (np.arange(n_elems) * itemsize) // 16
        return mine[(chunk // 32) % len(warps)]

    # -- findings ------------------------------------------------------------------------
    def report(self, rule: Rule, span: Span, message: str, *,
               related: tuple[Related, ...] | list[Related] = (),
               notes: tuple[str, ...] | list[str] = (), data: dict[str, object] | None = None,
               key: tuple[object, ...] | None = None) -> None:
        where = f"{self.block.describe()}, schedule {self.run.schedule_name}"
        d = rule.at(span, message, related=related, notes=[*notes, f"seen in {where}"],
                    data={"block": list(self.block.coords), "schedule": self.run.schedule_name,
                          **(data or {})})
        self.run.findings.add(d, key)

    # -- actors ----------------------------------------------------------------------------
    def who(self, op: Op) -> str:
        return f"{self.proc.label} ({op.name})"

    # -- shared memory -------------------------------------------------------------------
    def smem_read(self, view: SmemView, op: Op, *, actor: AsyncOp | None = None,
                  proxy: str = "generic") -> np.ndarray:
        """The storage bits of `view` in its logical shape, after init and race checks."""
        fp = view.addresses()
        es = fp.itemsize
        itype, full = _INIT[es]
        bad = self.block.init.view(itype)[fp.elem_index] != full
        if bad.any():
            first = tuple(int(i) for i in np.argwhere(bad)[0])
            n = int(bad.sum())
            self.report(codes.SIM_UNINITIALIZED_READ, op.span,
                        f"reads {n} element{'s' if n != 1 else ''} of `{view.buffer.name}` that "
                        f"nothing has written (first: element {first} of "
                        f"{view.describe()})",
                        notes=["shared memory starts with garbage: the read sees whatever an "
                               "earlier kernel left there"],
                        data={"buffer": view.buffer.name, "elements": n},
                        key=("CK505", id(op)))
        self._record(view, fp, None, False, op, actor, proxy)
        return self.block.smem.view(STORAGE[view.dtype])[fp.elem_index]

    def smem_write(self, view: SmemView, bits: np.ndarray, op: Op, *,
                   actor: AsyncOp | None = None, proxy: str = "generic",
                   mask: np.ndarray | None = None) -> None:
        fp = view.addresses()
        mem = self.block.smem.view(STORAGE[view.dtype])
        itype, full = _INIT[fp.itemsize]
        init = self.block.init.view(itype)
        data = np.asarray(bits, dtype=STORAGE[view.dtype]).reshape(fp.elem_index.shape)
        if mask is None:
            mem[fp.elem_index] = data
            init[fp.elem_index] = full
        else:
            m = mask.reshape(fp.elem_index.shape)
            mem[fp.elem_index[m]] = data[m]
            init[fp.elem_index[m]] = full
        acc = self._record(view, fp, mask, True, op, actor, proxy)
        if actor is None and proxy == "generic":
            acc.threads = self.proc.lanes
            self.proc.unfenced.append(acc)

    def _record(self, view: SmemView, fp: object, mask: np.ndarray | None, write: bool,
                op: Op, actor: AsyncOp | None, proxy: str) -> Access:
        if actor is None:
            comp, vc, who = self.proc.comp, self.proc.vc, self.who(op)
        else:
            comp, vc, who = actor.comp, actor.vc, actor.who
        acc = Access(view.buffer, fp, None if mask is None else mask.ravel(),  # type: ignore[arg-type]
                     write, comp, vc[comp], op, who, proxy, issued=actor is not None)
        conflict = self.block.races.access(acc, vc)
        if conflict is not None:
            self._race(conflict)
        return acc

    def _race(self, c: Conflict) -> None:
        a, b = c.first, c.second
        if c.kind == "race" and b.issued and not a.issued:
            # report at the program's own access (the write into a bulk store's source, the
            # read of a stage a copy refills), whichever of the two this schedule ran first:
            # the finding then stays at one line across schedules, where the fix goes
            a, b = b, a
        rng = b.relative(c.lo, c.hi)
        if c.kind == "proxy":
            msg = (f"{b.who} reads bytes {rng} of `{b.buffer.name}` through the async proxy, "
                   f"but {a.who} wrote them with generic stores and no fence_proxy_async() "
                   "between")
            notes = ["TMA and wgmma read shared memory through the async proxy; generic "
                     "writes become visible to it only after `fence_proxy_async()` in the "
                     "writing threads, before the synchronisation that orders the read"]
        else:
            other = "" if a.buffer.name == b.buffer.name else \
                f" of `{a.buffer.name}`, placed on the same bytes,"
            msg = (f"data race on `{b.buffer.name}`: this {b.kind} of bytes "
                   f"{b.relative(b.lo, b.hi)} by {b.who} is not ordered with the {a.kind} of "
                   f"bytes {a.relative(a.lo, a.hi)}{other} by {a.who} (overlap {rng})")
            notes = ["nothing (barrier phase, pipeline wait/release, syncthreads, or a "
                     "cp_async/wgmma/tma_store wait) orders the two accesses, so another "
                     "interleaving reads or writes different data"]
        related = [Related(a.op.span, f"the conflicting {a.kind} by {a.who}")]
        roles = {a.op.role, b.op.role}
        key: tuple[object, ...] = ("CK501", id(a.op), id(b.op), c.kind)
        where = b.op.span
        extra: dict[str, object] = {}
        for p in self.block.procs:
            arr = p.unsynced_arrival
            if arr is not None and p.role in roles and c.kind == "race":
                # one bug, one finding, at the arrival: every buffer the early release hands
                # over races, and which refill is seen first depends on the schedule
                msg = (f"data race on `{b.buffer.name}`: one elected thread of {p.label} "
                       f"arrives here before the role's warps have met, so the {b.kind} by "
                       f"{b.who} is not ordered with the {a.kind} by {a.who} (overlap {rng})")
                related = [Related(b.op.span, f"the {b.kind} by {b.who}"),
                           Related(a.op.span, f"the conflicting {a.kind} by {a.who}")]
                notes.append("the warps of a role do not run in lockstep: an elected arrival "
                             "orders only its own warp's accesses (CK313)")
                key, where = ("CK501-arrival", id(arr)), arr.span
                extra["elected_arrival"] = True
                break
        self.report(codes.SIM_DATA_RACE, where, msg,
                    related=related,
                    notes=notes,
                    data={"buffer": b.buffer.name, "bytes": [c.lo - b.buffer.offset,
                                                             c.hi - b.buffer.offset],
                          "first": {"kind": a.kind, "bytes": [a.lo - a.buffer.offset,
                                                              a.hi - a.buffer.offset]},
                          "second": {"kind": b.kind, "bytes": [b.lo - b.buffer.offset,
                                                               b.hi - b.buffer.offset]},
                          **extra},
                    key=key)

    # -- global memory ------------------------------------------------------------------
    def global_read(self, tile: TileRef, op: Op, *, signed: bool = False) -> np.ndarray:
        """The tile's storage bits, zero-filled where it leaves the tensor.

        `signed`: negative coordinates are legal and zero-filled (TMA); otherwise they are
        an out-of-bounds access the lowering's address arithmetic would not catch."""
        t = tile.tensor
        out = np.zeros(tile.shape, dtype=t.data.dtype)
        src, dst = self._clip(tile, op, signed)
        if src is not None:
            out[dst] = t.data[src]
        return out

    def global_write(self, tile: TileRef, bits: np.ndarray, op: Op) -> None:
        t = tile.tensor
        data = np.asarray(bits, dtype=t.data.dtype).reshape(tile.shape)
        src, dst = self._clip(tile, op, False)
        if src is None:
            return
        t.track_writes()
        assert t.owner is not None and t.writer is not None
        owners = t.owner[src]
        clash = (owners >= 0) & (owners != self.block.linear)
        if clash.any():
            other = int(owners[clash].flat[0])
            self.report(codes.SIM_DATA_RACE, op.span,
                        f"blocks write overlapping parts of `{t.name}`: {self.block.describe()} "
                        f"writes {tile.describe()}, which block #{other} also wrote; blocks "
                        "run in any order, so the result depends on which finishes last",
                        data={"tensor": t.name}, key=("CK501-global", id(op)))
        t.data[src] = data[dst]
        t.owner[src] = self.block.linear
        t.writer[src] = self.sk.op_index.get(id(op), -1)

    def _clip(self, tile: TileRef, op: Op, signed: bool
              ) -> tuple[tuple[slice, ...] | None, tuple[slice, ...]]:
        t = tile.tensor
        src: list[slice] = []
        dst: list[slice] = []
        for o, n, ext in zip(tile.origin, tile.shape, tile.bounds, strict=True):
            if o < 0 and not signed:
                raise GlobalFault(f"tile {tile.describe()} starts at a negative coordinate of "
                                  f"`{t.name}`")
            lo, hi = max(o, 0), min(o + n, ext)
            if lo >= hi:
                return None, ()
            src.append(slice(lo, hi))
            dst.append(slice(lo - o, hi - o))
        return tuple(src), tuple(dst)

    # -- asynchronous work ---------------------------------------------------------------
    def issue(self, kind: str, channel: tuple[object, ...], op: Op,
              complete: Callable[[AsyncOp], None]) -> AsyncOp:
        """Start an asynchronous operation; the scheduler calls `complete` later."""
        key = (self.proc.index, *channel)
        comp = self.block.component(key)
        n = self.block.counters.get(comp, 0) + 1
        self.block.counters[comp] = n
        vc: VC = dict(self.proc.vc)
        vc[comp] = n
        if kind == "cp.async" or (kind == "wgmma" and len(self.proc.warps) > 4):
            # work of each warp (warpgroup), which one elected arrival does not cover
            self.proc.crew.add(comp)
        a = AsyncOp(kind, key, self.proc, op, vc, comp, complete,
                    f"the {kind} issued by {self.proc.label}")
        self.block.async_ops.append(a)
        self.block.issued += 1
        # the issuer's later accesses are not ordered before the operation's own (a
        # store's source overwritten before tma_store_wait races with the store)
        self.proc.tick()
        return a


def _compare(op: str, a: object, b: object) -> bool:
    x, y = a, b
    if op == "<":
        return x < y  # type: ignore[operator]
    if op == "<=":
        return x <= y  # type: ignore[operator]
    if op == ">":
        return x > y  # type: ignore[operator]
    if op == ">=":
        return x >= y  # type: ignore[operator]
    if op == "==":
        return x == y
    if op == "!=":
        return x != y
    raise SimUnsupported(f"comparison `{op}`")
