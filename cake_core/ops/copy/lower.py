"""Lower facets of data movement: TMA, cp.async, ldmatrix, and register loads and stores.

- `tma_load` / `tma_store`: one elected thread issues `cp.async.bulk.tensor` with the
  tensor map the launcher encodes for (tensor, box, swizzle); the box is the tile, the
  swizzle the destination buffer's.  Loads signal the pipeline's full barrier of the stage
  held (or the raw mbarrier given); stores join a bulk group (`cp.async.bulk.commit_group`).
- `cp_async`: the tile is cut in 16-byte chunks spread over the group's threads; chunks
  past the tensor's edge copy 0 source bytes, which zero-fills them.
- `ldmatrix`: x4 (or x2) loads per 16x16 A block / pair of 16x8 B blocks, `.trans` when the
  operand's K dimension is not the contiguous one in shared memory.
- `load` / `store`: each thread moves the elements its registers hold, in vectors of up to
  16 bytes where alignment is provable; global accesses are bounds-checked (zero-filled
  loads, clipped stores) and only one replica of each element stores.
"""

from __future__ import annotations

from cake_core.ir import symbolic as S
from cake_core.ir.kernel import Op
from cake_core.ir.symbolic import Const, SymExpr, divides, mul
from cake_core.ir.types import BarrierType, FragLayout, FragmentType, PipelineType, SmemType
from cake_core.ir.values import elements
from cake_core.lower import layout_rules
from cake_core.lower.context import FragVar, LowerContext, SmemRef, TileRef, add
from cake_core.lower.context import mul as smul
from cake_core.lower.emitter import c_identifier
from cake_core.lower.fragments import Nest, coord, frag_result, index, nest
from cake_core.lower.layout_rules import with_layouts
from cake_core.lower.layouts import LANE, THREAD_RANK, WARP_RANK, WG_RANK, ZERO, cvar
from cake_core.lower.plan import LowerError
from cake_core.primitives.registry import multicast_mask


def _squeeze(shape: tuple[int, ...]) -> tuple[int, ...]:
    i = 0
    while i < len(shape) - 1 and shape[i] == 1:
        i += 1
    return shape[i:]


# --- TMA --------------------------------------------------------------------------------------
def _box_start(ctx: LowerContext, op: Op, arg: str, ref: SmemRef) -> str:
    g, v = ref.geometry, ref.view
    at = op.arg_spans.get(arg, op.span)
    if v.transposed or v.col0 != Const(0) or v.cols != g.cols or g.layout.pad:
        raise LowerError(at, "TMA moves whole rows of an unpadded buffer: this view is a "
                         "column slice, transposed or padded")
    align = 8 * g.layout.swizzle if g.layout.swizzle else 128
    if not divides(mul(v.row0, Const(g.pitch)), align):
        raise LowerError(at, f"the TMA box must start {align}-byte aligned in shared memory "
                         "and the lowering cannot prove this view does")
    return "smem_u32 + " + ctx.smem_offset(ref, ZERO, ZERO, swizzled=False)


def _coords(ctx: LowerContext, tile: TileRef) -> str:
    return ", ".join(ctx.tile_origin(tile, d) for d in reversed(range(len(tile.shape))))


def tma_load(op: Op, ctx: LowerContext) -> str:
    ref = ctx.smem_ref(op, "dst")
    tile = ctx.tile(op, "src")
    dst = _box_start(ctx, op, "dst", ref)
    spec = ctx.tmap(tile, ref.swizzle)
    bar_v = op.args["bar"]
    if isinstance(bar_v.type, PipelineType):
        _, names = ctx.pipe(bar_v)
        bar = f"{names['full']} + 8 * {names['acquire']}.held"
    else:
        assert isinstance(bar_v.type, BarrierType)
        bar = ctx.barrier(bar_v)
    ctx.features.update({"tma", "mbarrier"})
    mask = multicast_mask(op)
    if mask:
        return ctx.leader(f"cake_tma_load_mc_{spec.rank}d({dst}, &{spec.cname}, {bar}, "
                          f"{mask}, {_coords(ctx, tile)});")
    return ctx.leader(f"cake_tma_load_{spec.rank}d({dst}, &{spec.cname}, {bar}, "
                      f"{_coords(ctx, tile)});")


