"""Data movement: TMA, cp.async, ldmatrix, stmatrix and plain loads/stores."""

from __future__ import annotations

from cake_core.diagnostics import codes
from cake_core.diagnostics.model import Applicability, Fix, TextEdit
from cake_core.hardware import Feature
from cake_core.ir.types import (
    BarrierType,
    DType,
    ErrorType,
    FragLayout,
    FragmentType,
    IntType,
    NoneType,
    PipelineType,
    Shape,
    SmemType,
    TensorType,
    TileType,
    TupleType,
    Type,
    shape_str,
)
from cake_core.ir.values import elements
from cake_core.primitives.facets import FacetModules
from cake_core.primitives.registry import EffectSpec, Primitive, SmemAccess, param
from cake_core.primitives.traits import Trait
from cake_core.primitives.typecheck import CallContext, same_shape
from cake_core.source import Span

#: Where this family's facets live; each primitive names its own attribute.
_FACETS = FacetModules(cost="cake_core.ops.copy.cost",
                       simulate="cake_core.ops.copy.sim",
                       lower="cake_core.ops.copy.lower")


def squeeze_leading(shape: Shape) -> Shape:
    """`shape` without its leading extents of 1 (at least one extent is kept).

    A copy moves elements in order, so `(1, BM, D)` and `(BM, D)` hold the same elements:
    a tile of a batched rank-3 tensor fills a 2-D buffer, as a TMA box with a unit
    leading extent does.
    """
    if len(shape) < 2 or shape[0].const != 1:
        return shape  # nothing to drop: the common case
    i = 0
    while i < len(shape) - 1 and shape[i].const == 1:
        i += 1
    return shape[i:]


def copy_shapes_match(a: Shape, b: Shape) -> bool:
    """Whether a copy between shapes `a` and `b` is well formed (leading 1s ignored)."""
    return same_shape(squeeze_leading(a), squeeze_leading(b))


def _same_elements(ctx: CallContext, dst: str, src: str, what: str) -> bool:
    d, s = ctx.type(dst), ctx.type(src)
    assert isinstance(d, SmemType | TileType | FragmentType)
    assert isinstance(s, SmemType | TileType | FragmentType)
    if d.dtype != s.dtype:
        ctx.error(codes.DTYPE_MISMATCH,
                  f"{what} copies {s.dtype.value} into a {d.dtype.value} buffer; "
                  "copies do not convert (use cast() on a fragment)", src)
        return False
    if copy_shapes_match(s.shape, d.shape):
        return True
    ctx.error(codes.SHAPE_MISMATCH,
              f"{what}: `{src}` has shape {shape_str(s.shape)}, expected {shape_str(d.shape)}",
              src, notes=["shapes are compared after dropping leading extents of 1"])
    return False


def _unlimited(ctx: CallContext, name: str, what: str) -> bool:
    """CK330: TMA and cp.async clip at the tensor's edges (the tensor map's bounds, the
    source-size operand), never at a bound inside the tensor, so a `limit=` tile would be
    read or written past its limit."""
    t = ctx.type(name)
    if not isinstance(t, TileType) or not t.limited:
        return True
    engine = "cp.async" if what == "cp_async" else "TMA"
    fix = ("store from registers with `store(tile, fragment)`, which drops the elements "
           "past the limit" if what == "tma_store" else "load into registers with "
           "`load(tile)`, which reads zeros past the limit")
    ctx.error(codes.LIMITED_TILE_ASYNC_COPY,
              f"{what} cannot honour this tile's `limit=` ({engine} clips at the tensor's "
              f"edges only): {fix}, or drop `limit=` (keep `offset=`) and mask the elements "
              "past the bound with `where`", name)
    return False


def _tma_load_rule(ctx: CallContext) -> Type:
    if not _same_elements(ctx, "dst", "src", "tma_load") or \
            not _unlimited(ctx, "src", "tma_load"):
        return ErrorType()
    bar = ctx.type("bar")
    if isinstance(bar, BarrierType) and bar.n > 1 and not bar.indexed:
        return ctx.error(codes.BAD_INDEX, "`bar` is an array of mbarriers; index it with the "
                         "stage: `bars[s]`", "bar")
    mask = ctx.int("multicast")
    if mask is None:
        return ctx.error(codes.NOT_CONSTANT, "`multicast` is a compile-time mask of cluster "
                         "ranks", "multicast")
    if not 0 <= mask < 1 << 16:
        return ctx.error(codes.BAD_ARGUMENTS, f"`multicast` is a mask of up to 16 cluster "
                         f"ranks, not {mask}", "multicast")
    return NoneType()



