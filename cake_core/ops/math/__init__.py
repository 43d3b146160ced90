"""Element-wise math, casts and row reductions on register fragments."""

from __future__ import annotations

from cake_core.diagnostics import codes
from cake_core.ir.symbolic import Const, SymExpr
from cake_core.ir.types import (
    DType,
    DTypeType,
    ErrorType,
    FragLayout,
    FragmentType,
    IntType,
    ScalarType,
    Shape,
    TupleType,
    Type,
    shape_str,
)
from cake_core.primitives.facets import FacetModules
from cake_core.primitives.registry import EffectSpec, Primitive, param
from cake_core.primitives.traits import Trait
from cake_core.primitives.typecheck import CallContext

#: Where this family's facets live; each primitive names its own attribute.
_FACETS = FacetModules(cost="cake_core.ops.math.cost",
                       simulate="cake_core.ops.math.sim",
                       lower="cake_core.ops.math.lower")


_OPERAND = (FragmentType, ScalarType, IntType)


def broadcast(a: Shape, b: Shape) -> Shape | None:
    """numpy broadcasting of two shapes (trailing dims align; 1 stretches)."""
    out: list[SymExpr] = []
    for i in range(1, max(len(a), len(b)) + 1):
        x = a[-i] if i <= len(a) else None
        y = b[-i] if i <= len(b) else None
        if x is None or (x.const == 1 and y is not None):
            out.append(y)  # type: ignore[arg-type]
        elif y is None or y.const == 1 or x == y:
            out.append(x)
        else:
            return None
    return tuple(reversed(out))


def _elementwise(ctx: CallContext, names: tuple[str, ...], result: DType | None = None) -> Type:
    frags = [(n, ctx.type(n)) for n in names if isinstance(ctx.type(n), FragmentType)]
    if not frags:
        # scalar-only math folds nowhere useful on the device: treat as a scalar
        dts = [t.dtype for n in names if isinstance(t := ctx.type(n), ScalarType)]
        return ScalarType(result or (dts[0] if dts else DType.F32))
    first_name, first = frags[0]
    assert isinstance(first, FragmentType)
    shape, layout = first.shape, first.layout
    for n, t in frags[1:]:
        assert isinstance(t, FragmentType)
        if t.dtype != first.dtype:
            return ctx.error(codes.DTYPE_MISMATCH,
                             f"`{ctx.prim.name}` mixes {first.dtype.value} and {t.dtype.value}; "
                             f"cast one side: cast({n}, {first.dtype.value})", n)
        b = broadcast(shape, t.shape)
        if b is None:
            return ctx.error(codes.SHAPE_MISMATCH,
                             f"`{ctx.prim.name}`: shapes {shape_str(shape)} and "
                             f"{shape_str(t.shape)} do not broadcast", n,
                             notes=["trailing dimensions align (numpy rules); a per-row vector "
                                    "of shape (R,) against (R, C) needs unsqueeze(v, 1)"])
        if len(t.shape) > len(shape) or b != shape:
            layout = t.layout if len(t.shape) >= len(shape) else layout
        shape = b
    for n in names:
        t = ctx.type(n)
        if isinstance(t, ScalarType) and t.dtype.is_float and first.dtype.is_int:
            return ctx.error(codes.DTYPE_MISMATCH, f"a float scalar with an {first.dtype.value} "
                             "fragment", n)
    del first_name
    return FragmentType(result or first.dtype, shape, layout)


def _binary_rule(ctx: CallContext) -> Type:
    return _elementwise(ctx, ("a", "b"))


def _compare_rule(ctx: CallContext) -> Type:
    return _elementwise(ctx, ("a", "b"), DType.BOOL)


def _unary_rule(ctx: CallContext) -> Type:
    t = ctx.type("x")
    if isinstance(t, FragmentType | ScalarType) and not t.dtype.is_float and ctx.prim.name not in (
            "neg", "abs"):
        return ctx.error(codes.DTYPE_MISMATCH,
                         f"`{ctx.prim.name}` needs a floating-point operand, not {t.dtype.value}",
                         "x")
    return _elementwise(ctx, ("x",))


def _fma_rule(ctx: CallContext) -> Type:
    out = _elementwise(ctx, ("a", "b", "c"))
    if isinstance(out, FragmentType | ScalarType) and not out.dtype.is_float:
        return ctx.error(codes.DTYPE_MISMATCH,
                         f"`fma` is floating-point math, not {out.dtype.value}: use a * b + c",
                         "a")
    return out


