"""Resource rules (CK2xx): shared memory, registers, launch shape, instruction limits.

Everything here is a limit other compilers report late (at launch, or never: an
oversubscribed setmaxnreg split compiles and hangs).  The same models feed
`resource_table`, which `cake check --resources` prints: the smem plan with offsets,
the register budget per role and the resulting occupancy.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

from cake_core.diagnostics import codes
from cake_core.diagnostics.model import Applicability, Diagnostic, Fix, Related, TextEdit
from cake_core.hardware import ArchSpec, Feature, get_arch
from cake_core.ir.kernel import Kernel, Op, Program, Role
from cake_core.ir.symbolic import divides
from cake_core.primitives.traits import Trait
from cake_core.source import SourceFile, Span
from cake_core.syntax import ast
from cake_core.verify import operands
from cake_core.verify.edits import SourceIndex, keyword
from cake_core.verify.registers import (
    REGS_STEP,
    SETMAXNREG_MIN,
    Occupancy,
    RegisterBudget,
    legal_regs,
    nearest_legal_regs,
    occupancy,
    register_budget,
)
from cake_core.verify.smem_plan import SmemPlan, plan_allocations, smem_plan
from cake_core.verify.views import ViewTracer

#: Every code this pass may emit (tests/test_rule_codes.py holds it to that).
CODES = (codes.SMEM_OVERFLOW, codes.REGISTER_OVERSUBSCRIPTION, codes.INVALID_REGISTER_COUNT,
         codes.PARTIAL_WARPGROUP_REGS, codes.SETMAXNREG_UNAVAILABLE, codes.LAUNCH_LIMITS,
         codes.TMA_BOX_TOO_LARGE, codes.TMA_BOX_MISALIGNED, codes.TMA_STRIDE_ALIGNMENT,
         codes.WGMMA_OPERAND_MAJOR, codes.WGMMA_WARPGROUP_MISMATCH, codes.DTYPE_UNSUPPORTED,
         codes.NARROW_VECTOR_ACCESS)


def check(program: Program, source: SourceFile) -> list[Diagnostic]:
    index = SourceIndex(program, source)
    out: list[Diagnostic] = []
    for k in program.kernels:
        arch = get_arch(k.arch)
        if arch is None:
            continue
        out.extend(_launch(k, arch, index))
        out.extend(_smem(k, arch, program, index))
        out.extend(_registers(k, arch, index))
        out.extend(operands.check_kernel(k, arch, program, index, ViewTracer(k)))
    return out


# --- launch shape ------------------------------------------------------------------------
def _launch(k: Kernel, arch: ArchSpec, index: SourceIndex) -> Iterator[Diagnostic]:
    if k.threads > arch.max_threads_per_block:
        yield codes.LAUNCH_LIMITS.at(
            k.warps_span or k.decorator_span,
            f"{k.warps} warps are {k.threads} threads; {arch.name} launches at most "
            f"{arch.max_threads_per_block} threads per block")
    size = 1
    for c in k.cluster:
        size *= c
    if size <= 1:
        return
    kw = keyword(index.decorator_call(k), "cluster")
    span = kw.value.span if kw is not None else k.decorator_span
    if not arch.has(Feature.CLUSTERS):
        yield codes.LAUNCH_LIMITS.at(
            span, f"{arch.name} has no thread-block clusters; cluster={tuple(k.cluster)} "
            "needs sm_90 or newer",
            related=[Related(k.arch_span, "target arch set here")] if k.arch_span else [])
        return
    if size > arch.max_cluster_size:
        yield codes.LAUNCH_LIMITS.at(
            span, f"a cluster of {size} blocks exceeds the portable maximum of "
            f"{arch.max_cluster_size} on {arch.name}",
            notes=["larger (non-portable) clusters need a launch attribute CAKE does not "
                   "emit"])
        return  # one finding per cluster shape: its divisibility is moot
    yield from _whole_clusters(k, span)


def _whole_clusters(k: Kernel, span: Span) -> Iterator[Diagnostic]:
    for axis, (g, c) in enumerate(zip(k.grid, k.cluster, strict=False)):
        if c > 1 and not divides(g, c):
            name = "xyz"[axis]
            yield codes.LAUNCH_LIMITS.at(
                span, f"the grid's {name} extent `{g}` is not provably a multiple of the "
                f"cluster's {c}: the launch fails unless the grid is a whole number of "
                "clusters",
                notes=[f"round it up, e.g. `cdiv(N, {c} * TILE) * {c}` (blocks past the "
                       "tensor are clipped), or declare the dim with `multiple_of=`"])


# --- shared memory ---------------------------------------------------------------------
def _smem(k: Kernel, arch: ArchSpec, program: Program,
          index: SourceIndex) -> Iterator[Diagnostic]:
    plan = smem_plan(k, arch)
    over = plan.overflowing()
    if over is None:
        return
    data: dict[str, object] = {"smem": plan.as_data(),
                               "occupancy": occupancy(k, arch, plan.total).as_data()}
    fixes, notes = _stage_fix(k, program, plan, index)
    what = "barriers" if over.kind == "barrier" else "buffer"
    yield codes.SMEM_OVERFLOW.at(
        over.span,
        f"shared memory overflows: {what} `{over.name}` ends at byte {over.end}, past the "
        f"{plan.limit} B a block can use on {arch.name}; the plan needs {plan.total} B "
        f"({plan.buffer_bytes} B buffers + {plan.barrier_bytes} B barriers + "
        f"{plan.padding_bytes} B alignment padding)",
        fixes=fixes, notes=notes, data=data)


def _stage_fix(k: Kernel, program: Program, plan: SmemPlan,
               index: SourceIndex) -> tuple[list[Fix], list[str]]:
    """Rewrite the stage-count constant to the largest value whose plan fits."""
    found = _stage_constant(k, program)
    if found is None:
        return [], ["no stage-count constant scales these buffers; use smaller tiles"]
    name, stages, per_stage = found

    def trial(s: int) -> SmemPlan:
        return plan_allocations(k.smem, plan.limit, {n: b * s for n, b in per_stage.items()})

    # The plan grows with the stage count, so the largest count that fits is found by
    # bisection: a count of 10**9 costs thirty trial plans, not a billion.
    lo, hi = 1, stages  # 2..lo fit (none when lo is 1); hi and above do not
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if mid >= 2 and trial(mid).fits:
            lo = mid
        else:
            hi = mid
    if lo < 2:
        return [], [f"even {name} = 2 does not fit; use smaller tiles"]
    best = trial(lo)
    literal = index.constant_literal(name)
    if literal is None:
        return [], [f"{name} = {lo} fits ({best.total} B)"]
    return [Fix(f"use {name} = {lo} ({best.total} B of shared memory)",
                (TextEdit(literal, str(lo)),), Applicability.UNSAFE)], \
        [f"{name} = {lo} fits: {best.total} B"]


def _stage_constant(k: Kernel, program: Program) -> tuple[str, int, dict[str, int]] | None:
    """The top-level constant that counts stages, with the bytes per stage of every
    allocation it scales.

    It is the `stages=` of a pipeline when it also gives the leading dim of a buffer;
    kernels without a pipeline (cp.async rings) qualify a constant that leads a buffer of
    rank 3 or more when it is named like a stage count or leads two buffers.
    """
    def constant_of(v: object) -> str | None:
        name = getattr(v, "name", None)
        c = program.constants.get(name) if isinstance(name, str) else None
        if c is None or c.sym is None or getattr(v, "sym", None) != c.sym:
            return None
        return name if c.sym.const is not None and c.sym.const > 1 else None

    def lead(op: Op) -> str | None:
        shape = op.args.get("shape")
        elts = shape.const if shape is not None and isinstance(shape.const, tuple) else ()
        smem = Trait.ALLOCATES_SMEM in op.prim.traits
        return constant_of(elts[0]) if smem and len(elts) >= 3 else None

    ops = list(k.ops())
    piped = {n for op in ops if Trait.DECLARES_PIPELINE in op.prim.traits
             if (n := constant_of(op.args.get("stages"))) is not None}
    leads = [n for op in ops if (n := lead(op)) is not None]
    ranked = sorted(set(leads), key=lambda n: (n not in piped, "STAGE" not in n.upper(),
                                               -leads.count(n), n))
    allocs = {(a.span.start.offset, a.span.end.offset): a for a in k.smem}
    for name in ranked:
        if name not in piped and "STAGE" not in name.upper() and leads.count(name) < 2:
            continue
        c = program.constants[name].sym
        stages = c.const if c is not None else None
        if stages is None:
            continue
        per_stage: dict[str, int] = {}
        for op in ops:
            a = allocs.get((op.span.start.offset, op.span.end.offset))
            if a is not None and (lead(op) == name or
                                  (Trait.DECLARES_PIPELINE in op.prim.traits and
                                   constant_of(op.args.get("stages")) == name) or
                                  (Trait.ALLOCATES_BARRIER in op.prim.traits and
                                   constant_of(op.args.get("n")) == name)):
                per_stage[a.name] = a.nbytes // stages
        return name, stages, per_stage
    return None


# --- registers ---------------------------------------------------------------------------
def _registers(k: Kernel, arch: ArchSpec, index: SourceIndex) -> Iterator[Diagnostic]:
    roles = [r for r in sorted(k.roles.values(), key=lambda r: r.warp_start)
             if r.regs is not None]
    if not roles:
        return
    def call(r: Role) -> ast.Call | None:  # looked up only to report: clean kernels skip it
        return index.role_call(r)

    def regs_span(r: Role) -> Span:
        """The `regs=` value, or the role's name if the source cannot be matched."""
        kw = keyword(call(r), "regs")
        return kw.value.span if kw is not None else r.name_span

    if not arch.has(Feature.SETMAXNREG):
        edits = []
        for r in roles:
            c = call(r)
            kw = keyword(c, "regs")
            if c is not None and kw is not None:
                edits.append(index.remove_keyword(c, kw))
        first = roles[0]
        yield codes.SETMAXNREG_UNAVAILABLE.at(
            regs_span(first),
            f"`regs=` lowers to setmaxnreg, which {arch.name} does not have (sm_90a and "
            "sm_100a only)",
            related=[Related(regs_span(r), f"role {r.name!r} sets regs too")
                     for r in roles[1:]],
            fixes=[Fix("remove `regs=`", tuple(edits), Applicability.SAFE)] if edits else [])
        return
    budget = register_budget(k, arch)
    bad = False
    for r in roles:
        assert r.regs is not None
        if not legal_regs(r.regs):
            bad = True
            yield _invalid_regs(r, budget, regs_span(r), index)
    for r in roles:
        if r.warp_start % 4 or r.warp_stop % 4:
            bad = True
            kw = keyword(call(r), "warps")
            yield codes.PARTIAL_WARPGROUP_REGS.at(
                kw.value.span if kw is not None else r.name_span,
                f"role {r.name!r} sets regs but has warps {r.warp_start}..{r.warp_stop - 1}; "
                "setmaxnreg is executed by whole warpgroups, so the role must start and end on "
                "a multiple of 4 warps")
    if bad or budget.fits:
        return
    yield _oversubscribed(k, arch, budget, roles, regs_span, index)