def _tma_store_rule(ctx: CallContext) -> Type:
    return NoneType() if _same_elements(ctx, "dst", "src", "tma_store") and \
        _unlimited(ctx, "dst", "tma_store") else ErrorType()


def _cp_async_rule(ctx: CallContext) -> Type:
    return NoneType() if _same_elements(ctx, "dst", "src", "cp_async") and \
        _unlimited(ctx, "src", "cp_async") else ErrorType()


def _group_wait_rule(ctx: CallContext) -> Type:
    n = ctx.int("n")
    if n is None:
        return ctx.error(codes.NOT_CONSTANT, "the number of pending groups must be a "
                         "compile-time constant", "n")
    if n < 0:
        return ctx.error(codes.BAD_ARGUMENTS, f"cannot wait for {n} pending groups", "n")
    return NoneType()


def _none_rule(ctx: CallContext) -> Type:
    return NoneType()


def _ldmatrix_rule(ctx: CallContext) -> Type:
    src = ctx.type("src")
    assert isinstance(src, SmemType)
    if src.dtype.bits != 16:
        return ctx.error(codes.DTYPE_MISMATCH, f"ldmatrix moves 16-bit elements; `src` is "
                         f"{src.dtype.value}", "src")
    if len(src.shape) != 2:
        return ctx.error(codes.SHAPE_MISMATCH, "ldmatrix reads a 2-D view", "src")
    rows, cols = (d.const for d in src.shape)
    if rows is None or cols is None or rows % 8 or cols % 8:
        return ctx.error(codes.SHAPE_MISMATCH,
                         f"ldmatrix reads whole 8x8 matrices; {shape_str(src.shape)} is not a "
                         "multiple of (8, 8)", "src")
    # A `.T` view of a K-major (N, K) tile is how a kernel spells the B operand.
    layout = FragLayout.MMA_B if src.transposed else FragLayout.MMA_A
    return FragmentType(src.dtype, src.shape, layout)


# --- stmatrix ---------------------------------------------------------------------------------
def _stmatrix_rule(ctx: CallContext) -> Type:
    """Checks what the x4 instruction can store: 16-bit pairs of an accumulator fragment,
    whole 8x8 matrices, and a destination that is one `part` of the fragment's columns."""
    dst, src = ctx.type("dst"), ctx.type("src")
    assert isinstance(dst, SmemType)
    assert isinstance(src, FragmentType)
    if src.layout != FragLayout.WGMMA_ACC:
        return ctx.error(codes.TYPE_MISMATCH,
                         f"stmatrix stores a wgmma_acc fragment (the cast of a wgmma "
                         f"accumulator); `src` has layout {src.layout.value}", "src")
    if src.dtype.bits != 16:
        at = ctx.at("src")
        convert = Fix(f"convert with cast(..., {dst.dtype.value})",
                      (TextEdit(Span(at.start, at.start), "cast("),
                       TextEdit(Span(at.end, at.end), f", {dst.dtype.value})")),
                      Applicability.UNSAFE)
        return ctx.error(codes.DTYPE_MISMATCH, f"stmatrix moves 16-bit elements; `src` is "
                         f"{src.dtype.value}: convert first with cast()", "src",
                         fixes=[convert] if dst.dtype.bits == 16 else [])
    if dst.dtype != src.dtype:
        return ctx.error(codes.DTYPE_MISMATCH, f"stmatrix stores a {src.dtype.value} fragment "
                         f"into a {dst.dtype.value} buffer; stores do not convert", "src")
    if len(dst.shape) != 2 or len(src.shape) != 2:
        return ctx.error(codes.SHAPE_MISMATCH, "stmatrix stores a 2-D fragment into a 2-D view",
                         "dst")
    rows, cols = (d.const for d in dst.shape)
    frows, fcols = (d.const for d in src.shape)
    if rows is None or cols is None or frows is None or fcols is None:
        return ctx.error(codes.NOT_CONSTANT, "stmatrix shapes must be compile-time constants",
                         "dst")
    if cols % 16:
        return ctx.error(codes.SHAPE_MISMATCH,
                         f"stmatrix stores pairs of 8x8 matrices side by side: the view's "
                         f"{cols} columns are not a multiple of 16", "dst")
    if rows != frows or fcols % cols:
        return ctx.error(codes.SHAPE_MISMATCH,
                         f"stmatrix stores a ({rows}, {cols}) part of the fragment; "
                         f"{shape_str(src.shape)} does not split into parts of "
                         f"{shape_str(dst.shape)}", "dst",
                         notes=["the view has the fragment's rows and a whole fraction of "
                                "its columns; `part` selects which"])
    parts = fcols // cols
    part = ctx.int("part")
    if part is not None and not 0 <= part < parts:
        return ctx.error(codes.BAD_INDEX, f"`part` {part} is out of range: the fragment has "
                         f"{parts} part(s) of {cols} columns", "part")
    return NoneType()