def _where_rule(ctx: CallContext) -> Type:
    c = ctx.type("cond")
    if isinstance(c, FragmentType) and c.dtype != DType.BOOL:
        return ctx.error(codes.DTYPE_MISMATCH, "`cond` must be a bool fragment (a comparison)",
                         "cond")
    out = _elementwise(ctx, ("a", "b"))
    if isinstance(out, FragmentType) and isinstance(c, FragmentType):
        b = broadcast(out.shape, c.shape)
        if b is None:
            return ctx.error(codes.SHAPE_MISMATCH, f"`cond` {shape_str(c.shape)} does not "
                             f"broadcast with {shape_str(out.shape)}", "cond")
        return FragmentType(out.dtype, b, out.layout)
    return out


def _cast_rule(ctx: CallContext) -> Type:
    x = ctx.type("x")
    dt = ctx.const("dtype")
    assert isinstance(dt, DType)
    if isinstance(x, FragmentType):
        return FragmentType(dt, x.shape, x.layout)
    return ScalarType(dt)


def _unsqueeze_rule(ctx: CallContext) -> Type:
    x = ctx.type("x")
    assert isinstance(x, FragmentType)
    d = ctx.int("dim")
    if d is None or not 0 <= d <= len(x.shape):
        return ctx.error(codes.BAD_INDEX, f"`dim` must be a constant in 0..{len(x.shape)}", "dim")
    shape = (*x.shape[:d], Const(1), *x.shape[d:])
    return FragmentType(x.dtype, shape, x.layout)


def _reduce_shape(ctx: CallContext) -> FragmentType | None:
    x = ctx.type("x")
    assert isinstance(x, FragmentType)
    if len(x.shape) != 2:
        ctx.error(codes.SHAPE_MISMATCH, f"row reductions take a 2-D fragment, not "
                  f"{shape_str(x.shape)}", "x")
        return None
    return x


def _row_reduce_rule(ctx: CallContext) -> Type:
    x = _reduce_shape(ctx)
    if x is None:
        return ErrorType()
    if ctx.prim.name == "row_sum" and not x.dtype.is_float and x.dtype != DType.I32:
        return ctx.error(codes.DTYPE_MISMATCH, "row_sum of a non-numeric fragment", "x")
    return FragmentType(x.dtype, x.shape[:1], FragLayout.ROWS)


def _row_arg_rule(ctx: CallContext) -> Type:
    x = _reduce_shape(ctx)
    if x is None:
        return ErrorType()
    return TupleType((FragmentType(x.dtype, x.shape[:1], FragLayout.ROWS),
                      FragmentType(DType.I32, x.shape[:1], FragLayout.ROWS)))


def _index_rule(ctx: CallContext) -> Type:
    x = ctx.type("x")
    assert isinstance(x, FragmentType)
    if len(x.shape) != 2:
        return ctx.error(codes.SHAPE_MISMATCH, f"`{ctx.prim.name}` takes a 2-D fragment, not "
                         f"{shape_str(x.shape)}", "x")
    return FragmentType(DType.I32, x.shape, x.layout)


#: Layouts whose column slices on 16-column boundaries are whole registers of the operand:
#: in the wgmma accumulator (and A-operand) layout, columns 16j .. 16j + 15 are registers
#: 8j .. 8j + 7 of every thread, so the slice is a renaming, not a move.
_SLICEABLE = (FragLayout.WGMMA_ACC, FragLayout.WGMMA_A)


def _cols_rule(ctx: CallContext) -> Type:
    x = ctx.type("x")
    assert isinstance(x, FragmentType)
    if len(x.shape) != 2 or x.shape[1].const is None:
        return ctx.error(codes.SHAPE_MISMATCH, f"a column slice takes a 2-D fragment with a "
                         f"constant number of columns, not {shape_str(x.shape)}", "x")
    if x.layout not in _SLICEABLE:
        return ctx.error(codes.TYPE_MISMATCH,
                         f"columns of a {x.layout.value} fragment are not whole registers: a "
                         "column slice takes a wgmma_acc or wgmma_a fragment (its k16 chunks "
                         "are registers of every thread)", "x")
    n = x.shape[1].const
    bounds = []
    for name in ("start", "stop"):
        v = ctx.int(name)
        if v is None:
            return ctx.error(codes.NOT_CONSTANT, f"a column slice needs constant bounds; "
                             f"`{name}` is not a compile-time int", name)
        if v % 16:
            return ctx.error(codes.BAD_INDEX,
                             f"column {v} is not on a 16-column boundary: a slice of a "
                             f"{x.layout.value} fragment takes whole k16 chunks (columns "
                             f"16j .. 16j + 15 are one chunk's registers)", name)
        bounds.append(v)
    start, stop = bounds
    if not 0 <= start < stop <= n:
        return ctx.error(codes.BAD_INDEX, f"columns {start}:{stop} are not a non-empty range "
                         f"within the fragment's {n} columns", "stop" if start < stop else "start")
    return FragmentType(x.dtype, (x.shape[0], Const(stop - start)), x.layout)


