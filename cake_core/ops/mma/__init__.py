"""Tensor-core matrix multiply-accumulate: mma.sync (sm_80+) and wgmma (sm_90a)."""

from __future__ import annotations

from cake_core.diagnostics import codes
from cake_core.diagnostics.model import Applicability, Fix, Related, TextEdit
from cake_core.hardware import Feature
from cake_core.ir.types import (
    DType,
    ErrorType,
    FragLayout,
    FragmentType,
    IntType,
    NoneType,
    ScalarType,
    SmemType,
    Type,
    shape_str,
)
from cake_core.primitives.facets import FacetModules
from cake_core.primitives.registry import EffectSpec, Primitive, SmemAccess, param
from cake_core.primitives.traits import Trait
from cake_core.primitives.typecheck import CallContext
from cake_core.source import Span

#: Where this family's facets live; each primitive names its own attribute.
_FACETS = FacetModules(cost="cake_core.ops.mma.cost",
                       simulate="cake_core.ops.mma.sim",
                       lower="cake_core.ops.mma.lower")

_INPUT_DTYPES = {
    "mma_sync": (DType.F16, DType.BF16),
    "wgmma": (DType.F16, DType.BF16, DType.E4M3, DType.E5M2),
}


def _mnk(ctx: CallContext) -> tuple[int, int, int] | None:
    """Check acc(M, N) += a(M, K) @ b(K, N) shapes and dtypes; return (M, N, K)."""
    acc, a, b = ctx.type("acc"), ctx.type("a"), ctx.type("b")
    assert isinstance(acc, FragmentType)
    assert isinstance(a, FragmentType | SmemType)
    assert isinstance(b, FragmentType | SmemType)
    extents: list[tuple[int, int]] = []
    for name, t in (("acc", acc), ("a", a), ("b", b)):
        rows, cols = (t.shape[0].const, t.shape[1].const) if len(t.shape) == 2 else (None, None)
        if rows is None or cols is None:
            ctx.error(codes.SHAPE_MISMATCH, f"`{name}` must be a 2-D tile with constant shape, "
                      f"not {shape_str(t.shape)}", name)
            return None
        extents.append((rows, cols))
    (m, n), (am, ak), (bk, bn) = extents
    allowed = _INPUT_DTYPES[ctx.prim.name]
    if a.dtype not in allowed:
        ctx.error(codes.DTYPE_MISMATCH, f"{ctx.prim.name} does not take {a.dtype.value} inputs "
                  f"(accepts {', '.join(d.value for d in allowed)})", "a")
        return None
    if a.dtype != b.dtype:
        ctx.error(codes.DTYPE_MISMATCH, f"`a` is {a.dtype.value} but `b` is {b.dtype.value}; "
                  "both MMA inputs must have one dtype", "b")
        return None
    if acc.dtype != DType.F32:
        # The contract is broken where the fragment's dtype is chosen, not at the MMA.
        decl = ctx.value("acc").span
        ctx.error(codes.DTYPE_MISMATCH, f"`{ctx.value('acc').name}` is the accumulator of "
                  f"{ctx.prim.name} (line {ctx.span.start.line + 1}), which accumulates in "
                  f"f32: declare it f32, not {acc.dtype.value}, and cast when storing",
                  decl, related=[Related(ctx.span, f"the {ctx.prim.name} accumulating into it")])
        return None
    if am == m and (bk, bn) == (n, ak) and bn != n and isinstance(b, SmemType):
        span = ctx.at("b")
        ctx.error(codes.SHAPE_MISMATCH,
                  f"{ctx.prim.name}: `b` is an (N, K) = {shape_str(b.shape)} tile; the MMA reads "
                  f"b as (K, N): pass it transposed", "b",
                  fixes=[Fix("append `.T`", (TextEdit(Span(span.end, span.end), ".T"),),
                             Applicability.SAFE)])
        return None
    if am != m or bn != n:
        ctx.error(codes.SHAPE_MISMATCH,
                  f"{ctx.prim.name}: acc {shape_str(acc.shape)} != a rows x b columns "
                  f"({am}, {bn})", "b" if am == m else "a",
                  notes=["acc(M, N) += a(M, K) @ b(K, N); pass a (N, K) buffer as `b.T`"])
        return None
    if ak != bk:
        hint = ("; `b` looks like an (N, K) tile: pass it transposed, `b.T`"
                if bn == ak and bk == n else "")
        ctx.error(codes.SHAPE_MISMATCH,
                  f"{ctx.prim.name}: inner dimensions differ: a has K={ak}, b has K={bk}{hint}",
                  "b")
        return None
    return m, n, ak


def _mma_sync_rule(ctx: CallContext) -> Type:
    mnk = _mnk(ctx)
    if mnk is None:
        return ErrorType()
    m, n, k = mnk
    if m % 16 or n % 8 or k % 16:
        return ctx.error(codes.SHAPE_MISMATCH,
                         f"mma_sync tiles m16n8k16: ({m}, {n}, {k}) is not a multiple of "
                         "(16, 8, 16)", "acc")
    for name in ("a", "b"):
        if not isinstance(ctx.type(name), FragmentType):
            return ctx.error(codes.TYPE_MISMATCH, f"mma_sync reads `{name}` from registers: "
                             f"load it with ldmatrix first", name)
    return NoneType()