def _load_rule(ctx: CallContext) -> Type:
    src = ctx.type("src")
    assert isinstance(src, SmemType | TileType)
    return FragmentType(src.dtype, src.shape, FragLayout.ROWS)


def _load_scalar_rule(ctx: CallContext) -> Type:
    """An element of an integer tensor, addressed by one index per dimension: the value
    becomes an `int` (a loop bound, a tile coordinate), so it must be an integer, and an
    index per dimension is what makes it one element rather than a tile."""
    src = ctx.type("src")
    assert isinstance(src, TensorType)
    if not src.dtype.is_int:
        return ctx.error(codes.DTYPE_MISMATCH,
                         f"`load_scalar` reads an integer (a count, an offset) into an int; "
                         f"`{ctx.value('src').name}` holds {src.dtype.value}", "src",
                         notes=["load float data as a tile: `load(X.tile(...))`"])
    idx = elements(ctx.value("index"))
    if len(idx) != len(src.shape):
        return ctx.error(codes.BAD_INDEX,
                         f"`index` has {len(idx)} coordinate{'s' if len(idx) != 1 else ''} "
                         f"for the rank-{len(src.shape)} tensor "
                         f"`{ctx.value('src').name}` {shape_str(src.shape)}: give one per "
                         "dimension", "index")
    for e in idx:
        if not isinstance(e.type, IntType):
            return ctx.error(codes.TYPE_MISMATCH, f"`load_scalar` indices must be ints, got "
                             f"{e.type.describe()}", "index")
    expect = ctx.value("expect")
    if isinstance(expect.type, IntType) and (expect.sym is None
                                             or not expect.sym.is_launch_constant):
        return ctx.error(codes.NOT_CONSTANT,
                         "`expect` is the value the cost model prices, so it must be known "
                         "at launch (constants and dims)", "expect",
                         notes=["e.g. the mean rows per expert: `expect=M // G`"])
    return IntType()


def _store_rule(ctx: CallContext) -> Type:
    dst, src = ctx.type("dst"), ctx.type("src")
    assert isinstance(dst, SmemType | TileType)
    assert isinstance(src, FragmentType)
    if dst.dtype != src.dtype:
        at = ctx.at("src")
        convert = Fix(f"convert with cast(..., {dst.dtype.value})",
                      (TextEdit(Span(at.start, at.start), "cast("),
                       TextEdit(Span(at.end, at.end), f", {dst.dtype.value})")),
                      Applicability.UNSAFE)  # rounds: a numerical decision
        return ctx.error(codes.DTYPE_MISMATCH,
                         f"store writes a {src.dtype.value} fragment into {dst.dtype.value} "
                         f"memory; convert first: cast(x, {dst.dtype.value})", "src",
                         fixes=[convert])
    if not copy_shapes_match(dst.shape, src.shape):
        return ctx.error(codes.SHAPE_MISMATCH,
                         f"store: fragment {shape_str(src.shape)} does not match the destination "
                         f"{shape_str(dst.shape)}", "src")
    return NoneType()


_DTYPES_16 = (DType.F16, DType.BF16)

