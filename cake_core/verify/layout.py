"""Layout rules (CK4xx): swizzles, what TMA and wgmma can encode, bank conflicts.

A shared-memory buffer has one declared layout, and every instruction that touches it
must agree with it: TMA writes it through a descriptor, wgmma reads it through another,
`ldmatrix` and vector loads compute lane addresses from it.  For each buffer this pass
finds the first use the layout cannot serve (one finding per buffer: the layout is the
bug, not each use) and proposes a layout that serves every use.  When all uses are
legal it counts bank conflicts exactly from lane addresses (`banks.py`) and proposes
the swizzle or padding that removes them.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from cake_core.diagnostics import codes
from cake_core.diagnostics.codes import Rule
from cake_core.diagnostics.model import Applicability, Diagnostic, Fix, Related, TextEdit
from cake_core.ir.kernel import Kernel, Op, Program
from cake_core.ir.symbolic import divides
from cake_core.ir.types import FragLayout, FragmentType, SmemLayout, SmemType, TileType
from cake_core.primitives.registry import SmemAccess
from cake_core.primitives.traits import Trait
from cake_core.source import SourceFile, Span
from cake_core.verify import banks
from cake_core.verify.views import Geometry, View, ViewTracer

#: Every code this pass may emit (tests/test_rule_codes.py holds it to that).
CODES = (codes.SWIZZLE_ROW_MISMATCH, codes.TMA_LAYOUT, codes.MMA_LAYOUT, codes.BANK_CONFLICT)
SPANS = (128, 64, 32)
TMA_SMEM_ALIGN = 128


def check(program: Program, source: SourceFile) -> list[Diagnostic]:
    out: list[Diagnostic] = []
    for k in program.kernels:
        out.extend(_check_kernel(k))
    return out


@dataclass(frozen=True, slots=True)
class Use:
    """One instruction touching a buffer through one operand, addressed as its primitive
    declares (`EffectSpec.smem_access`)."""

    op: Op
    arg: str
    view: View
    kind: SmemAccess
    threads: int = 32
    box_inner: int = 0
    starts: tuple[tuple[int, int], ...] | None = None
    """Where the view starts over its index values (bank-analysed uses only)."""

    @property
    def span(self) -> Span:
        return self.op.arg_spans.get(self.arg, self.op.span)


@dataclass(frozen=True, slots=True)
class Problem:
    rule: Rule
    span: Span
    message: str
    notes: tuple[str, ...] = ()


def _check_kernel(k: Kernel) -> Iterator[Diagnostic]:
    tracer = ViewTracer(k)
    decls = {op.results[0].type.buffer: op for op in k.ops()
             if Trait.ALLOCATES_SMEM in op.prim.traits and op.results
             and isinstance(op.results[0].type, SmemType)}
    uses = uses_by_buffer(k, tracer)
    for name, g in tracer.geometries.items():
        decl = decls.get(name)
        if decl is None:
            continue
        buf_uses = uses.get(name, [])
        problem = first_problem(g, buf_uses, decl.arg_spans.get("layout", decl.span))
        if problem is not None:
            fix = _layout_fixes(g, buf_uses, decl, need_conflict_free=False)[:1]
            yield problem.rule.at(
                problem.span, problem.message, notes=problem.notes, fixes=fix,
                related=[] if problem.span == decl.span else
                [Related(decl.span, f"`{name}` is declared here as {g.layout}")])
            continue
        diag = _conflicts(g, buf_uses, decl)
        if diag is not None:
            yield diag


# --- uses ----------------------------------------------------------------------------------
def uses_by_buffer(k: Kernel, tracer: ViewTracer) -> dict[str, list[Use]]:
    out: dict[str, list[Use]] = {}

    def add(op: Op, arg: str, kind: SmemAccess, box_inner: int = 0) -> None:
        view = tracer.view(op, arg)
        if view is None:
            return
        role = k.roles.get(op.role) if op.role else None
        threads = role.warps * 32 if role is not None else k.threads
        starts = banks.positions(view) if kind.banked else None
        out.setdefault(view.buffer, []).append(Use(op, arg, view, kind, threads, box_inner,
                                                   starts))

    for op in k.ops():
        spec = op.prim.effects
        for arg, kind in spec.smem_access:
            if kind is SmemAccess.TMA:
                tile = op.args[spec.global_tile].type if spec.global_tile else None
                if isinstance(tile, TileType) and tile.shape[-1].const is not None:
                    add(op, arg, kind, tile.shape[-1].const * tile.dtype.bytes)
            elif kind is not SmemAccess.ROWS or _rows_fragments(op, arg):
                add(op, arg, kind)
    return out


def _rows_fragments(op: Op, arg: str) -> bool:
    """Whether the registers a `rows` access moves are `rows` fragments (the only lane
    mapping the bank model knows): the fragment read from, if any; a load's result is one."""
    others = [op.args[p].type for p in op.prim.effects.reads if p != arg and p in op.args]
    return all(isinstance(t, FragmentType) and t.layout == FragLayout.ROWS for t in others)


