"""One @kernel function -> its IR: statements, loops, branches, roles and the kernel scope.

The `KernelBuilder` walks a kernel's body once, emitting ops through its `Evaluator` and
nodes (loops, branches, roles) itself; it is the `KernelScope` a type rule sees.  The
program around it (top-level constants and dims, the list of kernels) is `builder`'s.
"""

from __future__ import annotations

from cake_core.diagnostics import codes
from cake_core.diagnostics.model import Applicability, Diagnostic, Fix, Related, TextEdit
from cake_core.elab.expressions import Evaluator
from cake_core.elab.kernel_checks import check_pipelines, check_unused, name_span
from cake_core.elab.scope import int_value
from cake_core.elab.signature import parse_decorator, parse_param
from cake_core.elab.state import ProgramState
from cake_core.hardware import ArchSpec
from cake_core.ir.kernel import ForOp, IfOp, Kernel, Node, Op, Param, Role, SmemAlloc, Value
from cake_core.ir.symbolic import Const, Var
from cake_core.ir.types import (
    BarrierType,
    DType,
    ErrorType,
    FragmentType,
    IntType,
    PipelineType,
    ScalarType,
    SmemType,
    TupleType,
    numel,
)
from cake_core.ir.values import ViewOrigin, constant_truth, range_bounds, role_spec
from cake_core.primitives.traits import Trait
from cake_core.source import Span
from cake_core.syntax import ast

#: Alignment (bytes) of a shared-memory buffer by swizzle span: the swizzle atom.
SWIZZLE_ALIGN = {0: 16, 32: 256, 64: 512, 128: 1024}
_UNIQUE_KINDS = (SmemType, PipelineType, BarrierType)


