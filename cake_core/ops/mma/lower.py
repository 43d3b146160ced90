"""Lower facets of the tensor-core ops: mma.sync (sm_80+) and wgmma (sm_90a).

`wgmma(acc, a, b)` becomes, per warpgroup of the role: a `wgmma.fence`, one
`wgmma.mma_async` per 64-row slab of the accumulator and per K step (16 elements, 32 for
fp8), with both operands read from shared memory through matrix descriptors, then one
`wgmma.commit_group`.  The operands must be K-major (A as an (M, K) row-major view, B as
the `.T` of an (N, K) row-major view) in a swizzled buffer whose rows are exactly one
swizzle span: the canonical layout TMA writes.  `wgmma_wait(n)` is `wgmma.wait_group n`
followed by a register fence on every accumulator of the role.

An A operand in registers (a 16-bit fragment, typically `cast(s, bf16)` of an earlier
accumulator) has the accumulator's layout (`layout_rules.wgmma_a`): K step `kk` of slab `m`
is the eight elements from `m * K / 2 + 8 * kk`, packed pairwise (before the fence) into
the four .b32 registers the instruction reads (PTX ISA 9.7.15.5.2, A fragment of m64nNk16).
"""

from __future__ import annotations

from cake_core.ir import symbolic as S
from cake_core.ir.kernel import Op
from cake_core.ir.symbolic import Const, SymExpr, divides, mul
from cake_core.ir.types import DType, SmemType
from cake_core.lower import layout_rules
from cake_core.lower.context import LowerContext, SmemRef, add
from cake_core.lower.context import mul as smul
from cake_core.lower.layout_rules import with_layouts
from cake_core.lower.layouts import WG_RANK, cvar
from cake_core.lower.plan import LowerError
from cake_core.lower.prelude import WGMMA_TYPES, wgmma_helper_name

#: wgmma descriptor swizzle-mode field (bits 62-63) by swizzle span, PTX ISA 9.7.15.5.1.
DESC_MODE = {128: 1, 64: 2, 32: 3}


@with_layouts(layout_rules.mma_accumulator)
def mma_sync(op: Op, ctx: LowerContext) -> str:
    acc, a, b = ctx.frag(op, "acc"), ctx.frag(op, "a"), ctx.frag(op, "b")
    at = op.span
    if acc.dist.parent.kind != "mma_acc" or a.dist.parent.kind != "mma_a" or \
            b.dist.parent.kind != "mma_b":
        raise LowerError(at, "mma_sync takes an mma_acc accumulator and ldmatrix operands "
                         "(layouts mma_a and mma_b)")
    m, n = acc.shape
    k = a.shape[1]
    mt, nt, kt = m // 16, n // 8, k // 16
    v_m, v_n, v_k = (ctx.loop_var(x) if e > 1 else None
                     for x, e in (("mt", mt), ("nt", nt), ("kt", kt)))
    dt = "bf16" if a.dtype == DType.BF16 else "f16"
    hdr = "".join(f"CAKE_FOR({v}, {e}) " for v, e in ((v_k, kt), (v_m, mt), (v_n, nt)) if v)

    def term(v: str | None, k_: int) -> str:
        return smul(v, k_) if v else "0"

    d = add(term(v_m, nt * 4), term(v_n, 4))
    ra = add(term(v_m, kt * 4), term(v_k, 4))
    rb = add(term(v_k, nt * 2), term(v_n, 2))
    ctx.features.add("mma")
    return (f"{hdr}cake_mma_m16n8k16_{dt}(&{acc.cname}[{d}], &{a.cname}[{ra}], "
            f"&{b.cname}[{rb}]);")


def _operand(ctx: LowerContext, op: Op, arg: str, k_major_when_transposed: bool
             ) -> tuple[SmemRef, int]:
    """The operand's view and the span of its swizzle; K-major and canonical, or an error."""
    at = op.arg_spans.get(arg, op.span)
    if not isinstance(op.args[arg].type, SmemType):
        raise LowerError(at, "wgmma operands in registers are not lowered yet")
    ref = ctx.smem_ref(op, arg)
    g, v = ref.geometry, ref.view
    if v.transposed != k_major_when_transposed:
        raise LowerError(at, f"`{arg}` is MN-major in shared memory; the lowering emits "
                         "K-major wgmma operands only (A as (M, K), B as the .T of (N, K))")
    span = g.layout.swizzle
    if span not in DESC_MODE or g.layout.pad or g.row_bytes != span:
        raise LowerError(at, f"wgmma reads `{arg}` through a descriptor: its buffer rows must "
                         f"be exactly one swizzle span (swizzle(32|64|128) and rows of that "
                         f"many bytes), not {g.row_bytes}-byte rows with {g.layout}")
    if not divides(mul(v.row0, Const(g.pitch)), 8 * span):
        raise LowerError(at, f"`{arg}` must start at a multiple of {8 * span} bytes (one "
                         "swizzle repeat) for a descriptor base offset of 0")
    return ref, span


