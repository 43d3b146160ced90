"""The kinds of register-layout constraint an op can state, for its lower facet's hook.

The layout inference (`plan._infer`) knows no primitive: it calls the `layouts(op, ctx)`
hook of every op's lower facet until nothing changes.  A built-in facet gets its hook
from `with_layouts(rule)`, with one of the rules below; a plugin writes its own hook
(any callable attribute `layouts` of its facet) against the same `LayoutContext`.

- an instruction or a declaration fixes a layout: `declared` (a `fragment(...)` with an
  accumulator or operand layout), `mma_accumulator` / `wgmma_accumulator`,
  `mma_operand` (the result of `ldmatrix`);
- math propagates one: `elementwise` (result layout = operand layout, broadcast operands
  get its projection), `unsqueeze` (a new axis of extent 1), `row_reduction` (the rows of
  the operand).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from cake_core.ir.kernel import Op
from cake_core.ir.types import FragLayout, FragmentType, Type, const_shape
from cake_core.lower import layouts
from cake_core.lower.context import LowerContext
from cake_core.lower.layouts import COL, ROW, Dist
from cake_core.lower.plan import Group, LayoutContext, LayoutHook, LowerError, fragment_shape
from cake_core.source import Span


@dataclass(frozen=True, slots=True)
class WithLayouts:
    """A lower facet (`emit`) together with the layout constraints of its op (`layouts`)."""

    emit: Callable[[Op, LowerContext], str]
    layouts: LayoutHook

    def __call__(self, op: Op, ctx: LowerContext) -> str:
        return self.emit(op, ctx)


def with_layouts(rule: LayoutHook) -> Callable[[Callable[[Op, LowerContext], str]], WithLayouts]:
    """Decorate a lower facet with the layout rule of its op."""

    def wrap(emit: Callable[[Op, LowerContext], str]) -> WithLayouts:
        return WithLayouts(emit, rule)

    return wrap


# --- fixed layouts -----------------------------------------------------------------------------
def fixed(t: Type, g: Group, span: Span, wgmma: bool = False) -> Dist | None:
    """The layout a 2-D fragment's declared layout (or a wgmma accumulator) implies."""
    if not isinstance(t, FragmentType):
        return None
    shape = const_shape(t.shape)
    if shape is None or len(shape) != 2:
        return None
    m, n = shape
    if t.layout == FragLayout.WGMMA_ACC or wgmma:
        wgs = g.warpgroups
        if not wgs or m % (64 * wgs):
            raise LowerError(span, f"a wgmma accumulator of {m} rows needs whole warpgroups "
                             f"with a multiple of 64 rows each; the group has {g.warps} warps")
        return Dist(layouts.wgmma_acc(m, n, wgs), (ROW, COL))
    if t.layout == FragLayout.MMA_ACC:
        if m % 16 or n % 8:
            raise LowerError(span, f"an mma.sync accumulator must tile by (16, 8), not {shape}")
        return Dist(layouts.mma_acc(m, n), (ROW, COL))
    if t.layout == FragLayout.WGMMA_A:
        return wgmma_a(m, n, g, span)
    if t.layout in (FragLayout.MMA_A, FragLayout.MMA_B):
        kind = t.layout.value
        return Dist(layouts.mma_operand(kind, m, n), (ROW, COL))
    return None


def wgmma_a(m: int, k: int, g: Group, span: Span) -> Dist:
    """A wgmma A operand in registers: the accumulator layout of an (M, K) tile.

    PTX ISA 9.7.15.5.2 gives the m64nNk16 A fragment (four .b32 registers of 16-bit pairs
    per K step) the same (row, column) per register as the f32 accumulator of a 16-column
    tile, so a `cast` of an accumulator feeds the next wgmma without any shuffle.
    """
    wgs = g.warpgroups
    if not wgs or m % (64 * wgs) or k % 16:
        raise LowerError(span, f"a wgmma A operand of shape ({m}, {k}) in registers needs "
                         f"whole warpgroups with a multiple of 64 rows each and K a multiple "
                         f"of 16; the group has {g.warps} warps")
    return Dist(layouts.wgmma_acc(m, k, wgs), (ROW, COL))


def declared(op: Op, ctx: LayoutContext) -> None:
    """A fragment allocation: its declared layout (if not the free `rows`) is its layout."""
    r = op.results[0]
    d = fixed(r.type, ctx.group, op.span)
    if d is not None:
        ctx.put(r, d)


