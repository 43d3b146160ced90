"""Lowering one verified kernel to a CUDA `__global__` function.

Layout of the generated function:

1. the signature: tensors (`__restrict__` pointers) and scalars (by value) in declaration
   order, then the dims as `int`, then one `const __grid_constant__ CUtensorMap` per
   (tensor, box, swizzle) TMA uses;
2. the prologue: `CAKE_DYNAMIC_SMEM(smem)` (the dynamic `extern __shared__` array), one `constexpr`
   byte offset per allocation from the verifier's smem plan, warp and lane indices;
3. the body in program order; each role is one `if` on the warp index, which first sets
   its register budget (in a kernel with `regs=`, every warpgroup role runs one setmaxnreg:
   `.inc` to a count above the launch ceiling, `.dec` otherwise, and a role without `regs=`
   states the launch allocation it keeps), names its warps and threads, and declares its
   pipeline cursors.  A role whose ops are all one-thread ops runs inside `if (leader)`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from cake_core.elab.bindings import bindings_of
from cake_core.hardware import ArchSpec
from cake_core.ir.kernel import ForOp, IfOp, Kernel, Node, Op, Role, Value, walk_nodes
from cake_core.ir.symbolic import SM_COUNT, Dim, SymExpr
from cake_core.ir.types import (
    BarrierType,
    FragmentType,
    PipelineType,
    ScalarType,
    StageType,
    TensorType,
    TupleType,
)
from cake_core.lower.context import (
    CTYPE,
    FIXED_NAMES,
    FragVar,
    LowerContext,
    TensorInfo,
)
from cake_core.lower.emitter import Emitter, Names, c_identifier
from cake_core.lower.plan import Group, KernelPlan, LowerError, build_plan
from cake_core.primitives.facets import FacetError, Unsupported
from cake_core.primitives.traits import Trait
from cake_core.source import SourceFile
from cake_core.syntax import ast
from cake_core.verify.registers import allocated, launch_registers, register_budget
from cake_core.verify.smem_plan import smem_plan
from cake_core.verify.views import ViewTracer

_STAGE = StageType("", 0, "")


@dataclass
class KernelCode:
    kernel: Kernel
    entry: str
    emitter: Emitter
    ctx: LowerContext
    plan: KernelPlan
    smem_bytes: int
    smem_const: str
    dim_order: list[str]
    """The dims the launcher takes, in order: the kernel's, less `sm_count`, which the
    launcher asks the device for (the kernel function itself takes them all)."""
    launch_regs: int | None
    """Registers per thread at launch when a role sets its own (setmaxnreg), else None."""
    kernel_dims: list[str]
    """The dims the kernel function takes, in order (`sm_count` included)."""


def launch_ceiling(threads: int, arch: ArchSpec) -> int:
    """Registers per thread `__launch_bounds__(threads, 1)` allows (allocation unit 8)."""
    return launch_registers(threads, arch)


def launch_regs(k: Kernel, arch: ArchSpec) -> int | None:
    """The per-thread registers every warp starts with when a role declares `regs=`.

    It is the launch ceiling whatever the roles declare, as the verifier's register budget
    (`verify/registers.py`) has it: a role with `regs=` moves to its own count from there, a
    role without one keeps the ceiling, and the roles' setmaxnregs hold ptxas to it
    (`_Writer._setmaxnreg`).  A declared count is no launch count: taking the smallest one
    left the other roles unaccounted for, and ptxas allocating something else.  None
    without any `regs=`: ptxas then chooses the count.
    """
    budget = register_budget(k, arch)
    return budget.launch_regs if budget.uses_setmaxnreg else None


def _dims_of(k: Kernel) -> list[str]:
    seen: dict[str, Dim] = {}

    def visit(x: object, depth: int = 0) -> None:
        if depth > 24:
            return
        if isinstance(x, SymExpr):
            for a in x.atoms():
                if isinstance(a, Dim):
                    seen.setdefault(a.name, a)
        elif isinstance(x, Value):
            if x.sym is not None:
                visit(x.sym, depth + 1)
            if isinstance(x.type, TensorType):
                for e in x.type.shape:
                    visit(e, depth + 1)
            if isinstance(x.type, TupleType) and isinstance(x.const, tuple):
                for e in x.const:
                    visit(e, depth + 1)
        elif isinstance(x, tuple | list):
            for e in x:
                visit(e, depth + 1)

    for p in k.params:
        visit(p.value)
    visit(k.grid)
    for n in k.walk():
        if isinstance(n, ForOp):
            visit((n.start, n.stop, n.step))  # a step may be a launch-time size too
        elif isinstance(n, Op):
            visit(tuple(n.args.values()))
    declared = [d for d in k.dims if d in seen]
    return declared + [d for d in seen if d not in declared]


def _user_names(k: Kernel, plan: KernelPlan) -> set[str]:
    out: set[str] = set(k.values) | {p.name for p in k.params} | set(plan.slot_names.values())
    for n in k.walk():
        if isinstance(n, ForOp):
            out.add(n.var.name)
        elif isinstance(n, Op):
            out.update(r.name for r in n.results)
            out.update(v.name for v in n.args.values())
    return {c_identifier(x) for x in out} | out


def lower_kernel(kernel: Kernel, source: SourceFile, module: ast.Module | None,
                 arch: ArchSpec) -> KernelCode:
    plan = build_plan(kernel, bindings_of(kernel, module))
    smem = smem_plan(kernel, arch)
    tracer = ViewTracer(kernel)
    dims = _dims_of(kernel)
    names = Names(_user_names(kernel, plan) | set(dims) | FIXED_NAMES)
    ctx = LowerContext(kernel, arch, plan, smem, tracer, names)
    for d in dims:
        ctx.dims[d] = c_identifier(d, FIXED_NAMES)
    for p in kernel.params:
        t = p.value.type
        if isinstance(t, TensorType):
            ctx.tensors[p.name] = TensorInfo(p.name, c_identifier(p.name, FIXED_NAMES), t.dtype,
                                             t.shape)
        elif isinstance(t, ScalarType):
            ctx.scalars[p.name] = c_identifier(p.name, FIXED_NAMES)
    for pl in smem.placements:
        ctx.smem_names[pl.name] = names.internal(f"SMEM_{c_identifier(pl.name).upper()}_OFFSET")
    for op in kernel.ops():
        for r in op.results:
            if op.prim.has(Trait.ALLOCATES_BARRIER) and isinstance(r.type, BarrierType):
                ctx.barrier_names[r.type.name] = c_identifier(r.type.name, FIXED_NAMES)
            if isinstance(r.type, PipelineType):
                base = c_identifier(r.type.name)
                ctx.pipe_names[r.type.name] = {
                    side: names.internal(f"{base}_{side}")
                    for side in ("full", "empty", "acquire", "commit", "wait", "release")}
    em = Emitter(source.path)
    entry = c_identifier(kernel.name)
    smem_const = names.internal(f"CAKE_SMEM_BYTES_{entry}")
    launch = launch_regs(kernel, arch)
    w = _Writer(ctx, em, source)
    w.kernel(entry, dims, smem.total)
    return KernelCode(kernel, entry, em, ctx, plan, smem.total, smem_const,
                      [d for d in dims if d != SM_COUNT], launch, dims)


class _Writer:
    def __init__(self, ctx: LowerContext, em: Emitter, source: SourceFile) -> None:
        self.ctx = ctx
        self.em = em
        self.source = source
        self.pending_pipes: Op | None = None
        self.fenced = False
        self.top_used: set[str] = set()
        """Identifiers in code that runs outside every role."""

    # -- the function ------------------------------------------------------------------------
    def kernel(self, entry: str, dims: list[str], smem_total: int) -> None:
        ctx, em, k = self.ctx, self.em, self.ctx.kernel
        em.at(k.decorator_span.start.line)
        written = self._written()
        params: list[str] = []
        for p in k.params:
            t = p.value.type
            if isinstance(t, TensorType):
                info = ctx.tensors[p.name]
                const = "" if p.name in written else "const "
                params.append(f"{const}{CTYPE[t.dtype]}* __restrict__ {info.cname}")
            elif isinstance(t, ScalarType):
                params.append(f"{CTYPE[t.dtype]} {ctx.scalars[p.name]}")
        params.extend(f"int {ctx.dims[d]}" for d in dims)
        body_start = em.mark()
        em.depth = 1
        ctx.group = ctx.plan.groups[None]
        ctx.push()
        self.nodes(k.body)
        ctx.pop()
        body_text = em.text_since(body_start)
        em.depth = 1
        pro = self._prologue(body_text)
        em.insert(body_start, pro, None)
        em.depth = 0
        for spec in ctx.tmaps:
            params.append(f"const __grid_constant__ CUtensorMap {spec.cname}")
        threads = k.threads
        cluster = ""
        if len(k.cluster) > 1 or k.cluster[0] != 1:
            c = (*k.cluster, 1, 1)[:3]
            cluster = f" __cluster_dims__({c[0]}, {c[1]}, {c[2]})"
        em.insert(body_start, f"{entry}(" + ",\n    ".join(params) + ") {", None)
        em.insert(body_start, f'extern "C" __global__ void __launch_bounds__({threads}, 1)'
                  f"{cluster}", k.name_span.start.line)
        em.emit("}", None)
        del smem_total

    def _written(self) -> set[str]:
        out = set()
        for op in self.ctx.kernel.ops():
            if op.prim.has(Trait.GLOBAL_STORE):
                t = op.args["dst"].type
                name = getattr(t, "tensor", None)
                if name:
                    out.add(name)
        return out

    def _prologue(self, body: str) -> str:
        ctx = self.ctx
        used = _idents(body)
        lines = []
        if ctx.smem.placements:
            lines.append("CAKE_DYNAMIC_SMEM(smem);  // extern __shared__ __align__(1024) uint8_t "
                         "smem[]")
            for pl in ctx.smem.placements:
                name = ctx.smem_names[pl.name]
                if name in used:
                    lines.append(f"constexpr uint32_t {name} = {pl.offset};  "
                                 f"// `{pl.name}`: {pl.nbytes} B, {pl.layout}")
                else:
                    lines.append(f"// `{pl.name}`: bytes [{pl.offset}, {pl.end}) are reserved "
                                 "but never accessed")
        if ctx.smem.placements and ("smem_u32" in used or any(
                p.layout.startswith("swizzle") for p in ctx.smem.placements)):
            lines.append("const uint32_t smem_u32 = cake_smem_u32(smem);")
        if any(p.layout.startswith("swizzle") for p in ctx.smem.placements):
            lines += ["#ifndef CAKE_NO_SMEM_ALIGN_CHECK",
                      "if ((smem_u32 & 1023u) != 0u) __trap();  // swizzles assume a 1024 B base",
                      "#endif"]
        g = ctx.plan.groups[None]
        need = self._group_names(self.top_used, g)
        if "warp_id" in used or {"warp_rank", "wg_rank"} & set(need):
            lines.append("const int warp_id = int(threadIdx.x) / 32;")
        if "lane" in used or "leader" in need:
            lines.append("const int lane = int(threadIdx.x) % 32;")
        lines += self._group_lines(need, g)
        return "\n".join(lines)

    @staticmethod
    def _group_names(used: set[str], g: Group) -> list[str]:
        need: list[str] = [n for n in ("warp_rank", "wg_rank", "thread_rank", "leader")
                           if n in used]
        if "leader" in need and g.role is not None and "warp_rank" not in need:
            need.insert(0, "warp_rank")
        if "wg_rank" in need and "warp_rank" not in need:
            need.insert(0, "warp_rank")
        return need

    @staticmethod
    def _group_lines(need: list[str], g: Group) -> list[str]:
        out = []
        first = g.warp_start
        for n in ("warp_rank", "wg_rank", "thread_rank", "leader"):
            if n not in need:
                continue
            if n == "warp_rank":
                out.append(f"const int warp_rank = warp_id - {first};" if first else
                           "const int warp_rank = warp_id;")
            elif n == "wg_rank":
                out.append("const int wg_rank = warp_rank / 4;")
            elif n == "thread_rank":
                out.append(f"const int thread_rank = int(threadIdx.x) - {first * 32};" if first
                           else "const int thread_rank = int(threadIdx.x);")
            elif n == "leader":
                out.append("const bool leader = warp_rank == 0 && lane == 0;" if g.role else
                           "const bool leader = threadIdx.x == 0;")
        return out

    # -- statements ------------------------------------------------------------------------------
    def nodes(self, nodes: list[Node]) -> None:
        self._hoisted(nodes)
        for n in nodes:
            if isinstance(n, Op):
                self.op(n)
            elif isinstance(n, ForOp):
                self.loop(n)
            elif isinstance(n, IfOp):
                self.branch(n)
            elif isinstance(n, Role):
                self.role(n)

    def _hoisted(self, nodes: list[Node]) -> None:
        ctx, em = self.ctx, self.em
        for key in ctx.plan.hoisted.get(id(nodes), []):
            _, name, t = key
            if isinstance(t, FragmentType):
                fv = ctx.frag_var(key, t)
                ctx.declare(key, fv)
                em.emit(f"{fv.decl};  // `{name}` is bound inside a block and read after it",
                        None)
            elif t == _STAGE:
                cname = ctx.plan.slot_names[key]
                ctx.declare(("var", name), cname)
                em.emit(f"int {cname} = 0;", None)

    def op(self, op: Op) -> None:
        ctx = self.ctx
        if op.prim.has(Trait.BLOCK_BARRIER) and self.fenced:
            self.pending_pipes = None
        if op.prim.has(Trait.BARRIER_INIT_FENCE):
            self.fenced = True
        try:
            facet = op.prim.facet("lower")
        except FacetError as exc:
            raise LowerError(op.span, f"`{op.prim.key}`: {exc}") from exc
        if isinstance(facet, Unsupported):
            raise LowerError(op.span, f"`{op.prim.key}` has no lowering: {facet.why}")
        code = facet(op, ctx)
        if op.prim.has(Trait.DECLARES_PIPELINE):
            self.pending_pipes, self.fenced = op, False
        if code:
            if ctx.g.role is None:
                self.top_used |= _idents(code)
            self.em.at(op.span.start.line)
            self.em.emit(code)

    def loop(self, n: ForOp) -> None:
        ctx, em = self.ctx, self.em
        v = c_identifier(n.var.name, FIXED_NAMES)
        start, stop = ctx.sym(n.start), ctx.sym(n.stop)
        if ctx.g.role is None:
            self.top_used |= _idents(start + " " + stop)
        step = str(n.step.const) if n.step.const is not None else ctx.sym(n.step)
        if ctx.g.role is None and n.step.const is None:
            self.top_used |= _idents(step)
        trips = n.trip_count.const
        em.at(n.span.start.line)
        em.emit("#pragma unroll" if trips is not None and trips <= 16 else "#pragma unroll 1")
        inc = f"++{v}" if step == "1" else f"{v} += {step}"
        em.open(f"for (int {v} = {start}; {v} < {stop}; {inc})")
        ctx.push()
        ctx.declare(("var", n.var.name), v)
        self.nodes(n.body)
        ctx.pop()
        em.close()

    def branch(self, n: IfOp) -> None:
        ctx, em = self.ctx, self.em
        em.at(n.span.start.line)
        # elect_one: the role's thread 0, the same thread `leader` names (so a bulk group it
        # commits is the one a `tma_store_wait` outside the block waits for); never
        # elect.sync, which may pick another lane on each call
        cond = "thread_rank == 0" if n.elected else ctx.cond(n.cond)
        if ctx.g.role is None:
            self.top_used |= _idents(cond)
        em.open(f"if ({cond})")
        ctx.push()
        outer, ctx.elected = ctx.elected, ctx.elected or n.elected
        self.nodes(n.then)
        ctx.elected = outer
        ctx.pop()
        if n.orelse:
            em.depth -= 1
            em.emit("} else {", None)
            em.depth += 1
            ctx.push()
            self.nodes(n.orelse)
            ctx.pop()
        em.close()

    def role(self, r: Role) -> None:
        ctx, em = self.ctx, self.em
        if self.pending_pipes is not None:
            em.at(self.pending_pipes.span.start.line)
            em.emit("cake_fence_barrier_init(); __syncthreads();  // publish the pipeline "
                    "barriers to every role")
            ctx.features.add("mbarrier")
            self.pending_pipes = None
        g = ctx.plan.groups[r.name]
        em.at(r.span.start.line)
        em.open(f"if ({_role_cond(g)})")
        desc = f'// role "{r.name}": warps {g.warp_start}..{g.warp_stop - 1}'
        if g.warpgroups:
            desc += f" ({g.warpgroups} warpgroup{'s' if g.warpgroups > 1 else ''})"
        launch = launch_regs(ctx.kernel, ctx.arch)
        if r.regs is not None:
            desc += f", {r.regs} registers per thread"
        elif launch is not None:
            desc += f", the launch's {launch} registers per thread"
        if g.single:
            desc += "; its ops run in one elected thread"
        em.emit(desc, None)
        em.at(r.span.start.line)
        if launch is not None:
            self._setmaxnreg(r, g, launch)
        pro_at = em.mark()
        prev_group, prev_accs = ctx.group, ctx.wgmma_accs
        ctx.group, ctx.wgmma_accs = g, []
        ctx.push()
        cursors = self._cursors(r.name)
        if g.single:
            em.open("if (leader)", None)
        self.nodes(r.body)
        if g.single:
            em.close()
        ctx.pop()
        body = em.text_since(pro_at)
        need = self._group_names(_idents(body) | ({"leader"} if g.single else set()), g)
        lines = self._group_lines(need, g)
        ints = [x.split("const int ", 1)[1].rstrip(";") for x in lines
                if x.startswith("const int ")]
        names_line = (["const int " + ", ".join(ints) + ";"] if ints else []) + \
            [x for x in lines if not x.startswith("const int ")]
        decl = [" ".join(names_line)] if names_line else []
        if cursors:
            decl.append(" ".join(cursors))
        if decl:
            em.insert(pro_at, "\n".join(decl), r.span.start.line)
        ctx.group, ctx.wgmma_accs = prev_group, prev_accs
        em.close()

    def _setmaxnreg(self, r: Role, g: Group, launch: int) -> None:
        """Every warpgroup role of a kernel with `regs=` states its count, its own `regs=` or
        the launch allocation it keeps.  Stating the kept count is what holds ptxas to the
        launch ceiling the budget, the metadata and the cost model assume: given only
        `setmaxnreg.dec`s and a role that states nothing, ptxas drops the decs (nothing could
        claim what they free) and picks its own count.  At run time such a `.dec` to the
        count the warps already hold releases nothing."""
        ctx = self.ctx
        if not g.warpgroups:
            if r.regs is not None:
                raise LowerError(r.name_span, "setmaxnreg applies to whole warpgroups: the role "
                                 "must start at a multiple of 4 warps and span whole warpgroups")
            return  # keeps the launch count; setmaxnreg cannot name it for part of a warpgroup
        count = r.regs if r.regs is not None else allocated(launch, ctx.arch)
        kind = "inc" if count > launch else "dec"
        why = f"launched with {launch}" if r.regs is not None else \
            "keeps the launch count; stating it holds ptxas to it"
        ctx.features.add("setmaxnreg")
        self.em.emit(f"cake_setmaxnreg_{kind}<{count}>();  // {why}")

    def _cursors(self, role: str) -> list[str]:
        ctx = self.ctx
        out = []
        for name, info in ctx.plan.pipes.items():
            names = ctx.pipe_names[name]
            if info.producer == role:
                out.append(f"CakeCursor {names['acquire']} = {{0, 1u, 0}}; "
                           f"int {names['commit']} = 0;")
                ctx.declare(("cursor", name, "acquire"), names["acquire"])
                ctx.declare(("cursor", name, "commit"), names["commit"])
            if role in info.consumers:
                out.append(f"CakeCursor {names['wait']} = {{0, 0u, 0}}; "
                           f"int {names['release']} = 0;")
                ctx.declare(("cursor", name, "wait"), names["wait"])
                ctx.declare(("cursor", name, "release"), names["release"])
        return out


def _role_cond(g: Group) -> str:
    if g.warpgroups:
        a, b = g.warp_start // 4, g.warp_stop // 4
        return f"warp_id / 4 == {a}" if b == a + 1 else \
            f"warp_id / 4 >= {a} && warp_id / 4 < {b}"
    if g.warps == 1:
        return f"warp_id == {g.warp_start}"
    if g.warp_start == 0:
        return f"warp_id < {g.warp_stop}"
    return f"warp_id >= {g.warp_start} && warp_id < {g.warp_stop}"


def _idents(text: str) -> set[str]:
    """Identifiers the code (not its comments) mentions."""
    code = re.sub(r"//[^\n]*", "", text)
    return set(re.findall(r"[A-Za-z_]\w*", code))


__all__ = ["FragVar", "KernelCode", "launch_ceiling", "launch_regs", "lower_kernel", "walk_nodes"]
