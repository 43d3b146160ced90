"""Allocations and views: smem buffers, register fragments, pipelines, mbarriers, tiles."""

from __future__ import annotations

from collections.abc import Callable

from cake_core.diagnostics import codes
from cake_core.hardware import Feature
from cake_core.ir.symbolic import SymExpr
from cake_core.ir.types import (
    BarrierType,
    DType,
    DTypeType,
    ErrorType,
    FragLayout,
    FragmentType,
    IntType,
    LayoutType,
    NoneType,
    PipelineType,
    ScalarType,
    SmemLayout,
    SmemType,
    StrType,
    TensorType,
    TileType,
    TupleType,
    Type,
    shape_str,
)
from cake_core.ir.values import elements
from cake_core.primitives.facets import FacetModules
from cake_core.primitives.registry import Primitive, param
from cake_core.primitives.traits import Trait
from cake_core.primitives.typecheck import CallContext

#: Where this family's facets live; each primitive names its own attribute.
_FACETS = FacetModules(cost="cake_core.ops.memory.cost",
                       simulate="cake_core.ops.memory.sim",
                       lower="cake_core.ops.memory.lower")


SHAPE_KINDS = (TupleType, IntType)


def _shape(ctx: CallContext, name: str) -> tuple[SymExpr, ...] | None:
    """A shape argument: an int or a tuple of ints, each a compile-time constant > 0."""
    v = ctx.value(name)
    elts = elements(v)
    dims: list[SymExpr] = []
    for e in elts:
        sym = e.sym
        if sym is None or not isinstance(e.type, IntType):
            ctx.error(codes.TYPE_MISMATCH, f"`{name}` must be a tuple of ints", name)
            return None
        c = sym.const
        if c is None:
            ctx.error(codes.NOT_CONSTANT,
                      f"`{name}` must be known at compile time; `{e.sym}` is not", name,
                      notes=["tile and buffer shapes are fixed when the kernel is compiled; "
                             "use constants such as BM = 128"])
            return None
        if c <= 0:
            ctx.error(codes.SHAPE_MISMATCH, f"`{name}` has a non-positive extent {c}", name)
            return None
        dims.append(sym)  # a Const: `c` is its value
    if not dims:
        ctx.error(codes.SHAPE_MISMATCH, f"`{name}` is empty", name)
        return None
    return tuple(dims)


def _dtype(ctx: CallContext, name: str) -> DType:
    return ctx.const(name)  # type: ignore[return-value]


def _smem_rule(ctx: CallContext) -> Type:
    shape = _shape(ctx, "shape")
    if shape is None:
        return ErrorType()
    layout = ctx.const("layout") if ctx.has("layout") else SmemLayout()
    if not isinstance(layout, SmemLayout):
        return ctx.error(codes.TYPE_MISMATCH, "`layout` must be a shared-memory layout "
                         "(row_major, col_major, swizzle(32|64|128), padded(n))", "layout")
    offset: int | None = None
    if ctx.has("offset"):
        offset = ctx.int("offset")
        if offset is None:
            return ctx.error(codes.NOT_CONSTANT, "`offset` must be a compile-time constant "
                             "byte offset", "offset")
        if offset < 0:
            return ctx.error(codes.BAD_ARGUMENTS, f"`offset` is a byte offset into the block's "
                             f"shared memory; it cannot be negative ({offset})", "offset")
    name = ctx.target or f"smem{ctx.span.start.offset}"
    ty = SmemType(_dtype(ctx, "dtype"), shape, layout, name, shape)
    ctx.kernel.add_smem(name, ty, ctx.span, offset,
                        ctx.at("offset") if offset is not None else None)
    return ty