def _accumulator(op: Op, ctx: LayoutContext, wgmma: bool) -> None:
    acc = op.args["acc"]
    d = fixed(acc.type, ctx.group, op.span, wgmma=wgmma)
    if d is not None:
        ctx.put(acc, d)


def mma_accumulator(op: Op, ctx: LayoutContext) -> None:
    """mma.sync: `acc` has the layout it is declared with (mma_acc)."""
    _accumulator(op, ctx, wgmma=False)


def wgmma_accumulator(op: Op, ctx: LayoutContext) -> None:
    """wgmma: `acc` has the wgmma accumulator layout of the op's warpgroups, and an `a`
    held in registers the A-fragment layout (the accumulator's, see `wgmma_a`)."""
    _accumulator(op, ctx, wgmma=True)
    a = op.args["a"]
    if isinstance(a.type, FragmentType):
        shape = const_shape(a.type.shape)
        if shape is not None and len(shape) == 2:
            ctx.put(a, wgmma_a(shape[0], shape[1], ctx.group, op.span))


def mma_operand(op: Op, ctx: LayoutContext) -> None:
    """The result is an mma.sync A or B operand, per its fragment layout."""
    r = op.results[0]
    assert isinstance(r.type, FragmentType)
    rows, cols = fragment_shape(r.type)
    kind = "mma_a" if r.type.layout == FragLayout.MMA_A else "mma_b"
    ctx.put(r, Dist(layouts.mma_operand(kind, rows, cols), (ROW, COL)))


# --- propagated layouts ------------------------------------------------------------------------
def _project(result_shape: tuple[int, ...], d: Dist, shape: tuple[int, ...]) -> Dist | None:
    """The layout of an operand of `shape` that broadcasts into a result laid out as `d`."""
    off = len(result_shape) - len(shape)
    if off < 0:
        return None
    axes: list[int | None] = []
    for i, n in enumerate(shape):
        big = result_shape[off + i]
        if n == big:
            axes.append(d.axes[off + i])
        elif n == 1:
            axes.append(None)
        else:
            return None
    return d.project(tuple(axes))


def elementwise(op: Op, ctx: LayoutContext) -> None:
    """The result takes the layout of a full-shape operand, and every fragment operand the
    projection of the result's layout onto its (broadcast) shape."""
    res = op.results[0]
    if not isinstance(res.type, FragmentType):
        return
    rshape = fragment_shape(res.type)
    frags = [v for k, v in op.args.items() if k != "dtype" and isinstance(v.type, FragmentType)]
    d = ctx.get(res)
    if d is None:
        for v in frags:
            vd = ctx.get(v)
            if vd is not None and fragment_shape(v.type) == rshape:
                d = vd
                break
        if d is None:
            return
        ctx.put(res, d)
    for v in frags:
        pd = _project(rshape, d, fragment_shape(v.type))
        if pd is not None:
            ctx.put(v, pd)


def unsqueeze(op: Op, ctx: LayoutContext) -> None:
    """The result has the operand's layout with an axis of extent 1 inserted at `dim`."""
    dim = op.args["dim"].sym.const if op.args["dim"].sym is not None else None
    if dim is None:
        return
    x, res = op.args["x"], op.results[0]
    xd = ctx.get(x)
    if xd is not None:
        ctx.put(res, xd.project((*xd.axes[:dim], None, *xd.axes[dim:])))
    r = ctx.get(res)
    if r is not None and xd is None:
        ctx.put(x, r.project(r.axes[:dim] + r.axes[dim + 1:]))


def column_slice(op: Op, ctx: LayoutContext) -> None:
    """A column slice of a wgmma fragment: operand and result have the wgmma layouts their
    types declare (the slice's registers are the operand's, renamed)."""
    for v in (op.args["x"], op.results[0]):
        d = fixed(v.type, ctx.group, op.span)
        if d is not None:
            ctx.put(v, d)


def row_reduction(op: Op, ctx: LayoutContext) -> None:
    """Every result (values, and indices for an arg-reduction) is laid out as the rows of
    the operand `x`."""
    x = ctx.get(op.args["x"])
    if x is not None and x.axes and x.axes[0] is not None:
        for r in op.results:
            ctx.put(r, x.project((x.axes[0],)))


__all__ = ["WithLayouts", "column_slice", "declared", "elementwise", "fixed", "mma_accumulator",
           "mma_operand", "row_reduction", "unsqueeze", "wgmma_a", "wgmma_accumulator",
           "with_layouts"]