class KernelBuilder:
    """Builds one @kernel function; implements the `KernelScope` protocol for type rules."""

    def __init__(self, pb: ProgramState, fn: ast.FunctionDef) -> None:
        self.pb = pb
        self.fn = fn
        self.registry = pb.registry
        self.diags = pb.diags
        self.scope: dict[str, Value] = {}
        self.role: Role | None = None
        self.blocks: list[list[Node]] = []
        self.loops: list[ForOp] = []
        self.elected: IfOp | None = None  # the `with elect_one():` block being built
        self.loop_defs: list[set[str]] = []
        self.loop_asts: list[ast.For] = []  # the loops being built, innermost last (CK332)
        self.kernel: Kernel | None = None
        self.arch: ArchSpec | None = None
        self.pipelines: dict[str, Span] = {}
        self.tried_roles: set[str] = set()  # role names declared, even if the role was bad
        self.used: dict[int, Value] = {}
        """Values read so far, by identity.  The dict holds them: an id alone would outlive
        a value that died (a discarded temporary) and then stand for a new one."""
        self.first_diag = len(pb.diags)
        """Where this kernel's findings start in the program's list (see `check_pipelines`)."""
        self.defs: dict[str, tuple[Value, ast.Stmt]] = {}
        self.ev = Evaluator(pb, kernel=self)

    def release(self) -> None:
        """Break the builder <-> evaluator cycle once the kernel is built.

        Without it every check leaves its whole AST and IR to the cycle collector: memory
        grows between collections and each full collection pauses a long-lived server.
        """
        self.ev.k = None

    # -- KernelScope ------------------------------------------------------------------
    def add_smem(self, name: str, ty: SmemType, span: Span, offset: int | None = None,
                 offset_span: Span | None = None) -> None:
        assert self.kernel is not None
        shape = tuple([d.const or 0 for d in ty.shape])
        n = numel(ty.shape) or 0
        if ty.layout.pad:
            rows = n // max(1, shape[-1])
            n = rows * (shape[-1] + ty.layout.pad)
        align = SWIZZLE_ALIGN.get(ty.layout.swizzle, 16)
        self.kernel.smem.append(SmemAlloc(name, ty.dtype, shape, ty.layout, n * ty.dtype.bytes,
                                          align, span, "buffer", offset, offset_span))

    def add_barriers(self, name: str, count: int, span: Span) -> None:
        assert self.kernel is not None
        self.kernel.smem.append(SmemAlloc(name, None, (count,), None, 8 * count, 8, span,
                                          kind="barrier"))

    def declare_pipeline(self, name: str, span: Span) -> None:
        self.pipelines[name] = span

    # -- building ------------------------------------------------------------------------
    def build(self) -> Kernel | None:
        fn = self.fn
        deco = parse_decorator(self)
        if deco is None:
            return None
        arch_name, arch_span, grid, warps, warps_span, cluster = deco
        self.arch = self.pb.arch_spec(arch_name) if arch_name else None
        assert self.arch is not None
        k = Kernel(fn.name, self.arch.name, grid, warps, cluster, [], [], fn.span, fn.name_span,
                   fn.decorators[0].span, self.pb.declared_dims(), arch_span=arch_span,
                   warps_span=warps_span)
        self.kernel = k
        for p in fn.params:
            v = parse_param(self, p)
            if v is not None:
                k.params.append(Param(p.name, v, p.span))
                self.define(p.name, v, None)
            else:  # already reported; bound so that its uses stay quiet
                self.define(p.name, Value(p.name, ErrorType(), p.name_span), None)
        self.blocks.append(k.body)
        self._stmts(fn.body)
        self.blocks.pop()
        check_pipelines(k, self.scope, self.pipelines, self.tried_roles, self.diags,
                        self.first_diag)
        check_unused(self.defs, self.used, self.pb.source, self.diags)
        k.values = {**{n: v for n, (v, _) in self.defs.items()}}
        return k

    # -- statements ----------------------------------------------------------------------
    @property
    def block(self) -> list[Node]:
        return self.blocks[-1]

    def emit(self, node: Node) -> None:
        self.blocks[-1].append(node)

    def _stmts(self, stmts: tuple[ast.Stmt, ...]) -> None:
        for s in stmts:
            self._stmt(s)

    def _stmt(self, s: ast.Stmt) -> None:
        if isinstance(s, ast.Assign):
            flat = _target_names(s.targets[0]) if len(s.targets) == 1 else ()
            value = self.ev.expr(s.value, targets=flat)
            self._check_carried_alias(s, value)
            for t in s.targets:
                self.ev.bind(t, value, scope=self.scope, stmt=s)
        elif isinstance(s, ast.AugAssign):
            value = self.ev.binop(s.op, s.target, s.value, s.span)
            self.ev.bind(s.target, value, scope=self.scope, stmt=s)
        elif isinstance(s, ast.ExprStmt):
            if isinstance(s.value, ast.Constant) and isinstance(s.value.value, str):
                return
            if not isinstance(s.value, ast.Call):
                self.diags.append(codes.UNSUPPORTED_SYNTAX.at(
                    s.span, "this expression has no effect"))
                return
            self.ev.expr(s.value)
        elif isinstance(s, ast.For):
            self._for(s)
        elif isinstance(s, ast.If):
            self._if(s)
        elif isinstance(s, ast.With):
            self._with(s)
        elif isinstance(s, ast.Pass):
            return
        elif isinstance(s, ast.Return):
            if s.value is not None:
                self.diags.append(codes.BAD_KERNEL_SIGNATURE.at(
                    s.span, "kernels return nothing: write results with store() or tma_store()"))
            elif s is not self.fn.body[-1]:  # a bare `return` that would end the kernel early
                self.diags.append(codes.UNSUPPORTED_SYNTAX.at(
                    s.span, "a kernel has no early exit: every role runs to its end so that "
                    "pipelines stay balanced; guard the remaining work with an `if` instead"))
        else:
            self.diags.append(codes.UNSUPPORTED_SYNTAX.at(
                s.span, f"`{type(s).__name__}` is not allowed inside a kernel"))

    def _for(self, s: ast.For) -> None:
        it = s.iter
        rng = None
        if not (isinstance(it, ast.Call) and isinstance(it.func, ast.Name)
                and it.func.id == "range"):
            self.diags.append(codes.UNSUPPORTED_SYNTAX.at(
                it.span, "loops run over range(...): `for k in range(cdiv(K, BK)):`"))
        else:
            rng = self.ev.expr(it)
            if isinstance(rng.type, ErrorType):
                rng = None
        if rng is not None and not isinstance(s.target, ast.Name):
            self.diags.append(codes.UNSUPPORTED_SYNTAX.at(
                s.target.span, "a loop variable is a single name"))
            rng = None
        if rng is None:  # the header failed: still check the body, but emit nothing
            self.ev.bind(s.target, Value("<error>", ErrorType(), s.target.span),
                         scope=self.scope, stmt=s)
            self._detached(s.body, loop=ForOp(Value("<error>", ErrorType(), s.target.span),
                                              Const(0), Const(0), Const(1), [], s.span))
            return
        assert isinstance(s.target, ast.Name)
        start, stop, step = range_bounds(rng)
        var = Var(s.target.id, start, stop)
        v = int_value(var, s.target.span, s.target.id)
        loop = ForOp(v, start, stop, step, [], s.span, self.role.name if self.role else None)
        self.emit(loop)
        self.define(s.target.id, v, s)
        self.blocks.append(loop.body)
        self.loops.append(loop)
        self.loop_defs.append(set())
        self.loop_asts.append(s)
        self._stmts(s.body)
        self.loop_asts.pop()
        self.loop_defs.pop()
        self.loops.pop()
        self.blocks.pop()

    def _check_carried_alias(self, s: ast.Assign, value: Value) -> None:
        """CK332: `m = mn` inside a loop, `m` a fragment from before the loop and read in it.

        A bare name on the right makes `m` another name for `mn`'s registers; no operation
        writes `m`'s own, so the next iteration reads the value `m` had before the loop.
        Only an operation whose result is named `m` carries the update.
        """
        if not self.loop_asts or len(s.targets) != 1:
            return
        target, src = s.targets[0], s.value
        if not (isinstance(target, ast.Name) and isinstance(src, ast.Name)) or \
                target.id == src.id:
            return
        name = target.id
        old = self.scope.get(name)
        if old is None or not isinstance(old.type, FragmentType) or \
                not isinstance(value.type, FragmentType) or \
                any(name in d for d in self.loop_defs):
            return
        loop = self.loop_asts[-1]
        written = {id(t) for st in loop.body for n in ast.walk(st)
                   if isinstance(n, ast.Assign) for t in n.targets}
        if not any(isinstance(n, ast.Name) and n.id == name and id(n) not in written
                   for st in loop.body for n in ast.walk(st)):
            return  # only read after the loop: the last iteration's value is what is meant
        self.diags.append(codes.CARRIED_ALIAS.at(
            s.span, f"`{name} = {src.id}` only renames `{src.id}`: no operation writes "
            f"`{name}`, so the next iteration of this loop still reads the `{name}` from "
            f"before it; compute the update with an operation whose result is `{name}` "
            f"(e.g. `{name} = maximum({name}, ...)`, `{name} = {src.id} + 0.0`)",
            related=[Related(old.span, f"`{name}` is defined before the loop here")]))

    def _detached(self, stmts: tuple[ast.Stmt, ...], *, loop: ForOp | None = None,
                  outside_role: bool = False) -> None:
        """Check a body whose header already failed, without emitting its ops.

        Skipping it would hide independent mistakes inside it and turn every buffer it
        uses into a "never used" warning: one bug must stay one finding.
        """
        role = self.role
        if outside_role:
            self.role = None
        self.blocks.append([])
        if loop is not None:
            self.loops.append(loop)
            self.loop_defs.append(set())
        self._stmts(stmts)
        if loop is not None:
            self.loop_defs.pop()
            self.loops.pop()
        self.blocks.pop()
        self.role = role

    def _if(self, s: ast.If) -> None:
        cond = self.ev.expr(s.test)
        if isinstance(cond.type, ErrorType):
            self._detached(s.body)
            self._detached(s.orelse)
            return
        known = constant_truth(cond)
        if known is not None:  # compile-time branch: only the taken side exists
            self._stmts(s.body if known else s.orelse)
            return
        if not (isinstance(cond.type, ScalarType) and cond.type.dtype == DType.BOOL) and \
                not isinstance(cond.type, IntType):
            self.diags.append(codes.TYPE_MISMATCH.at(
                s.test.span, f"an `if` tests an int comparison, not {cond.type.describe()}; "
                "use where() for per-element choices"))
            self._detached(s.body)
            self._detached(s.orelse)
            return
        node = IfOp(cond, [], [], s.span, self.role.name if self.role else None)
        self.emit(node)
        self.blocks.append(node.then)
        self._stmts(s.body)
        self.blocks.pop()
        self.blocks.append(node.orelse)
        self._stmts(s.orelse)
        self.blocks.pop()

    def _with(self, s: ast.With) -> None:
        assert self.kernel is not None
        if len(s.items) == 1 and isinstance(s.items[0].context, ast.Call) and \
                isinstance(s.items[0].context.func, ast.Name) and \
                s.items[0].context.func.id == "elect_one":
            self._elect_one(s, s.items[0].context)
            return
        if len(s.items) != 1 or not isinstance(s.items[0].context, ast.Call) or \
                not isinstance(s.items[0].context.func, ast.Name) or \
                s.items[0].context.func.id != "role":
            self.diags.append(codes.UNSUPPORTED_SYNTAX.at(
                s.items[0].span if s.items else s.span,
                "`with` introduces a warp role (`with role(\"load\", warps=range(0, 4)):`) "
                "or a one-thread block (`with elect_one():`)"))
            self._detached(s.body)
            return
        call = s.items[0].context
        assert isinstance(call, ast.Call)
        if call.args and isinstance(call.args[0], ast.Constant) and \
                isinstance(call.args[0].value, str):
            self.tried_roles.add(call.args[0].value)
        if self.role is not None:
            self.diags.append(codes.BAD_ROLE.at(
                call.span, f"roles do not nest: this is inside role {self.role.name!r}",
                related=[Related(self.role.span, "the enclosing role")]))
            self._detached(s.body, outside_role=True)
            return
        if self.loops:
            self.diags.append(codes.BAD_ROLE.at(call.span, "a role must be declared at the "
                                                "kernel's top level, not inside a loop"))
            self._detached(s.body, outside_role=True)
            return
        rv = self.ev.expr(call)
        if isinstance(rv.type, ErrorType):
            self._detached(s.body, outside_role=True)
            return
        name, w0, w1, regs = role_spec(rv)
        role = Role(name, w0, w1, regs, [], s.span, call.args[0].span if call.args else call.span)
        problem = self._role_problem(role, call)
        if problem is not None:
            self.diags.append(problem)
            self._detached(s.body, outside_role=True)
            return
        self.kernel.roles[name] = role
        self.emit(role)
        self.role = role
        self.blocks.append(role.body)
        self._stmts(s.body)
        self.blocks.pop()
        self.role = None

    def _elect_one(self, s: ast.With, call: ast.Call) -> None:
        """`with elect_one():` -- an `if` on the role's thread 0, marked so that each analysis
        knows its body runs in that one fixed thread (the one that issues the role's TMA)."""
        if call.args or call.keywords:
            self.diags.append(codes.BAD_ARGUMENTS.at(call.span, "`elect_one()` takes no "
                                                    "arguments: it runs its block in the "
                                                    "role's thread 0"))
        if self.elected is not None:
            self.diags.append(codes.BAD_ROLE.at(
                call.span, "`elect_one()` blocks do not nest: this one is already inside one",
                related=[Related(self.elected.span, "the enclosing `elect_one()` block")]))
            self._detached(s.body)
            return
        sp = call.span
        zero = ast.Constant(sp, 0)
        test = ast.BoolOp(sp, "and", tuple(
            ast.Compare(sp, ("==",), (ast.Attribute(sp, ast.Name(sp, base), name, sp), zero))
            for base, name in (("warp", "rank"), ("lane", "id"))))
        cond = self.ev.expr(test)
        node = IfOp(cond, [], [], s.span, self.role.name if self.role else None, elected=True)
        self.emit(node)
        self.elected = node
        self.blocks.append(node.then)
        self._stmts(s.body)
        self.blocks.pop()
        self.elected = None

    def _role_problem(self, role: Role, call: ast.Call) -> Diagnostic | None:
        """Why a well-formed role cannot join the kernel (twice, too many warps, overlap)."""
        k = self.kernel
        assert k is not None
        name, w0, w1 = role.name, role.warp_start, role.warp_stop
        if name in k.roles:
            return codes.BAD_ROLE.at(
                role.name_span, f"role {name!r} is declared twice",
                related=[Related(k.roles[name].name_span, "first declared here")])
        if w1 > k.warps:
            fixes = []
            if k.warps_span is not None:
                fixes.append(Fix(f"set warps={w1}", (TextEdit(k.warps_span, str(w1)),),
                                 Applicability.UNSAFE))
            return codes.BAD_ROLE.at(
                _warps_span(call), f"role {name!r} uses warps {w0}..{w1 - 1} but the kernel has "
                f"{k.warps} warps", fixes=fixes)
        for other in k.roles.values():
            if w0 < other.warp_stop and other.warp_start < w1:
                return codes.BAD_ROLE.at(
                    _warps_span(call), f"role {name!r} (warps {w0}..{w1 - 1}) overlaps role "
                    f"{other.name!r} (warps {other.warp_start}..{other.warp_stop - 1})",
                    related=[Related(other.name_span, f"role {other.name!r}")])
        return None

    # -- bookkeeping ---------------------------------------------------------------------
    def define(self, name: str, v: Value, stmt: ast.Stmt | None) -> None:
        """Bind a name in the kernel scope, checking what may be re-bound."""
        old = self.scope.get(name)
        if old is not None and isinstance(old.type, _UNIQUE_KINDS):
            self.diags.append(codes.REDEFINITION.at(
                name_span(stmt, name, v.span),
                f"`{name}` already names {old.type.describe()}; buffers, pipelines and "
                "barriers are defined once", related=[Related(old.span, "defined here")]))
            self.scope[name] = v  # later lines mean the new definition: check them against it
            return
        if old is not None and isinstance(old.type, FragmentType) and \
                isinstance(v.type, FragmentType) and old.type != v.type and \
                any(name not in d for d in self.loop_defs) and self.loops:
            self.diags.append(codes.TYPE_MISMATCH.at(
                v.span, f"`{name}` is {old.type.describe()} before the loop but "
                f"{v.type.describe()} here; a loop-carried fragment keeps its type",
                related=[Related(old.span, "first defined here")]))
            self.scope[name] = Value(name, ErrorType(), v.span)  # its later uses stay quiet
            return
        if old is None and self.loop_defs:
            self.loop_defs[-1].add(name)
        self.scope[name] = v
        if stmt is not None and not isinstance(v.type, ErrorType):
            self.defs[name] = (v, stmt)

    def note_use(self, v: Value) -> None:
        used = self.used
        used[id(v)] = v
        const = v.const
        if const is None:  # most values: nothing inside them to mark
            return
        if isinstance(const, tuple) and isinstance(v.type, TupleType):
            for e in const:
                if isinstance(e, Value):
                    used[id(e)] = e
        elif isinstance(const, ViewOrigin):
            self.note_use(const.base)

    def new_op(self, op: Op) -> None:
        if not self.blocks:
            # evaluated outside any body: a parameter's extents (`Tensor[f32, (div(N, 2),)]`).
            # Nothing runs there, so the op is not emitted; the signature reports the
            # extent that is not a constant or a dim() size.
            return
        op.role = self.role.name if self.role else None
        if self.elected is not None and not runs_in_one_thread(op):
            self.diags.append(codes.BAD_ROLE.at(
                op.span, f"`{op.prim.name}` is performed by every thread (or warp) of "
                f"{'role ' + repr(op.role) if op.role else 'the block'} together, but inside "
                "`elect_one()` only the role's thread 0 runs: move it out of the block",
                related=[Related(self.elected.span, "the `elect_one()` block")]))
        self.blocks[-1].append(op)