def _fragment_rule(ctx: CallContext) -> Type:
    shape = _shape(ctx, "shape")
    if shape is None:
        return ErrorType()
    layout = ctx.const("layout") if ctx.has("layout") else FragLayout.ROWS
    if not isinstance(layout, FragLayout):
        return ctx.error(codes.TYPE_MISMATCH, "`layout` must be a fragment layout "
                         "(rows, mma_a, mma_b, mma_acc, wgmma_acc)", "layout")
    return FragmentType(_dtype(ctx, "dtype"), shape, layout)


def _pipeline_rule(ctx: CallContext) -> Type:
    stages = ctx.int("stages")
    if stages is None:
        return ctx.error(codes.NOT_CONSTANT, "`stages` must be a compile-time constant",
                         "stages")
    if stages < 1:
        return ctx.error(codes.BAD_ARGUMENTS, f"a pipeline needs at least 1 stage, not {stages}",
                         "stages")
    producer = ctx.const("producer")
    consumer = ctx.const("consumer")
    consumers: tuple[str, ...]
    if isinstance(consumer, str):
        consumers = (consumer,)
    elif isinstance(consumer, tuple) and all(isinstance(getattr(c, "const", None), str)
                                             for c in consumer):
        consumers = tuple(c.const for c in consumer)
    else:
        return ctx.error(codes.TYPE_MISMATCH, "`consumer` must be a role name or a tuple of "
                         "role names", "consumer")
    if not isinstance(producer, str):
        return ctx.error(codes.TYPE_MISMATCH, "`producer` must be a role name", "producer")
    name = ctx.target or f"pipe{ctx.span.start.offset}"
    ctx.kernel.add_barriers(name, 2 * stages, ctx.span)
    ctx.kernel.declare_pipeline(name, ctx.span)
    return PipelineType(name, stages, producer, consumers)


def _mbarrier_rule(ctx: CallContext) -> Type:
    count = ctx.int("count")
    n = ctx.int("n")
    if count is None or n is None:
        return ctx.error(codes.NOT_CONSTANT, "`count` and `n` must be compile-time constants")
    if count < 1:
        return ctx.error(codes.BAD_ARGUMENTS, "an mbarrier's arrival count must be >= 1",
                         "count")
    if n < 1:
        return ctx.error(codes.BAD_ARGUMENTS, "`n` must be >= 1", "n")
    name = ctx.target or f"bar{ctx.span.start.offset}"
    ctx.kernel.add_barriers(name, n, ctx.span)
    return BarrierType(name, count, n)


def _coords(ctx: CallContext, name: str, rank: int) -> bool:
    return _ints_per_dim(ctx, name, rank,
                         lambda n: f"`{name}` has {n} coordinates for a rank-{rank} tile",
                         "tile coordinates must be ints")


def _element_ints(ctx: CallContext, name: str, rank: int, what: str) -> bool:
    """`offset=` / `limit=`: one int per dimension, counted in elements (any kind of int:
    constants, dims, run-time ints such as `load_scalar` results)."""
    if not ctx.has(name):
        return True
    return _ints_per_dim(ctx, name, rank,
                         lambda n: f"`{name}` has {n} {'entry' if n == 1 else 'entries'} for "
                                   f"a rank-{rank} tile; give one {what} per dimension",
                         f"`{name}` entries must be ints (element counts)")


def _ints_per_dim(ctx: CallContext, name: str, rank: int, count: Callable[[int], str],
                  not_int: str) -> bool:
    """One int per dimension of a rank-`rank` tile: `count(n)` words the finding for `n`
    entries, `not_int` the one for an entry of another type."""
    elts = elements(ctx.value(name))
    if len(elts) != rank:
        ctx.error(codes.BAD_INDEX, count(len(elts)), name)
        return False
    for e in elts:
        if not isinstance(e.type, IntType):
            ctx.error(codes.TYPE_MISMATCH, f"{not_int}, got {e.type.describe()}", name)
            return False
    return True