# --- what each instruction can encode ------------------------------------------------------
def first_problem(g: Geometry, uses: list[Use], decl_span: Span) -> Problem | None:
    s = g.layout.swizzle
    if s and g.row_bytes % s:
        return Problem(
            codes.SWIZZLE_ROW_MISMATCH, decl_span,
            f"swizzle({s}) permutes 16-byte chunks across {s}-byte rows (8 rows x {s} B per "
            f"atom), but rows of `{g.name}` are {g.row_bytes} bytes ({g.cols} "
            f"{g.dtype.value})",
            (f"TMA and wgmma use swizzle({s}) only on rows that are a multiple of {s} bytes",))
    for u in uses:
        if u.kind is SmemAccess.TMA:
            p = tma_problem(g, u)
            if p is not None:
                return p
    for u in uses:
        if u.kind is SmemAccess.WGMMA:
            p = mma_problem(g, u)
            if p is not None:
                return p
    return None


def tma_problem(g: Geometry, u: Use) -> Problem | None:
    v, name, what = u.view, g.name, u.op.name
    moves = "writes" if u.arg in u.op.prim.effects.writes else "reads"
    rule = codes.TMA_LAYOUT
    if g.layout.pad:
        return Problem(rule, u.span, f"{what} cannot use `{name}`: TMA {moves} boxes densely "
                       f"and cannot skip the padding of {g.layout} rows")
    if v.transposed:
        how = "col-major" if g.col_order else "a transposed view"
        return Problem(rule, u.span, f"{what} {moves} the tile's last dimension contiguously, "
                       f"but this view of `{name}` is {how}",
                       ("copy through a row-major view and transpose when reading (`x.T`)",))
    if v.cols != g.cols:
        return Problem(rule, u.span, f"{what} {moves} box rows back to back, {u.box_inner} B "
                       f"apart, but rows of `{name}` are {g.pitch} B apart; TMA cannot cover "
                       "part of a row", ("make the buffer's last dimension the box's",))
    s = g.layout.swizzle
    if s and u.box_inner > s:
        return Problem(rule, u.span, f"{what}: TMA's swizzle({s}) mode takes boxes at most "
                       f"{s} bytes wide, but this box is {u.box_inner} bytes wide",
                       ("the swizzle span must cover the box's inner dimension",))
    offset = v.byte_offset(g)
    if not divides(offset, TMA_SMEM_ALIGN):
        return Problem(rule, u.span, f"{what}: TMA needs {TMA_SMEM_ALIGN}-byte aligned "
                       f"shared-memory boxes, but this view of `{name}` starts at byte "
                       f"{offset}", ("make each stage a multiple of 128 bytes",))
    return None


def mma_problem(g: Geometry, u: Use) -> Problem | None:
    rule, name, s, rb = codes.MMA_LAYOUT, g.name, g.layout.swizzle, g.row_bytes
    if g.layout.pad:
        return Problem(rule, u.span, f"wgmma cannot read `{name}`: its descriptors have no "
                       f"form for the padding of {g.layout} rows")
    if not s and rb != 16:
        return Problem(rule, u.span, f"wgmma reads unswizzled operands as 8-row x 16-byte "
                       f"blocks stored contiguously; `{name}` is row-major with {rb}-byte rows",
                       ("swizzled layouts are what TMA writes and wgmma reads",))
    if s and rb != s:
        return Problem(rule, u.span, f"wgmma's swizzle({s}) mode reads {s}-byte rows, but rows "
                       f"of `{name}` are {rb} bytes")
    return None


