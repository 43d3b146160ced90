"""`argmin_update`: the running-argmin epilogue of a chunked nearest-neighbour search.

A k-means assignment (or any "index of the closest of K candidates" kernel) computes a
(R, C) distance tile per chunk of C candidates and keeps one (value, index) pair per row
across chunks.  Written with built-ins that is a row reduction followed by a compare and
two selects, four statements whose intermediate vectors the lowering has to keep alive;
as one primitive the reduction result goes straight into the compare-and-select, and the
tie rule (numpy's argmin: the smallest column within a chunk, the earliest chunk across
chunks) is stated once instead of being re-derived by every kernel.

All facets are given explicitly, as any third-party primitive must: the built-in
convention `cake_core.<analysis>.facets.<family>` applies only to CAKE's own primitives.
"""

from __future__ import annotations

from cake_core.diagnostics import codes
from cake_core.ir.types import (
    DType,
    ErrorType,
    FragmentType,
    IntType,
    NoneType,
    Type,
    shape_str,
)
from cake_core.primitives.facets import Facets, Lazy
from cake_core.primitives.registry import EffectSpec, Primitive, Provenance, param
from cake_core.primitives.traits import Trait
from cake_core.primitives.typecheck import CallContext

PLUGIN_NAME = "cake-kmeans"

DOC = """Fold one chunk's distances into a running per-row argmin, in place.

For each row r of the (R, C) fragment `dist`: find the smallest value and its column
(the smallest column on ties, as numpy's argmin), and where that value is strictly
below `best_v[r]`, set `best_v[r]` to it and `best_i[r]` to `offset + column`.  Strict
`<` keeps the earlier chunk on ties across chunks, so scanning chunks in increasing
`offset` order gives exactly `argmin` over all columns.

`best_v` is an (R,) f32 fragment (start it at `inf`), `best_i` an (R,) i32 fragment;
`dist` may be f32, f16 or bf16 (compared in f32).  Lanes that share a row combine with
warp shuffles; every lane ends with the same (value, index) for its rows.

```python
best_v = fragment(f32, (BM,), fill=inf)
best_i = fragment(i32, (BM,))
for j in range(K // BN):
    ...
    argmin_update(best_v, best_i, dist, j * BN)
```"""

_DIST_DTYPES = (DType.F32, DType.F16, DType.BF16)


def argmin_update_rule(ctx: CallContext) -> Type:
    """Shapes and dtypes of the running pair against the distance tile, each problem at
    the argument a person would edit."""
    dist, best_v, best_i = ctx.type("dist"), ctx.type("best_v"), ctx.type("best_i")
    assert isinstance(dist, FragmentType)
    assert isinstance(best_v, FragmentType) and isinstance(best_i, FragmentType)
    if len(dist.shape) != 2:
        return ctx.error(codes.SHAPE_MISMATCH,
                         f"`argmin_update` reduces the rows of a 2-D (R, C) distance fragment; "
                         f"`dist` has shape {shape_str(dist.shape)}", "dist")
    if dist.dtype not in _DIST_DTYPES:
        return ctx.error(codes.DTYPE_MISMATCH,
                         f"`dist` holds {dist.dtype.value}; distances must be f32, f16 or bf16",
                         "dist")
    rows = dist.shape[:1]
    failed = False
    for name, t, dtype, what in (("best_v", best_v, DType.F32, "running minimum values"),
                                 ("best_i", best_i, DType.I32, "running argmin indices")):
        if t.dtype != dtype:
            ctx.error(codes.DTYPE_MISMATCH,
                      f"`{name}` holds the {what} and must be {dtype.value}, not "
                      f"{t.dtype.value}", name)
            failed = True
        elif len(t.shape) != 1 or t.shape[0] != rows[0]:
            ctx.error(codes.SHAPE_MISMATCH,
                      f"`{name}` has shape {shape_str(t.shape)}; one entry per row of `dist` "
                      f"means {shape_str(rows)}", name,
                      notes=["`dist` is (R, C): R rows (points), C candidates in this chunk"])
            failed = True
    return ErrorType() if failed else NoneType()


ARGMIN_UPDATE = Primitive(
    "argmin_update",
    "math",
    (param("best_v", FragmentType, doc="(R,) f32 running minimum, updated in place"),
     param("best_i", FragmentType, doc="(R,) i32 running argmin, updated in place"),
     param("dist", FragmentType, doc="(R, C) distances of this chunk"),
     param("offset", IntType, doc="index of the chunk's first column")),
    argmin_update_rule,
    DOC,
    effects=EffectSpec(reads=("dist", "best_v", "best_i"), writes=("best_v", "best_i")),
    facets=Facets(cost=Lazy("cake_kmeans.cost:argmin_update"),
                  simulate=Lazy("cake_kmeans.simulate:argmin_update"),
                  lower=Lazy("cake_kmeans.lower:ARGMIN_UPDATE")),
    traits=frozenset({Trait.THREAD_LOCAL, Trait.REGISTER_MATH}),
    provenance=Provenance("hand-written", "2026-12-02", ("examples/kmeans_assign_sm90.cake",)),
    plugin=PLUGIN_NAME,
)