def _tensor_tile_rule(ctx: CallContext) -> Type:
    t = ctx.type("self")
    assert isinstance(t, TensorType)
    shape = _shape(ctx, "shape")
    if shape is None:
        return ErrorType()
    if len(shape) != len(t.shape):
        return ctx.error(codes.SHAPE_MISMATCH,
                         f"tile shape {shape_str(shape)} has rank {len(shape)} but the tensor is "
                         f"rank {len(t.shape)} {shape_str(t.shape)}", "shape")
    if not _coords(ctx, "coords", len(shape)):
        return ErrorType()
    if not _element_ints(ctx, "offset", len(shape), "element offset") or \
            not _element_ints(ctx, "limit", len(shape), "element bound"):
        return ErrorType()
    return TileType(t.dtype, shape, ctx.value("self").name, t.shape, ctx.has("limit"),
                    ctx.has("offset"))


def _smem_tile_rule(ctx: CallContext) -> Type:
    t = ctx.type("self")
    assert isinstance(t, SmemType)
    shape = _shape(ctx, "shape")
    if shape is None:
        return ErrorType()
    if len(shape) != len(t.shape):
        return ctx.error(codes.SHAPE_MISMATCH,
                         f"tile shape {shape_str(shape)} has rank {len(shape)} but the view is "
                         f"rank {len(t.shape)} {shape_str(t.shape)}", "shape")
    for d, full in zip(shape, t.shape, strict=True):
        c, f = d.const, full.const
        if c is not None and f is not None and (c > f or f % c):
            return ctx.error(codes.SHAPE_MISMATCH,
                             f"tile shape {shape_str(shape)} does not evenly divide the view "
                             f"{shape_str(t.shape)}", "shape")
    if not _coords(ctx, "coords", len(shape)):
        return ErrorType()
    return SmemType(t.dtype, shape, t.layout, t.buffer, t.buffer_shape, t.transposed)