# --- fixes ----------------------------------------------------------------------------------
def candidate_layouts(g: Geometry) -> list[SmemLayout]:
    order = g.layout.order
    out = [SmemLayout(order, s) for s in SPANS] + [SmemLayout(order)]
    if order == "row":  # 16 bytes of padding suits vectors, one word suits column walks
        out += [SmemLayout("row", 0, 16 // g.esize), SmemLayout("row", 0, max(1, 4 // g.esize))]
    return [c for c in out if c != g.layout]


def conflict_reports(g: Geometry, uses: list[Use]) -> list[tuple[Use, banks.BankReport]]:
    out = []
    for u in uses:
        if not u.kind.banked or u.starts is None:
            continue
        starts = banks.bases(g, u.starts)
        if u.kind is SmemAccess.LDMATRIX:
            if u.view.rows % 8 or (u.view.cols * g.esize) % 16:
                continue
            rep = banks.worst(banks.ldmatrix_report(g, u.view, b) for b in starts)
        else:
            report = banks.fragment_access_report if u.kind is SmemAccess.ROWS else \
                banks.chunked_access_report
            rep = banks.worst(report(g, u.view, u.threads, b) for b in starts)
        out.append((u, rep))
    return out


def _layout_fixes(g: Geometry, uses: list[Use], decl: Op, *,
                  need_conflict_free: bool) -> list[Fix]:
    legal: list[tuple[SmemLayout, int]] = []
    for layout in candidate_layouts(g):
        trial = g.with_layout(layout)
        if first_problem(trial, uses, decl.span) is not None:
            continue
        extra = sum(r.extra for _, r in conflict_reports(trial, uses))
        legal.append((layout, extra))
    best = sorted((x for x in legal if x[1] == 0 or not need_conflict_free),
                  key=lambda x: (x[1] > 0, x[0].pad > 0))
    fixes: list[Fix] = []
    for layout, _ in best[:2]:
        edit = _layout_edit(decl, str(layout))
        if edit is not None:
            fixes.append(Fix(f"use layout={layout} for `{g.name}`", (edit,),
                             Applicability.SAFE))
        if not need_conflict_free:
            break
    return fixes


def _layout_edit(decl: Op, text: str) -> TextEdit | None:
    """Rewrite the buffer's `layout=` argument, or add one after its last argument."""
    if "layout" in decl.arg_spans:
        return TextEdit(decl.arg_spans["layout"], text)
    if not decl.arg_spans:
        return None
    end = max(decl.arg_spans.values(), key=lambda sp: sp.end.offset).end
    return TextEdit(Span(end, end), f", layout={text}")


# --- bank conflicts ---------------------------------------------------------------------
def _conflicts(g: Geometry, uses: list[Use], decl: Op) -> Diagnostic | None:
    bad = [(u, r) for u, r in conflict_reports(g, uses) if r.extra > 0]
    if not bad:
        return None
    (first, rep), rest = bad[0], bad[1:]
    fixes = _layout_fixes(g, uses, decl, need_conflict_free=True)
    total = sum(r.extra for _, r in bad)
    return codes.BANK_CONFLICT.at(
        first.span, _describe(g, first, rep),
        related=[Related(u.span, _describe(g, u, r)) for u, r in rest]
        + [Related(decl.span, f"`{g.name}` is declared here as {g.layout}")],
        notes=[f"`{g.name}` is {g.layout} with {g.pitch}-byte rows; the addresses one phase "
               "reads fall into the same banks"],
        fixes=fixes,
        data={"extra_wavefronts": total,
              "accesses": [{"op": u.op.name, "wavefronts": r.wavefronts, "ideal": r.phases,
                            "worst": r.worst, "instructions": r.instructions}
                           for u, r in bad]})


def _describe(g: Geometry, u: Use, r: banks.BankReport) -> str:
    if u.kind is SmemAccess.LDMATRIX:
        verb = "writes" if u.arg in u.op.prim.effects.writes else "reads"
        return (f"{u.op.name} {verb} `{g.name}` with {r.worst}-way bank conflicts: {r.wavefronts} "
                f"wavefronts per warp where {r.phases} would do ({r.extra} extra)")
    verb = f"{u.op.name} {'to' if u.arg in u.op.prim.effects.writes else 'from'}"
    return (f"{verb} `{g.name}` has {r.worst}-way bank conflicts: {r.extra} extra wavefronts "
            f"over {r.instructions} warp instructions ({r.wavefronts} instead of {r.phases})")