_ELEMENTWISE = frozenset({Trait.THREAD_LOCAL, Trait.REGISTER_MATH, Trait.ELEMENTWISE})
_REDUCTION = frozenset({Trait.THREAD_LOCAL, Trait.REGISTER_MATH, Trait.ROW_REDUCTION,
                        Trait.WARP_COLLECTIVE})


def _binary(name: str, doc: str, rule=_binary_rule) -> Primitive:
    return Primitive(name, "math", (param("a", *_OPERAND), param("b", *_OPERAND)), rule, doc,
                     effects=EffectSpec(reads=("a", "b")), facets=_FACETS.of(name),
                     traits=_ELEMENTWISE)


def _unary(name: str, doc: str) -> Primitive:
    return Primitive(name, "math", (param("x", FragmentType, ScalarType),), _unary_rule, doc,
                     effects=EffectSpec(reads=("x",)), facets=_FACETS.of(name),
                     traits=_ELEMENTWISE)


_ROW = """Reduce each row of a 2-D fragment to one value ({what}): (R, C) -> (R,).

Lanes that share a row combine with warp shuffles; the result is replicated across them."""
_ARG = """Per row, the {what} value and its column index: (R, C) -> ((R,), (R,) i32).

Ties resolve to the smallest column index, as numpy's {np} does.

```python
best, idx = row_{short}(dist)
```"""


_INDEX = """The {what} index of every element of a 2-D fragment: an i32 fragment of its shape.

Element (r, c) holds {{r, c}}[{axis}], in whatever registers the fragment's layout gives it, so
masks for ragged edges and causal attention are written on the logical tile
(`where(lt(...), x, -inf)`) and lowered to the thread's own coordinates: no memory, no
shuffles.

```python
{example}
```"""