PRIMITIVES = (
    Primitive(
        "smem", "memory",
        (param("dtype", DTypeType), param("shape", *SHAPE_KINDS),
         param("layout", LayoutType, default=None),
         param("offset", IntType, NoneType, default=None)),
        _smem_rule,
        """Allocate a shared-memory buffer of `dtype` and `shape` (constant), laid out by `layout`.

Buffers whose leading dimension is a stage count are indexed `buf[s]` to get one stage.
Swizzled buffers are aligned to the swizzle atom (1024 B for swizzle(128)).  `offset=`
places the buffer at that byte offset instead (aligned like the planner would, `CK318`);
placed buffers may share bytes only when their lifetimes are apart (`CK317`).

```python
sa = smem(bf16, (STAGES, BM, BK), layout=swizzle(128), offset=0)
sc = smem(bf16, (BM, BN), offset=0)   # by hand: sa's bytes, reused after the main loop
```""",
        signature_doc="smem(dtype, shape, layout=row_major, offset=None)",
        facets=_FACETS.of("smem"),
        traits=frozenset({Trait.THREAD_LOCAL, Trait.ALLOCATES_SMEM}),
    ),
    Primitive(
        "fragment", "memory",
        (param("dtype", DTypeType), param("shape", *SHAPE_KINDS),
         param("layout", LayoutType, default=None),
         param("fill", ScalarType, IntType, NoneType, default=0)),
        _fragment_rule,
        """Allocate a register fragment of `dtype` and `shape`, spread over the executing warps.

The layout names the instruction that owns the distribution: `wgmma_acc` for a wgmma
accumulator, `mma_acc` for mma.sync, `rows` for generic element-wise work.  The fragment is
filled with `fill` (0 unless given; `fill=inf` for a running minimum).  `fill=None` writes
nothing: for an accumulator whose first use is `wgmma(..., accumulate=False)` (CK335 checks
that nothing reads it first).

```python
acc = fragment(f32, (BM, BN), layout=wgmma_acc)
```""",
        signature_doc="fragment(dtype, shape, layout=rows, fill=0)", facets=_FACETS.of("fragment"),
        traits=frozenset({Trait.THREAD_LOCAL, Trait.ALLOCATES_FRAGMENT}),
    ),
    Primitive(
        "pipeline", "memory",
        (param("stages", IntType, const=True), param("producer", StrType),
         param("consumer", StrType, TupleType)),
        _pipeline_rule,
        """A multi-stage ring between a producer role and consumer role(s), owning its barriers.

Each stage has a *full* mbarrier (producer -> consumers, carrying the TMA transaction bytes)
and an *empty* mbarrier (consumers -> producer).  The pipeline tracks stage index and phase
parity itself, so it can never get out of phase.

```python
ab = pipeline(stages=4, producer="load", consumer="mma")
```""",
        requires=frozenset({Feature.MBARRIER}), facets=_FACETS.of("pipeline"),
        traits=frozenset({Trait.DECLARES_PIPELINE}),
    ),
    Primitive(
        "mbarrier", "memory",
        (param("count", IntType, const=True), param("n", IntType, default=1, const=True)),
        _mbarrier_rule,
        """Allocate `n` raw mbarriers in shared memory, each initialised with arrival `count`.

Use raw barriers only for what a `pipeline` cannot say; the verifier checks their
arrival counts, transaction bytes and wait parities.

```python
done = mbarrier(count=1)
```""",
        requires=frozenset({Feature.MBARRIER}),
        signature_doc="mbarrier(count, n=1)", facets=_FACETS.of("mbarrier"),
        traits=frozenset({Trait.ALLOCATES_BARRIER}),
    ),
    Primitive(
        "tile", "memory",
        (param("self", TensorType), param("shape", *SHAPE_KINDS),
         param("coords", TupleType, IntType),
         param("offset", TupleType, IntType, NoneType, default=None),
         param("limit", TupleType, IntType, NoneType, default=None)),
        _tensor_tile_rule,
        """The tile of a global tensor with constant `shape` at tile coordinates `coords`.

Coordinates count tiles, not elements: `A.tile((BM, BK), (block.x, k))` starts at row
`block.x * BM`, column `k * BK`.  Parts outside the tensor are zero-filled on loads and
dropped on stores, as TMA does.  A tile whose leading extents are 1 copies to and from a
buffer of lower rank: `tma_load(sx, X.tile((1, BM, D), (b, block.x, 0)), bar)` fills a
(BM, D) buffer from a (B, N, D) tensor.

`offset=` adds one int per dimension, in elements, to the origin (`coords[d] * shape[d] +
offset[d]`): a packed sequence starting at row `start` is `Q.tile((BM, D), (t, 0),
offset=(start, 0))`.  `limit=` is an exclusive element bound per dimension that clips the
tile as the tensor's edge does: `load` reads zeros at and past it, `store` drops those
elements.  TMA and cp.async clip at the tensor's edges only and refuse a limited tile
(`CK330`).

```python
start = load_scalar(CuSeqlens, (block.z,))
end = load_scalar(CuSeqlens, (block.z + 1,))
store(O.tile((BM, D), (block.x, 0), offset=(start, 0), limit=(end, D)), o)
```""",
        receiver=TensorType,
        signature_doc="Tensor.tile(shape, coords, offset=None, limit=None)",
        facets=_FACETS.of("tensor_tile"),
        traits=frozenset({Trait.THREAD_LOCAL, Trait.GLOBAL_TILE, Trait.SINGLE_THREAD}),
    ),
    Primitive(
        "tile", "memory",
        (param("self", SmemType), param("shape", *SHAPE_KINDS),
         param("coords", TupleType, IntType)),
        _smem_tile_rule,
        """A sub-tile of a shared-memory view with constant `shape` at tile coordinates `coords`.

```python
a = ldmatrix(sa[s].tile((WM, 16), (wm, kk)))
```""",
        receiver=SmemType,
        signature_doc="smem.tile(shape, coords)", facets=_FACETS.of("smem_tile"),
        traits=frozenset({Trait.THREAD_LOCAL, Trait.SMEM_VIEW}),
    ),
)