def _editable(span: Span, index: SourceIndex) -> bool:
    """Whether `span` holds a bare integer (so a fix may rewrite it)."""
    return index.text(span).strip().isdigit()


def _invalid_regs(r: Role, budget: RegisterBudget, span: Span, index: SourceIndex) -> Diagnostic:
    assert r.regs is not None
    others = budget.demand - r.warps * 32 * next(
        x.regs for x in budget.roles if x.name == r.name)
    room = budget.pool - others
    best = nearest_legal_regs(r.regs)
    if best * r.warps * 32 > room:  # the nearest count would oversubscribe: round down
        best = max(SETMAXNREG_MIN, min(best, room // (r.warps * 32) // REGS_STEP * REGS_STEP))
    return codes.INVALID_REGISTER_COUNT.at(
        span,
        f"setmaxnreg takes a multiple of {REGS_STEP} from 24 to 256; role {r.name!r} asks "
        f"for {r.regs}",
        fixes=[Fix(f"use regs={best}", (TextEdit(span, str(best)),),
                   Applicability.SAFE)] if _editable(span, index) else [])


def _oversubscribed(k: Kernel, arch: ArchSpec, budget: RegisterBudget, roles: list[Role],
                    regs_span: Callable[[Role], Span], index: SourceIndex) -> Diagnostic:
    culprit = max(roles, key=lambda r: (r.regs or 0, r.warps))
    assert culprit.regs is not None
    rest = budget.demand - culprit.warps * 32 * culprit.regs
    fit = (budget.pool - rest) // (culprit.warps * 32) // REGS_STEP * REGS_STEP
    span = regs_span(culprit)
    fixes = [Fix(f"use regs={fit} for role {culprit.name!r}", (TextEdit(span, str(fit)),),
                 Applicability.UNSAFE)] if fit >= SETMAXNREG_MIN and _editable(span, index) \
        else []
    parts = " + ".join(f"{r.name} {r.warps} warps x 32 x {r.regs}" for r in budget.roles)
    if budget.idle_warps:
        parts += f" + {budget.idle_warps} idle warps x 32 x {budget.launch_alloc}"
    occ = occupancy(k, arch, smem_plan(k, arch).total, budget)
    return codes.REGISTER_OVERSUBSCRIPTION.at(
        span,
        f"after setmaxnreg the roles hold {budget.demand} registers ({parts}), but the block "
        f"is launched with {budget.launch_regs} per thread x {budget.threads} threads = "
        f"{budget.pool}; setmaxnreg.inc in role {culprit.name!r} waits for registers no warp "
        "releases, and the kernel hangs",
        related=[Related(regs_span(r), f"role {r.name!r}: {r.warps} warps x {r.regs}")
                 for r in roles if r is not culprit],
        notes=["ptxas accepts an oversubscribed split without a word",
               f"the launch budget is {arch.regs_per_sm} registers / {budget.threads} threads, "
               f"rounded down to a multiple of {REGS_STEP}"],
        fixes=fixes,
        data={"demand": budget.demand, "pool": budget.pool,
              "launch_regs": budget.launch_regs, "occupancy": occ.as_data()})


# --- the resource table ------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class ResourceTable:
    """Everything `cake check --resources` prints for one kernel."""

    kernel: str
    arch: str
    warps: int
    threads: int
    cluster: tuple[int, ...]
    smem: SmemPlan
    registers: RegisterBudget
    occupancy: Occupancy

    def as_data(self) -> dict[str, object]:
        return {
            "kernel": self.kernel, "arch": self.arch, "warps": self.warps,
            "threads": self.threads, "cluster": list(self.cluster), "smem": self.smem.as_data(),
            "registers": {
                "launch_regs": self.registers.launch_regs, "pool": self.registers.pool,
                "demand": self.registers.demand,
                "roles": [{"name": r.name, "warps": [r.warp_start, r.warp_stop],
                           "regs": r.regs, "setmaxnreg": r.declared,
                           "registers": r.registers} for r in self.registers.roles],
                "idle_warps": self.registers.idle_warps},
            "occupancy": self.occupancy.as_data(),
        }


def resource_table(kernel: Kernel, arch: ArchSpec) -> ResourceTable:
    plan = smem_plan(kernel, arch)
    budget = register_budget(kernel, arch)
    return ResourceTable(kernel.name, arch.name, kernel.warps, kernel.threads,
                         tuple(kernel.cluster), plan, budget,
                         occupancy(kernel, arch, plan.total, budget))


def render_resource_table(table: ResourceTable) -> str:
    plan, regs, occ = table.smem, table.registers, table.occupancy
    pct = 100.0 * plan.total / plan.limit if plan.limit else 0.0
    lines = [
        f"kernel {table.kernel} ({table.arch}): {table.warps} warps, {table.threads} threads"
        + (f", cluster {'x'.join(map(str, table.cluster))}"
           if any(c > 1 for c in table.cluster) else ""),
        f"shared memory: {plan.total} B of {plan.limit} B ({pct:.1f}%): {plan.buffer_bytes} B "
        f"buffers, {plan.barrier_bytes} B barriers, {plan.padding_bytes} B padding",
    ]
    rows: list[tuple[str, ...]] = [("offset", "bytes", "align", "pad", "name", "layout")]
    rows += [(str(p.offset), str(p.nbytes), str(p.align), str(p.padding), p.name, p.layout)
             for p in plan.placements]
    lines += _columns(rows)
    alloc = f" ({regs.launch_alloc} allocated)" if regs.launch_alloc != regs.launch_regs else ""
    if regs.uses_setmaxnreg:
        lines.append(f"registers: launch {regs.launch_regs}/thread{alloc} x {regs.threads} = "
                     f"{regs.pool} per block; after setmaxnreg {regs.demand}")
    else:
        lines.append(f"registers: chosen by ptxas, at most {regs.launch_regs}/thread under "
                     f"__launch_bounds__({regs.threads}, 1); estimated {occ.regs_per_thread}"
                     f"/thread x {regs.threads} = {occ.regs_per_block} per block")
    rrows: list[tuple[str, ...]] = [("role", "warps", "regs", "registers")]
    for r in regs.roles:
        count = f"{r.regs}" if r.declared else "launch" if regs.uses_setmaxnreg else "ptxas"
        total = str(r.registers) if regs.uses_setmaxnreg else "-"
        rrows.append((r.name, f"{r.warp_start}-{r.warp_stop - 1}", count, total))
    if regs.idle_warps and regs.roles:
        rrows.append(("(no role)", str(regs.idle_warps),
                      "launch" if regs.uses_setmaxnreg else "ptxas",
                      str(regs.idle_warps * 32 * regs.launch_alloc)
                      if regs.uses_setmaxnreg else "-"))
    if len(rrows) > 1:
        lines += _columns(rrows)
    lines.append(f"occupancy: {occ.blocks} block{'s' if occ.blocks != 1 else ''}/SM "
                 f"(limited by {occ.limiter}): shared memory {occ.by_smem}, registers "
                 f"{occ.by_registers}, warps {occ.by_warps}, block slots {occ.by_blocks}")
    return "\n".join(lines)


def _columns(rows: list[tuple[str, ...]]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  " + "  ".join(c.rjust(w) if c[:1].isdigit() or c in ("", "-") else c.ljust(w)
                             for c, w in zip(r, widths, strict=True)).rstrip()
            for r in rows]