PRIMITIVES = (
    Primitive(
        "tma_load", "copy",
        (param("dst", SmemType), param("src", TileType),
         param("bar", PipelineType, BarrierType),
         param("multicast", IntType, default=0, const=True,
               doc="mask of cluster ranks that receive the box (0: this block only)")),
        _tma_load_rule,
        """Asynchronously copy a global tile into shared memory with the Tensor Memory Accelerator.

Completion is signalled on `bar`: a pipeline (its full barrier for the current stage,
whose expected transaction bytes the compiler derives) or a raw mbarrier that the
kernel has armed with `expect_tx`.  One elected thread issues the copy.

```python
tma_load(sa[s], A.tile((BM, BK), (block.x, k)), ab)
```

`multicast=mask` (sm_90, in a cluster) delivers the box to the same smem offset in every
block whose cluster rank is set in `mask`, completing on the barrier at the same offset
in each.  Every block of the mask is expected to issue its own slice to the same mask,
so each receives `popcount(mask)` boxes: a pipeline arms its stage with that many bytes,
and a raw barrier's `expect_tx` must count them.  Peers' barriers must be published by
`cluster_sync()` first (CK323), and the kernel must end with `cluster_sync()` (CK324).""",
        effects=EffectSpec(reads=("src",), writes=("dst",), async_group="tma", arrives="bar",
                           tx_bytes=True, global_tile="src",
                           smem_access=(("dst", SmemAccess.TMA),), multicast="multicast"),
        requires=frozenset({Feature.TMA}), facets=_FACETS.of("tma_load"),
        traits=frozenset({Trait.SINGLE_THREAD, Trait.TMA_COPY}),
        unsupported="on sm_80 use cp_async + cp_async_commit/cp_async_wait instead",
    ),
    Primitive(
        "tma_store", "copy",
        (param("dst", TileType), param("src", SmemType)),
        _tma_store_rule,
        """Asynchronously copy a shared-memory tile to global memory (bulk async group).

Generic-proxy writes to `src` must be made visible first with `fence_proxy_async()`; wait
for completion with `tma_store_wait(0)` before reusing `src`.""",
        effects=EffectSpec(reads=("src",), writes=("dst",), async_group="bulk_store",
                           global_tile="dst", smem_access=(("src", SmemAccess.TMA),)),
        requires=frozenset({Feature.TMA}), facets=_FACETS.of("tma_store"),
        traits=frozenset({Trait.SINGLE_THREAD, Trait.GLOBAL_STORE, Trait.TMA_COPY}),
        unsupported="on sm_80 store fragments with store() instead",
    ),
    Primitive(
        "tma_store_wait", "copy",
        (param("n", IntType, default=0, const=True),),
        _group_wait_rule,
        """Wait until at most `n` bulk TMA store groups of this thread are still pending.""",
        effects=EffectSpec(waits="bulk_store"),
        requires=frozenset({Feature.TMA}), facets=_FACETS.of("tma_store_wait"),
        unsupported=("bulk (TMA) stores need sm_90; on sm_80 store() writes synchronously and "
                     "needs no wait"),
        traits=frozenset({Trait.SINGLE_THREAD}),
    ),
    Primitive(
        "cp_async", "copy",
        (param("dst", SmemType), param("src", TileType)),
        _cp_async_rule,
        """Asynchronously copy a global tile into shared memory (LDGSTS, 16-byte chunks).

The copy joins the current cp.async group; close the group with `cp_async_commit()` and
wait for it with `cp_async_wait(n)` before reading `dst`.""",
        effects=EffectSpec(reads=("src",), writes=("dst",), async_group="cp_async",
                           global_tile="src", smem_access=(("dst", SmemAccess.CHUNKS),)),
        requires=frozenset({Feature.CP_ASYNC}), facets=_FACETS.of("cp_async"),
        unsupported="cp.async needs sm_80 or newer",
    ),
    Primitive(
        "cp_async_commit", "copy", (), _none_rule,
        """Close the current group of cp.async copies (cp.async.commit_group).""",
        effects=EffectSpec(fence="cp_async_commit"),
        requires=frozenset({Feature.CP_ASYNC}), facets=_FACETS.of("cp_async_commit"),
    ),
    Primitive(
        "cp_async_wait", "copy",
        (param("n", IntType, default=0, const=True),),
        _group_wait_rule,
        """Wait until at most `n` cp.async groups of this thread are still pending.

Each thread waits only for its own copies: follow with `syncthreads()` before reading data
other threads copied.""",
        effects=EffectSpec(waits="cp_async"),
        requires=frozenset({Feature.CP_ASYNC}), facets=_FACETS.of("cp_async_wait"),
    ),
    Primitive(
        "ldmatrix", "copy",
        (param("src", SmemType),),
        _ldmatrix_rule,
        """Load 8x8 16-bit matrices from shared memory into an mma.sync operand fragment.

The fragment has the view's logical shape.  A row-major (M, K) view gives an A operand
(layout mma_a); the `.T` of a K-major (N, K) view gives a (K, N) B operand (layout mma_b).
Both read rows that are contiguous along K, the plain form of the instruction; lowering
uses the `.trans` form when the operand's K dimension is not the contiguous one.

```python
a = ldmatrix(sa[s].tile((WM, 16), (wm, kk)))
b = ldmatrix(sb[s].tile((WN, 16), (wn, kk)).T)
```""",
        effects=EffectSpec(reads=("src",), smem_access=(("src", SmemAccess.LDMATRIX),)),
        requires=frozenset({Feature.LDMATRIX}), facets=_FACETS.of("ldmatrix"),
        traits=frozenset({Trait.REGISTER_STAGING, Trait.WARP_COLLECTIVE}),
    ),
    Primitive(
        "stmatrix", "copy",
        (param("dst", SmemType), param("src", FragmentType), param("part", IntType, default=0)),
        _stmatrix_rule,
        """Store 16-bit 8x8 matrices of an accumulator into shared memory (a warp collective).

`src` is a 16-bit `wgmma_acc` fragment, usually `cast(acc, bf16)`; `dst` is a 2-D view
with the fragment's rows and a whole fraction of its columns, and `part` (an int, may be
a loop variable) selects which columns: part `j` stores columns `[j * W, (j + 1) * W)` of
`src`, W the view's width.  Each warp stores the rows it holds, one
`stmatrix.sync.aligned.m8n8.x4` per 16x16 block, at lane addresses that follow the view's
layout (swizzle included); a `.T` view uses the `.trans` form.  The writes are ordinary
(generic-proxy) shared-memory writes: `fence_proxy_async()` by every writer, then a barrier,
before a `tma_store` reads them.

```python
for j in range(BN // EN):
    stmatrix(sc, cast(acc, bf16), j)   # columns j * EN .. of the accumulator
    fence_proxy_async()
    barrier_sync(1, 8)
    tma_store(C.tile((BM, EN), (block.x, block.y * (BN // EN) + j)), sc)
```""",
        signature_doc="stmatrix(dst, src, part=0)",
        effects=EffectSpec(reads=("src",), writes=("dst",),
                           smem_access=(("dst", SmemAccess.LDMATRIX),)),
        requires=frozenset({Feature.STMATRIX}), facets=_FACETS.of("stmatrix"),
        traits=frozenset({Trait.WARP_COLLECTIVE}),
        unsupported="stmatrix needs sm_90; on sm_80 store the fragment with store()",
    ),
    Primitive(
        "load", "copy",
        (param("src", SmemType, TileType),),
        _load_rule,
        """Load a global tile or a shared-memory view into a register fragment (vectorised).""",
        effects=EffectSpec(reads=("src",), global_tile="src",
                           smem_access=(("src", SmemAccess.ROWS),)),
        facets=_FACETS.of("load"), traits=frozenset({Trait.REGISTER_STAGING}),
    ),
    Primitive(
        "load_scalar", "copy",
        (param("src", TensorType), param("index", TupleType, IntType),
         param("expect", IntType, NoneType, default=None)),
        _load_scalar_rule,
        """Read one element of an integer tensor in global memory as a runtime `int`.

`index` gives one element index per dimension (elements, not tiles).  The result is an
i32 that every thread of the block reads from the same address, so it is uniform across
the block: it can be a tile coordinate, a loop bound, an `if` condition or a term of a
`where` mask.  This is how a kernel follows routing data it is given, such as the
per-expert row offsets of an MoE grouped GEMM:

```python
lo = load_scalar(Offsets, (block.z,))            # first row of expert block.z
hi = load_scalar(Offsets, (block.z + 1,))        # one past its last row
for t in range(cdiv(hi - lo, BM)):               # only the tiles the expert has
    ...
```

Lowered to a read-only global load (`__ldg`); an index outside the tensor is a fault in
the simulator (the lowering does not check it).  The cost model prices the load (4 bytes,
one serial round trip) but cannot know the value: `expect=` (constants and dims, e.g.
`expect=M // G`, the mean rows per expert) is the value it prices loop bounds and tile
coordinates at; it changes nothing else.  A loop bound read from memory without
`expect=` cannot be priced (`cake cost` says so); an `if` on the value is priced with both
sides taken, an upper bound.  Reading a tensor the kernel also writes is a race between
blocks (`CK329`).""",
        effects=EffectSpec(reads=("src",)),
        facets=_FACETS.of("load_scalar"),
        traits=frozenset({Trait.THREAD_LOCAL}),
    ),
    Primitive(
        "store", "copy",
        (param("dst", SmemType, TileType), param("src", FragmentType)),
        _store_rule,
        """Store a register fragment into a global tile (clipped at the tensor's edge) or smem.""",
        effects=EffectSpec(reads=("src",), writes=("dst",), global_tile="dst",
                           smem_access=(("dst", SmemAccess.ROWS),)),
        facets=_FACETS.of("store"),
        traits=frozenset({Trait.GLOBAL_STORE}),
    ),
)
