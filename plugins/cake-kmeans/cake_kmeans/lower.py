"""Lower facet of `argmin_update`: one unrolled loop over the thread's rows.

Per row the thread scans its own columns of `dist` in order (strict `<`, so the first
of equal values stays), combines with the lanes that hold the rest of the row through
`cake_argmin_xor` shuffles (smaller value, then smaller column, wins), and then does
the compare-and-select against the running pair in registers.  Every lane that shares
the row holds a replica of `best_v[r]` / `best_i[r]` and, after the shuffles, the same
chunk result, so all replicas stay equal without any further communication.

The running pair must live in the rows of `dist`'s register layout (the projection of
its row axis).  `ARGMIN_UPDATE.layouts` states that constraint to the lowering's layout
inference (`cake_core.lower.plan` calls `layouts(op, ctx)` on every lower facet that has
one, built-in or plugin); the facet still checks it and reports a CK601 at the argument
rather than emit code whose threads disagree about which rows they hold.
"""

from __future__ import annotations

from cake_core.ir.kernel import Op
from cake_core.ir.types import FragmentType
from cake_core.lower.context import CTYPE, FragVar, LowerContext, paren
from cake_core.lower.fragments import coord, index, nest
from cake_core.lower.layouts import COL, ROW, Dist
from cake_core.lower.plan import LayoutContext, LowerError

_INT_MAX = "0x7fffffff"


def _row_projection(d: Dist) -> Dist:
    return d.project((d.axes[0],))


class ArgminUpdateLowering:
    """The facet (`__call__`) plus the layout constraint it relies on (`layouts`)."""

    def layouts(self, op: Op, ctx: LayoutContext) -> None:
        """Tie the running pair to the rows of `dist`'s layout (and back: a pair whose
        layout is already fixed says nothing about the columns, so only the forward
        direction is stated)."""
        d = ctx.get(op.args["dist"])
        if d is None or not d.axes or d.axes[0] is None:
            return
        rows = _row_projection(d)
        for name in ("best_v", "best_i"):
            if isinstance(op.args[name].type, FragmentType):
                ctx.put(op.args[name], rows)

    def __call__(self, op: Op, ctx: LowerContext) -> str:
        x = ctx.frag(op, "dist")
        if x.dist.opaque or x.dist.axes != (ROW, COL):
            raise LowerError(op.arg_spans.get("dist", op.span),
                             "`argmin_update` is lowered for distance fragments whose rows and "
                             "columns are those of an accumulator or of the generic layout")
        want = _row_projection(x.dist)
        pair: list[FragVar] = []
        for name in ("best_v", "best_i"):
            fv = ctx.frag(op, name)
            if fv.dist.opaque or not fv.dist.compatible(want):
                raise LowerError(op.arg_spans.get(name, op.span),
                                 f"`{op.args[name].name}` is not held in the rows of `dist`'s "
                                 f"{x.dist.parent.kind} register layout, so the running pair "
                                 "and the chunk result live in different threads")
            pair.append(fv)
        bv, bi = pair
        p = x.dist.parent
        rows = nest(ctx, p.axis_loops(ROW))
        cols = nest(ctx, p.axis_loops(COL))
        full = nest(ctx, p.loops)
        ctype = CTYPE[x.dtype]
        v, c, e = (ctx.names.internal(b) for b in ("chunk_v", "chunk_col", "e"))
        col = ctx.linear(coord(x.dist, COL, full))
        guard = "" if p.col_valid else f"{col} < {p.shape[1]} && "
        scan = (f"{cols.header}{{ const {ctype} {e} = {x.cname}[{index(x.dist, full)}]; "
                f"if ({guard}cake_f32({e}) < cake_f32({v})) {{ {v} = {e}; {c} = {col}; }} }}")
        if p.col_valid:
            first = {lp.var: 0 for lp in p.axis_loops(COL)}
            init_v = f"{x.cname}[{index(x.dist, full, first)}]"
            init_c = ctx.linear(coord(x.dist, COL, full, first))
        else:  # the thread's first column may lie past the fragment
            init_v = "INFINITY" if ctype == "float" else f"cake_cvt<{ctype}>(INFINITY)"
            init_c = _INT_MAX
        shuffles = " ".join(f"cake_argmin_xor({v}, {c}, {m});" for m in p.row_lanes)
        off = paren(ctx.int_value(op.args["offset"]))
        rv, ri = index(bv.dist, rows), index(bi.dist, rows)
        update = (f"if (cake_f32({v}) < {bv.cname}[{rv}]) {{ {bv.cname}[{rv}] = cake_f32({v}); "
                  f"{bi.cname}[{ri}] = {c} + {off}; }}")
        return (f"{rows.header}{{ {ctype} {v} = {init_v}; int {c} = {init_c}; {scan} "
                f"{shuffles} {update} }}")


ARGMIN_UPDATE = ArgminUpdateLowering()