def runs_in_one_thread(op: Op) -> bool:
    """Whether one thread can perform the op alone (inside `elect_one()`).

    One-thread ops (TMA copies and their waits, elected arrivals, the proxy fence), views
    and tiles (addresses only), and the per-thread waits and commits.  Not: anything spread
    over the role's threads (fragments, cp.async chunks, wgmma), barriers every thread or
    warp meets, arrivals made per warp or per thread, and pipeline steps, which count one
    arrival per warp."""
    t, e = op.prim.traits, op.prim.effects
    if e.pipe_action is not None:
        return False
    if Trait.SMEM_VIEW in t or Trait.GLOBAL_TILE in t:
        return True
    if Trait.SINGLE_THREAD in t:
        per = op.args.get(e.arrive_scope) if e.arrive_scope is not None else None
        return per is None or per.const in (None, "role")
    return e.fence == "cp_async_commit" or (e.waits is not None and e.waits in ("cp_async", "self"))


def _warps_span(call: ast.Call) -> Span:
    """Where a `role(...)` call gives its warps: findings about them point there."""
    return next((kw.value.span for kw in call.keywords if kw.name == "warps"), call.span)


def _target_names(t: ast.Expr) -> tuple[str, ...]:
    if isinstance(t, ast.Name):
        return (t.id,)
    if isinstance(t, ast.Tuple):
        return tuple(e.id if isinstance(e, ast.Name) else "" for e in t.elts)
    return ()