PRIMITIVES = (
    _binary("add", "Element-wise `a + b` (numpy broadcasting; scalars broadcast)."),
    _binary("sub", "Element-wise `a - b`."),
    _binary("mul", "Element-wise `a * b`."),
    _binary("div", "Element-wise `a / b` (floating point)."),
    _binary("maximum", "Element-wise maximum of `a` and `b`."),
    _binary("minimum", "Element-wise minimum of `a` and `b`."),
    _binary("lt", "Element-wise `a < b` (bool fragment).", _compare_rule),
    _binary("le", "Element-wise `a <= b` (bool fragment).", _compare_rule),
    _binary("gt", "Element-wise `a > b` (bool fragment).", _compare_rule),
    _binary("ge", "Element-wise `a >= b` (bool fragment).", _compare_rule),
    _binary("eq", "Element-wise `a == b` (bool fragment).", _compare_rule),
    _binary("ne", "Element-wise `a != b` (bool fragment).", _compare_rule),
    _unary("neg", "Element-wise negation `-x`."),
    _unary("abs", "Element-wise absolute value."),
    _unary("exp", "Element-wise e**x (lowered to ex2 with a log2(e) scale)."),
    _unary("exp2", "Element-wise 2**x (one MUFU.EX2)."),
    _unary("log", "Element-wise natural logarithm."),
    _unary("log2", "Element-wise base-2 logarithm."),
    _unary("sqrt", "Element-wise square root."),
    _unary("rsqrt", "Element-wise reciprocal square root."),
    Primitive("fma", "math",
              (param("a", *_OPERAND), param("b", *_OPERAND), param("c", *_OPERAND)), _fma_rule,
              """Element-wise fused multiply-add `a * b + c`, rounded once.

One FFMA per element in f32; 16-bit fragments compute in f32 and round the result, as the
other math does.  `a * b + c` written out is two instructions and two roundings.""",
              effects=EffectSpec(reads=("a", "b", "c")), facets=_FACETS.of("fma"),
              traits=_ELEMENTWISE),
    Primitive("where", "math",
              (param("cond", FragmentType), param("a", *_OPERAND), param("b", *_OPERAND)),
              _where_rule, "Element-wise select: `a` where `cond` holds, else `b`.",
              effects=EffectSpec(reads=("cond", "a", "b")), facets=_FACETS.of("where"),
              traits=_ELEMENTWISE),
    Primitive("cast", "math", (param("x", FragmentType, ScalarType), param("dtype", DTypeType)),
              _cast_rule,
              "Convert a fragment to another dtype (round-to-nearest-even; saturating for fp8).",
              effects=EffectSpec(reads=("x",)), facets=_FACETS.of("cast"),
              traits=_ELEMENTWISE),
    Primitive("unsqueeze", "math", (param("x", FragmentType), param("dim", IntType, const=True)),
              _unsqueeze_rule,
              "Insert a length-1 dimension at `dim` so a per-row vector broadcasts over columns.",
              effects=EffectSpec(reads=("x",)), facets=_FACETS.of("unsqueeze"),
              traits=frozenset({Trait.THREAD_LOCAL, Trait.REGISTER_MATH})),
    Primitive("cols", "math",
              (param("x", FragmentType), param("start", IntType, const=True),
               param("stop", IntType, const=True)),
              _cols_rule,
              """Columns `start:stop` of a 2-D wgmma fragment, spelled `x[:, start:stop]`.

The bounds are constants on 16-column boundaries.  In the wgmma accumulator layout
(and so in the register A operand, `cast` of one) columns `16j .. 16j + 15` are registers
`8j .. 8j + 7` of every thread of each 64-row slab, so a slice renames registers and costs
nothing: it is how a K = 128 register A operand feeds two wgmmas whose B halves live in
two 64-column swizzled tiles.

```python
pb = cast(p, bf16)                              # (64, 128) wgmma_acc
wgmma(o, pb[:, 0:64], sv[st, 0].T)              # keys 0 .. 63
wgmma(o, pb[:, 64:128], sv[st, 1].T)            # keys 64 .. 127
```""",
              effects=EffectSpec(reads=("x",)), facets=_FACETS.of("cols"),
              traits=frozenset({Trait.THREAD_LOCAL, Trait.REGISTER_MATH,
                                Trait.REGISTER_ALIAS})),
    Primitive("col_index", "math", (param("x", FragmentType),), _index_rule,
              _INDEX.format(what="column", axis="1", example="""\
cols = col_index(s) + j * BN                  # key index of every score
s = where(lt(cols, S), s, -inf)               # keys past the sequence never win"""),
              effects=EffectSpec(reads=("x",)), facets=_FACETS.of("col_index"),
              traits=_ELEMENTWISE),
    Primitive("row_index", "math", (param("x", FragmentType),), _index_rule,
              _INDEX.format(what="row", axis="0", example="""\
rows = row_index(s) + block.x * BM            # query index of every score
s = where(le(col_index(s) + j * BN, rows), s, -inf)   # causal: keys up to the query"""),
              effects=EffectSpec(reads=("x",)), facets=_FACETS.of("row_index"),
              traits=_ELEMENTWISE),
    Primitive("row_max", "math", (param("x", FragmentType),), _row_reduce_rule,
              _ROW.format(what="maximum"), effects=EffectSpec(reads=("x",)),
              facets=_FACETS.of("row_max"),
              traits=_REDUCTION),
    Primitive("row_min", "math", (param("x", FragmentType),), _row_reduce_rule,
              _ROW.format(what="minimum"), effects=EffectSpec(reads=("x",)),
              facets=_FACETS.of("row_min"),
              traits=_REDUCTION),
    Primitive("row_sum", "math", (param("x", FragmentType),), _row_reduce_rule,
              _ROW.format(what="sum, accumulated in the fragment's dtype"),
              effects=EffectSpec(reads=("x",)), facets=_FACETS.of("row_sum"),
              traits=_REDUCTION),
    Primitive("row_argmin", "math", (param("x", FragmentType),), _row_arg_rule,
              _ARG.format(what="minimum", np="argmin", short="argmin"),
              effects=EffectSpec(reads=("x",)), facets=_FACETS.of("row_argmin"),
              traits=_REDUCTION),
    Primitive("row_argmax", "math", (param("x", FragmentType),), _row_arg_rule,
              _ARG.format(what="maximum", np="argmax", short="argmax"),
              effects=EffectSpec(reads=("x",)), facets=_FACETS.of("row_argmax"),
              traits=_REDUCTION),
)