def tma_store(op: Op, ctx: LowerContext) -> str:
    ref = ctx.smem_ref(op, "src")
    tile = ctx.tile(op, "dst")
    tile.tensor.written = True
    src = _box_start(ctx, op, "src", ref)
    spec = ctx.tmap(tile, ref.swizzle)
    ctx.features.add("tma")
    return ctx.leader(f"cake_tma_store_{spec.rank}d(&{spec.cname}, {src}, {_coords(ctx, tile)}); "
                      "cake_bulk_commit();")


def tma_store_wait(op: Op, ctx: LowerContext) -> str:
    ctx.features.add("tma")
    return ctx.leader(f"cake_bulk_wait_read<{_const(op, 'n')}>();")


def _const(op: Op, arg: str) -> int:
    v = op.args[arg]
    c = v.sym.const if v.sym is not None else None
    if c is None:
        raise LowerError(op.arg_spans.get(arg, op.span), f"`{arg}` must be a constant")
    return c


# --- cp.async -----------------------------------------------------------------------------------
def cp_async(op: Op, ctx: LowerContext) -> str:
    ref = ctx.smem_ref(op, "dst")
    tile = ctx.tile(op, "src")
    g, v = ref.geometry, ref.view
    at = op.arg_spans.get("dst", op.span)
    es = g.esize
    per_chunk = 16 // es
    if v.transposed or (v.cols * es) % 16 or g.pitch % 16 or not divides(v.col0, per_chunk):
        raise LowerError(at, "cp.async moves 16-byte chunks: the destination rows must be "
                         "16-byte multiples at 16-byte aligned columns")
    if tile.offset is not None and not divides(tile.offset[-1], per_chunk):
        raise LowerError(op.arg_spans.get("src", op.span),
                         f"cp.async moves 16-byte chunks: the tile's offset along its last "
                         f"dimension must be a multiple of {per_chunk} elements, and the "
                         "lowering cannot prove it is (use `load` for an unaligned offset)")
    sq = _squeeze(tile.shape)
    if sq[-1] != v.cols:
        raise LowerError(at, "the tile's rows and the buffer view's rows differ in length")
    if ctx.g.single:
        raise LowerError(op.span, "cp_async is spread over the role's threads")
    cpr = v.cols // per_chunk
    total = v.rows * cpr
    threads = ctx.g.threads
    per = -(-total // threads)
    q = ctx.loop_var("q")
    chunk, row, col = (ctx.loop_var(b) for b in ("chunk", "crow", "ccol"))
    local = [*_unflatten(cvar(row), sq[:-1]), cvar(col)]
    _, idx, lin, ok = ctx.global_index(tile, local)
    ext = ctx.sym(tile.tensor.shape[-1])
    nbytes = "16u" if divides(tile.tensor.shape[-1], per_chunk) else \
        f"min(16u, uint32_t({ext} - ({idx[-1]})) * {es}u)"
    ptr = tile.tensor.cname
    dst = "smem_u32 + " + ctx.smem_offset(ref, cvar(row), cvar(col))
    guard = f"if ({chunk} < {total}) " if total % threads else ""
    ctx.features.add("cp_async")
    first = ctx.linear(S.add(THREAD_RANK, S.mul(cvar(q), Const(threads)))) if per > 1 \
        else "thread_rank"
    body = (f"const int {chunk} = {first}; "
            f"{guard}{{ const int {row} = {chunk} / {cpr}, {col} = {chunk} % {cpr} * {per_chunk}; "
            f"const bool ok = {ok}; "
            f"cake_cp_async_16({dst}, ok ? static_cast<const void*>({ptr} + {lin}) : "
            f"static_cast<const void*>({ptr}), ok ? {nbytes} : 0u); }}")
    header = f"CAKE_FOR({q}, {per}) " if per > 1 else ""
    return f"{header}{{ {body} }}"


def _unflatten(row: SymExpr, dims: tuple[int, ...]) -> list[SymExpr]:
    """Indices of the tile's leading dimensions from a flat row number."""
    out: list[SymExpr] = []
    inner = 1
    for i in reversed(range(len(dims))):
        e = row if inner == 1 else S.floordiv(row, Const(inner))
        if i > 0:
            e = S.mod(e, Const(dims[i]))
        out.append(e)
        inner *= dims[i]
    out.reverse()
    return out


def cp_async_commit(op: Op, ctx: LowerContext) -> str:
    ctx.features.add("cp_async")
    return "cake_cp_async_commit();"


def cp_async_wait(op: Op, ctx: LowerContext) -> str:
    ctx.features.add("cp_async")
    return f"cake_cp_async_wait<{_const(op, 'n')}>();"


# --- ldmatrix -------------------------------------------------------------------------------
def _term(var: str | None, k: int) -> SymExpr:
    return S.mul(cvar(var), Const(k)) if var is not None else ZERO


def _idx(var: str | None, k: int) -> str:
    return smul(var, k) if var is not None else "0"


@with_layouts(layout_rules.mma_operand)
def ldmatrix(op: Op, ctx: LowerContext) -> str:
    """Lane l addresses row l % 8 of matrix l / 8 (PTX ISA 9.7.14.5.15).

    A (M, K) blocks of 16x16, registers a0..a3 = (rows 0-7, k 0-7), (rows 8-15, k 0-7),
    (rows 0-7, k 8-15), (rows 8-15, k 8-15) as mma.m16n8k16 wants them.  B (K, N) pairs of
    16x8 blocks, registers b0, b1 of tile n and of tile n + 1.  The plain form reads rows
    whose elements run along K; `.trans` reads rows running along M or N.
    """
    ref = ctx.smem_ref(op, "src")
    fv, decl = ctx.define(op, 0)
    t = op.results[0].type
    assert isinstance(t, FragmentType)
    rows, cols = fv.shape
    at = op.arg_spans.get("src", op.span)
    if rows % 16 or cols % 16:
        raise LowerError(at, f"ldmatrix operands are lowered in 16x16 blocks, not {fv.shape}")
    trans = ref.view.transposed
    ctx.features.add("ldmatrix")
    mat = S.floordiv(LANE, Const(8))                   # the 8x8 matrix this lane addresses
    r8 = S.mod(LANE, Const(8))                         # its row in that matrix
    lo8 = S.mul(S.mod(mat, Const(2)), Const(8))        # (i % 2) * 8
    hi8 = S.mul(S.floordiv(mat, Const(2)), Const(8))   # (i / 2) * 8
    if t.layout == FragLayout.MMA_A:
        mtiles, ktiles = rows // 16, cols // 16
        mt = ctx.loop_var("mt") if mtiles > 1 else None
        kt = ctx.loop_var("kt") if ktiles > 1 else None
        if not trans:  # K contiguous: lanes 0-15 rows m0.., lanes 16-31 the same rows at k0 + 8
            prow = S.add(_term(mt, 16), S.mod(LANE, Const(16)))
            pcol = S.add(_term(kt, 16), S.mul(S.floordiv(LANE, Const(16)), Const(8)))
        else:  # stored (K, M): matrix i at k0 + (i / 2) * 8, m0 + (i % 2) * 8
            prow, pcol = S.add(S.add(_term(kt, 16), hi8), r8), S.add(_term(mt, 16), lo8)
        fn = "cake_ldmatrix_x4_trans" if trans else "cake_ldmatrix_x4"
        reg = add(_idx(mt, ktiles * 4), _idx(kt, 4))
        hdr = (f"CAKE_FOR({mt}, {mtiles}) " if mt else "") + \
              (f"CAKE_FOR({kt}, {ktiles}) " if kt else "")
        addr = "smem_u32 + " + ctx.smem_offset(ref, prow, pcol)
        return f"{decl}{hdr}{fn}(&{fv.cname}[{reg}], {addr});"
    ktiles, ntiles = rows // 16, cols // 8
    kt = ctx.loop_var("kt") if ktiles > 1 else None
    suffix = "" if trans else "_trans"
    khdr = f"CAKE_FOR({kt}, {ktiles}) " if kt else ""
    out = [decl]

    def address(n0: SymExpr) -> str:
        if trans:  # stored (N, K): matrix i rows n0 + (i / 2) * 8, k0 + (i % 2) * 8
            prow, pcol = S.add(S.add(n0, hi8), r8), S.add(_term(kt, 16), lo8)
        else:  # stored (K, N): .trans, matrix i rows k0 + (i % 2) * 8, n0 + (i / 2) * 8
            prow, pcol = S.add(S.add(_term(kt, 16), lo8), r8), S.add(n0, hi8)
        return "smem_u32 + " + ctx.smem_offset(ref, prow, pcol)

    pairs = ntiles // 2
    if pairs:
        np_ = ctx.loop_var("np") if pairs > 1 else None
        reg = add(_idx(kt, ntiles * 2), _idx(np_, 4))
        hdr = khdr + (f"CAKE_FOR({np_}, {pairs}) " if np_ else "")
        out.append(f"{hdr}cake_ldmatrix_x4{suffix}(&{fv.cname}[{reg}], {address(_term(np_, 16))});")
    if ntiles % 2:
        reg = add(_idx(kt, ntiles * 2), str((ntiles - 1) * 2))
        out.append(f"{khdr}cake_ldmatrix_x2{suffix}(&{fv.cname}[{reg}], "
                   f"{address(Const((ntiles - 1) * 8))});")
    return " ".join(x for x in out if x)


# --- register loads and stores ----------------------------------------------------------------
def load(op: Op, ctx: LowerContext) -> str:
    fv, decl = frag_result(ctx, op)
    return decl + _access(op, ctx, fv, "src", store=False)


def load_scalar(op: Op, ctx: LowerContext) -> str:
    """`const int n = __ldg(T + i);` in every thread: one address for the whole block, so
    one L1 line serves it and the value is uniform.  The read-only path is right because a
    kernel that also writes the tensor is refused (CK329).  The index is not bounds-checked
    (an out-of-range index faults, as the simulator reports)."""
    t = op.args["src"]
    tensor = ctx.tensors[t.name]
    idx = tuple(e.sym if e.sym is not None else S.Var(e.name)
                for e in elements(op.args["index"]))
    one = TileRef(tensor, (1,) * len(idx), idx)
    _, _, lin, _ = ctx.global_index(one, [])
    names = ctx.plan.bindings.names_of(op) or (op.results[0].name,)
    hit = ctx.lookup(("var", names[0]))
    if isinstance(hit, str):
        cname, decl = hit, ""
    else:
        cname, decl = ctx.names.internal(c_identifier(names[0])), "int "
    for name in names:
        ctx.declare(("var", name), cname)
    return f"{decl}{cname} = int(__ldg({tensor.cname} + {lin}));"


def store(op: Op, ctx: LowerContext) -> str:
    fv = ctx.frag(op, "src")
    if fv.dist.opaque:
        raise LowerError(op.arg_spans.get("src", op.span),
                         "mma.sync operand fragments cannot be stored")
    return _access(op, ctx, fv, "dst", store=True)


def _access(op: Op, ctx: LowerContext, fv: FragVar, arg: str, *, store: bool) -> str:
    """Each thread loads or stores the elements its registers hold."""
    mem = op.args[arg]
    at = op.arg_spans.get(arg, op.span)
    dist, name, ctype = fv.dist, fv.cname, fv.ctype
    loops = dist.loops
    es = fv.dtype.bytes
    vec = loops[-1] if loops and loops[-1].step == 1 and loops[-1].extent > 1 and \
        dist.axes and loops[-1].axis == dist.axes[-1] else None
    width = vec.extent if vec is not None else 1
    smem = isinstance(mem.type, SmemType)
    ref = ctx.smem_ref(op, arg) if smem else None
    tile = None if smem else ctx.tile(op, arg)
    if vec is not None:  # one access of `width` elements needs provable alignment
        if ref is not None:
            g, v = ref.geometry, ref.view
            aligned = not v.transposed and g.pitch % (width * es) == 0 and divides(v.col0, width)
        else:
            assert tile is not None
            aligned = tile.shape[-1] % width == 0 and divides(tile.tensor.shape[-1], width) \
                and (tile.offset is None or divides(tile.offset[-1], width)) \
                and (tile.limit is None or divides(tile.limit[-1], width))
        if not aligned or (width * es) not in (2, 4, 8, 16):
            vec, width = None, 1
    full = nest(ctx, loops)
    fixed = {vec.var: 0} if vec is not None else None
    outer = Nest(tuple(lp for lp in loops if lp is not vec), full.names)
    coords: list[SymExpr] = [coord(dist, a, full, fixed) if a is not None else ZERO
                             for a in dist.axes]
    lead = 0
    while lead < len(fv.shape) - 1 and fv.shape[lead] == 1:
        lead += 1
    local = coords[lead:]
    reg = index(dist, full, fixed)
    p = dist.parent
    conds: list[str] = []
    if store and dist.owner != "true":
        conds.append(dist.owner)
    if not p.row_valid and 0 in dist.used_axes:
        conds.append(f"{ctx.sym(coord(dist, 0, full, fixed))} < {p.shape[0]}")
    if not p.col_valid and 1 in dist.used_axes:
        conds.append(f"{ctx.sym(coord(dist, 1, full, fixed))} < {p.shape[1]}")
    decls = ""
    if ref is not None:
        if len(local) > 2:
            raise LowerError(at, "shared-memory loads and stores are lowered for 1-D and 2-D "
                             "views")
        r, c = (ZERO, local[0]) if len(local) == 1 else (local[0], local[1])
        if ref.view.transposed:
            r, c = c, r
        off = ctx.smem_offset(ref, r, c)
        ptr = f"reinterpret_cast<{'' if store else 'const '}{ctype}*>(smem + {off})"
        cond = " && ".join(conds)
        if store and cond and (width * es) in (4, 8, 16):
            stmt = f"cake_store_shared_if<{width}>(smem_u32 + {off}, &{name}[{reg}], {cond});"
            conds = []
        elif width > 1:
            fn = "cake_store_vec" if store else "cake_load_vec"
            stmt = f"{fn}<{width}>({ptr}, &{name}[{reg}]);"
        else:
            stmt = f"*{ptr} = {name}[{reg}];" if store else f"{name}[{reg}] = *{ptr};"
        if not store and conds:  # rows or columns past the fragment read as zero
            stmt = (f"if ({cond}) {{ {stmt} }} else {{ " +
                    " ".join(f"{name}[{reg} + {k}] = {ctype}{{}};" for k in range(width)) + " }")
            conds = []
    else:
        assert tile is not None
        if store:
            tile.tensor.written = True
        if len(local) > len(tile.shape):
            raise LowerError(at, "the fragment has more dimensions than the tile")
        decls, _, lin, ok = ctx.global_index(tile, local, named=True)
        if ok != "true":
            conds.append(ok)
        ptr = f"{tile.tensor.cname} + {lin}"
        cond = " && ".join(conds)
        if cond:  # predicated PTX, not a branch (see cake_store_global_if)
            fn = "cake_store_global_if" if store else "cake_load_global_if"
            stmt = f"{fn}<{width}>({ptr}, &{name}[{reg}], {cond});"
        elif store:
            stmt = (f"cake_store_vec<{width}>({ptr}, &{name}[{reg}]);" if width > 1 else
                    f"{tile.tensor.cname}[{lin}] = {name}[{reg}];")
        else:
            stmt = (f"cake_load_vec<{width}>({ptr}, &{name}[{reg}]);" if width > 1 else
                    f"{name}[{reg}] = {tile.tensor.cname}[{lin}];")
        conds = []
    guarded = f"if ({' && '.join(conds)}) {stmt}" if conds else stmt
    body = f"{decls}{guarded}"
    return f"{outer.header}{{ {body} }}" if decls else f"{outer.header}{body}"


__all__ = ["cp_async", "cp_async_commit", "cp_async_wait", "ldmatrix", "load", "load_scalar",
           "stmatrix",
           "store", "tma_load", "tma_store", "tma_store_wait"]


# --- stmatrix -------------------------------------------------------------------------------
def stmatrix(op: Op, ctx: LowerContext) -> str:
    """One x4 per 16x16 block of the part, per 64-row wgmma slab (PTX ISA 9.7.14.5.16).

    In a wgmma accumulator (`layouts.wgmma_acc`) warp w of a warpgroup holds rows
    16 * (w % 4) .. + 15 of each slab; lane l holds row l / 4 (+ 8) and columns
    2 * (l % 4) + {0, 1} of every 8-column block j, in registers 4 * j + 2 * i + c.  So the
    four 8x8 matrices (rows +0 / +8) x (columns 8j / 8j + 8) that one x4 stores are the
    eight consecutive registers from 4 * j, in the instruction's register order, and lane l
    addresses row l % 8 of matrix i = l / 8: rows + 8 * (i % 2), columns 8 * (j + i / 2).
    The address goes through the view's layout (`smem_offset`: the swizzle TMA uses).
    """
    ref = ctx.smem_ref(op, "dst")
    fv = ctx.frag(op, "src")
    at = op.arg_spans.get("src", op.span)
    p = fv.dist.parent
    if p.kind != "wgmma_acc" or fv.dist.axes != (0, 1):
        raise LowerError(at, "stmatrix is lowered for wgmma accumulator fragments")
    rows, width = ref.view.rows, ref.view.cols
    trans = ref.view.transposed
    if trans:
        rows, width = width, rows
    m, n = p.shape
    slab_loop = p.loops[0]
    slabs = slab_loop.extent
    wgs = m // (slabs * 64)
    if rows != m or width % 16 or n % width:
        raise LowerError(op.arg_spans.get("dst", op.span),
                         f"stmatrix stores ({m}, k * 16) parts of a ({m}, {n}) fragment, "
                         f"not ({rows}, {width})")
    part_v = op.args["part"]
    if part_v.sym is None:
        raise LowerError(op.arg_spans.get("part", op.span), "`part` must be an int")
    ctx.features.add("stmatrix")
    mat = S.floordiv(LANE, Const(8))
    r8 = S.mod(LANE, Const(8))
    row = S.add(S.mul(S.mod(WARP_RANK, Const(4)), Const(16)),
                S.mul(S.mod(mat, Const(2)), Const(8)))  # first row of the lane's matrix
    if wgs > 1:
        row = S.add(S.mul(WG_RANK, Const(m // wgs)), row)
    mv = ctx.loop_var("m") if slabs > 1 else None
    qv = ctx.loop_var("q") if width > 16 else None
    row = S.add(_term(mv, 64), row)
    col = S.add(_term(qv, 16), S.mul(S.floordiv(mat, Const(2)), Const(8)))
    if trans:  # stored (cols, rows): lane l addresses stored row l % 8 of matrix l / 8
        prow, pcol = S.add(col, r8), row
    else:
        prow, pcol = S.add(row, r8), col
    addr = "smem_u32 + " + ctx.smem_offset(ref, prow, pcol)
    part = ctx.sym(part_v.sym)
    reg = add(add(_idx(mv, n // 8 * 4), smul(f"({part})", width // 2)), _idx(qv, 8))
    hdr = (f"CAKE_FOR({mv}, {slabs}) " if mv else "") + (f"CAKE_FOR({qv}, {width // 16}) "
                                                         if qv else "")
    fn = "cake_stmatrix_x4_trans" if trans else "cake_stmatrix_x4"
    return f"{hdr}{fn}({addr}, &{fv.cname}[{reg}]);"