@with_layouts(layout_rules.wgmma_accumulator)
def wgmma(op: Op, ctx: LowerContext) -> str:
    acc = ctx.frag(op, "acc")
    g = ctx.g
    wgs = g.warpgroups
    if acc.dist.parent.kind != "wgmma_acc" or not wgs:
        raise LowerError(op.span, "wgmma needs a wgmma_acc accumulator in whole warpgroups")
    a_t, b_t = op.args["a"].type, op.args["b"].type
    if not isinstance(b_t, SmemType):
        raise LowerError(op.span, "wgmma reads `b` from shared memory")
    in_regs = not isinstance(a_t, SmemType)
    b_ref, b_span = _operand(ctx, op, "b", True)
    dtype = b_t.dtype
    if dtype not in WGMMA_TYPES:
        raise LowerError(op.span, f"no wgmma for {dtype.value} inputs")
    if in_regs and dtype.bits != 16:
        raise LowerError(op.arg_spans.get("a", op.span),
                         f"wgmma takes A from registers for 16-bit inputs only, not "
                         f"{dtype.value}: stage it in shared memory")
    m, n = acc.shape
    kdim = a_t.shape[1].const  # type: ignore[attr-defined]
    if kdim is None:
        raise LowerError(op.span, "wgmma needs a constant K")
    kstep = WGMMA_TYPES[dtype][1]
    ksteps = kdim // kstep
    rows_per_wg = m // wgs
    slabs = rows_per_wg // 64
    helper = wgmma_helper_name(n, dtype)
    ctx.wgmma_shapes.add((n, dtype))
    ctx.features.add("wgmma")
    kk = ctx.loop_var("kk") if ksteps > 1 else None
    sl = ctx.loop_var("m") if slabs > 1 else None
    a_row: SymExpr = S.mul(WG_RANK, Const(rows_per_wg)) if wgs > 1 else Const(0)
    if sl:
        a_row = S.add(a_row, S.mul(cvar(sl), Const(64)))
    k_off: SymExpr = S.mul(cvar(kk), Const(kstep)) if kk else Const(0)
    b_addr = "smem_u32 + " + ctx.smem_offset(b_ref, Const(0), k_off, swizzled=False)
    desc_b = f"cake_wgmma_desc({b_addr}, 16, {8 * b_span}, {DESC_MODE[b_span]})"
    pre = ""
    if in_regs:
        a_frag = ctx.frag(op, "a")
        if a_frag.dist.parent.kind != "wgmma_acc" or a_frag.shape != (m, kdim):
            raise LowerError(op.arg_spans.get("a", op.span),
                             "a wgmma A operand in registers must have the wgmma A-fragment "
                             "layout (that of a wgmma accumulator, e.g. a cast of one)")
        # Pack every pair before the fence: conversions between the wgmmas of one group
        # would make ptxas insert warpgroup.arrive and serialize them (C7515).
        ra = ctx.loop_var("ra")
        words = a_frag.size // 2
        r = ctx.loop_var("r")
        pre = (f"uint32_t {ra}[{words}]; CAKE_FOR({r}, {words}) {ra}[{r}] = "
               f"cake_pack_16x2({a_frag.cname}[2 * {r}], {a_frag.cname}[2 * {r} + 1]); "
               f"cake_fence_regs({ra}); ")
        base = add(smul(sl, kdim // 4) if sl else "", smul(kk, 4) if kk else "") or "0"
        a_arg = ", ".join(f"{ra}[{add(base, str(q))}]" for q in range(4))
        helper += "_rs"
    else:
        a_ref, a_span = _operand(ctx, op, "a", False)
        a_addr = "smem_u32 + " + ctx.smem_offset(a_ref, a_row, k_off, swizzled=False)
        a_arg = f"cake_wgmma_desc({a_addr}, 16, {8 * a_span}, {DESC_MODE[a_span]})"
    d = f"&{acc.cname}[{smul(sl, n // 2)}]" if sl else acc.cname
    hdr = (f"CAKE_FOR({kk}, {ksteps}) " if kk else "") + (f"CAKE_FOR({sl}, {slabs}) " if sl else "")
    if acc not in ctx.wgmma_accs:
        ctx.wgmma_accs.append(acc)
    call = _scaled_call(ctx, op, helper, f"{d}, {a_arg}, {desc_b}", kk)
    # a write-only first step (`accumulate=False`) must not pin the old values: the
    # fence would keep the moves that cleared them alive
    fence = "" if "_zd(" in call else f"cake_fence_regs({acc.cname}); "
    body = f"{pre}{fence}cake_wgmma_fence(); {hdr}{call} cake_wgmma_commit();"
    return "{ " + body + " }" if pre else body


def _scaled_call(ctx: LowerContext, op: Op, helper: str, args: str, kk: str | None) -> str:
    """The helper call of one K step: accumulating, or with scale-d 0 on the first step
    (`accumulate=False`: the `_zd` helper; a run-time condition: the `scale_d` flag)."""
    flag = op.args.get("accumulate")
    if flag is None or flag.const is True:
        return f"{helper}({args});"
    if flag.const is False:
        first = f"{helper}_zd({args});"
        return f"if ({kk} == 0) {first} else {helper}({args});" if kk else first
    cond = ctx.cond(flag)
    scale = f"({kk} > 0 || ({cond}))" if kk else f"({cond})"
    return f"{helper}({args}, {scale});"


def wgmma_wait(op: Op, ctx: LowerContext) -> str:
    v = op.args["n"]
    n = v.sym.const if v.sym is not None else None
    if n is None:
        raise LowerError(op.span, "wgmma_wait needs a constant")
    ctx.features.add("wgmma")
    fences = " ".join(f"cake_fence_regs({a.cname});" for a in ctx.wgmma_accs
                      if ctx.visible(a))
    return f"cake_wgmma_wait<{n}>();" + (f" {fences}" if fences else "")


__all__ = ["mma_sync", "wgmma", "wgmma_wait"]