def _wgmma_rule(ctx: CallContext) -> Type:
    mnk = _mnk(ctx)
    if mnk is None:
        return ErrorType()
    m, n, k = mnk
    a_t = ctx.type("a")
    assert isinstance(a_t, FragmentType | SmemType)
    kstep = 32 if a_t.dtype.bits == 8 else 16
    if m % 64:
        return ctx.error(codes.SHAPE_MISMATCH,
                         f"wgmma works on 64-row slabs per warpgroup: M={m} is not a multiple "
                         "of 64", "acc")
    if n % 8 or n > 256:
        return ctx.error(codes.SHAPE_MISMATCH,
                         f"wgmma N must be a multiple of 8 up to 256, not {n}", "acc")
    if k % kstep:
        return ctx.error(codes.SHAPE_MISMATCH,
                         f"wgmma K must be a multiple of {kstep} for {a_t.dtype.value}, not {k}",
                         "a")
    if not isinstance(ctx.type("b"), SmemType):
        return ctx.error(codes.TYPE_MISMATCH, "wgmma reads `b` from shared memory", "b")
    if isinstance(a_t, FragmentType):
        if a_t.dtype.bits != 16:
            return ctx.error(codes.DTYPE_MISMATCH,
                             f"wgmma takes `a` from registers for f16/bf16 only, not "
                             f"{a_t.dtype.value}: stage it in shared memory", "a")
        if a_t.layout not in (FragLayout.ROWS, FragLayout.WGMMA_A, FragLayout.WGMMA_ACC):
            return ctx.error(codes.TYPE_MISMATCH,
                             f"a wgmma A operand in registers has the wgmma_a layout (that of "
                             f"a wgmma accumulator), not {a_t.layout.value}", "a")
    acc = ctx.type("acc")
    assert isinstance(acc, FragmentType)
    if acc.layout != FragLayout.WGMMA_ACC:
        return ctx.error(codes.TYPE_MISMATCH,
                         f"the wgmma accumulator must have layout wgmma_acc, not "
                         f"{acc.layout.value}", "acc")
    if ctx.has("accumulate"):
        flag = ctx.type("accumulate")
        if not (isinstance(flag, ScalarType) and flag.dtype == DType.BOOL):
            return ctx.error(codes.TYPE_MISMATCH,
                             f"`accumulate` is a condition (True, False or a comparison such "
                             f"as `k > 0`), not {flag.describe()}", "accumulate")
    return NoneType()


def _wait_rule(ctx: CallContext) -> Type:
    n = ctx.int("n")
    if n is None or n < 0:
        return ctx.error(codes.NOT_CONSTANT, "wgmma_wait needs a constant count >= 0", "n")
    return NoneType()


PRIMITIVES = (
    Primitive(
        "mma_sync", "mma",
        (param("acc", FragmentType), param("a", FragmentType), param("b", FragmentType)),
        _mma_sync_rule,
        """Warp-level tensor-core MMA: `acc(M, N) += a(M, K) @ b(K, N)` in m16n8k16 steps.

Inputs are f16 or bf16 fragments (from `ldmatrix`), accumulation is f32.  Shapes must be
multiples of (16, 8, 16); larger tiles issue one instruction per 16x8x16 block.""",
        effects=EffectSpec(reads=("acc", "a", "b"), writes=("acc",)),
        requires=frozenset({Feature.MMA_SYNC}), facets=_FACETS.of("mma_sync"),
        traits=frozenset({Trait.MMA, Trait.WARP_COLLECTIVE}),
    ),
    Primitive(
        "wgmma", "mma",
        (param("acc", FragmentType), param("a", SmemType, FragmentType), param("b", SmemType),
         param("accumulate", ScalarType, default=True)),
        _wgmma_rule,
        """Warpgroup-level asynchronous MMA (sm_90a): `acc(M, N) += a(M, K) @ b(K, N)`.

`a` comes from shared memory or registers, `b` from shared memory (pass an (N, K)
K-major buffer as `sb[s].T`).  M is a multiple of 64 (one 64-row slab per warpgroup of the
role), N a multiple of 8 up to 256, K a multiple of 16 (32 for fp8).  The result is not
ready until `wgmma_wait(n)`.

`accumulate=False` overwrites instead: `acc = a @ b` (the instruction's scale-d operand is 0
on the first K step), so a fresh accumulator needs no clearing: declare it with
`fill=None` and the zeros are never written.  A runtime condition (`accumulate=k > 0`)
clears on the iterations where it is false, as a k-loop's first step does.

```python
s = fragment(f32, (BM, BN), layout=wgmma_acc, fill=None)   # no clearing moves
wgmma(s, sq, sk[st].T, accumulate=False)
```""",
        effects=EffectSpec(reads=("acc", "a", "b"), writes=("acc",), async_group="wgmma",
                           smem_access=(("a", SmemAccess.WGMMA), ("b", SmemAccess.WGMMA))),
        requires=frozenset({Feature.WGMMA}), facets=_FACETS.of("wgmma"),
        traits=frozenset({Trait.MMA, Trait.WARPGROUP_MMA, Trait.WARPGROUP_COLLECTIVE}),
        unsupported="wgmma needs sm_90a (not sm_90, not sm_100a); on sm_80 use ldmatrix + mma_sync",
    ),
    Primitive(
        "wgmma_wait", "mma",
        (param("n", IntType, default=0, const=True),),
        _wait_rule,
        """Wait until at most `n` wgmma groups of this warpgroup are pending (wgmma.wait_group).""",
        effects=EffectSpec(waits="wgmma"),
        requires=frozenset({Feature.WGMMA}), facets=_FACETS.of("wgmma_wait"),
        traits=frozenset({Trait.WARPGROUP_COLLECTIVE}),
        unsupported=("wgmma needs sm_90a; on sm_80 mma_sync completes synchronously and needs no "
                     "wait"),
    ),
)
