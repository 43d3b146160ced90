"""The builder forms of persistent scheduling: `sm_count()` and `tile_coords(...)`.

Both fold into the IR's integer expressions rather than becoming ops: `sm_count()` is a
launch-time size (a `Dim` the device supplies, see `cake_core.ir.symbolic.SM_COUNT`) and
`tile_coords` is index arithmetic over it (`cake_core.ir.tile_order`).  So the grid, the
bounds checks, the simulator, the cost model and the CUDA all read one definition and no
facet of them can disagree with another.
"""

from __future__ import annotations

from cake_core.diagnostics import codes
from cake_core.diagnostics.model import Diagnostic
from cake_core.elab.scope import INT_TYPE, int_value
from cake_core.elab.state import KernelState, ProgramState
from cake_core.ir import symbolic as S
from cake_core.ir.kernel import Value
from cake_core.ir.tile_order import DEFAULT_GROUP, RASTERS, tile_coords
from cake_core.ir.types import ErrorType, IntType, StageType, TupleType
from cake_core.ir.values import error_value, sym_of
from cake_core.source import Span
from cake_core.syntax import ast

_USAGE = 'tile_coords(tile, tiles_m, tiles_n, group=8, raster="m")'
_PAIR = TupleType((INT_TYPE, INT_TYPE))


class TileForms:
    """`_form_sm_count` and `_form_tile_coords`, mixed into the builder forms."""

    pb: ProgramState
    k: KernelState | None
    diags: list[Diagnostic]

    def expr(self, e: ast.Expr, targets: tuple[str, ...] = ()) -> Value:
        raise NotImplementedError

    def bounded_int(self, sym: S.SymExpr, span: Span) -> Value:
        raise NotImplementedError

    def _form_sm_count(self, e: ast.Call) -> Value:
        if e.args or e.keywords:
            self.diags.append(codes.BAD_ARGUMENTS.at(
                e.span, "sm_count() takes no arguments: the device supplies the count"))
            return error_value(e.span)
        return int_value(S.sm_count(), e.span, "sm_count()")

    def _form_tile_coords(self, e: ast.Call) -> Value:
        if not 3 <= len(e.args) <= 5:
            self.diags.append(codes.BAD_ARGUMENTS.at(e.span, _USAGE))
            return error_value(e.span)
        given: dict[str, ast.Expr] = dict(zip(
            ("tile", "tiles_m", "tiles_n", "group", "raster"), e.args, strict=False))
        for kw in e.keywords:
            if kw.name not in ("group", "raster") or kw.name in given:
                self.diags.append(codes.BAD_ARGUMENTS.at(
                    kw.name_span, f"tile_coords has no parameter `{kw.name}` here: {_USAGE}"))
                return error_value(e.span)
            given[kw.name] = kw.value
        ints: list[S.SymExpr] = []
        for name in ("tile", "tiles_m", "tiles_n"):
            v = self.expr(given[name])
            if isinstance(v.type, ErrorType):
                return error_value(e.span)
            if not isinstance(v.type, IntType | StageType):
                self.diags.append(codes.TYPE_MISMATCH.at(
                    given[name].span, f"`{name}` is an int, not {v.type.describe()}"))
                return error_value(e.span)
            ints.append(sym_of(v))
        group = DEFAULT_GROUP
        if "group" in given:
            gv = self.expr(given["group"])
            c = gv.sym.const if gv.sym is not None else None
            if c is None or c < 1:
                self.diags.append(codes.NOT_CONSTANT.at(
                    given["group"].span, "`group` is a positive constant (the swizzle width "
                    "in tiles)"))
                return error_value(e.span)
            group = c
        raster = "m"
        if "raster" in given:
            rv = self.expr(given["raster"])
            if rv.const not in RASTERS:
                self.diags.append(codes.BAD_ARGUMENTS.at(
                    given["raster"].span, 'raster is "m" (M-tiles fastest) or "n"'))
                return error_value(e.span)
            raster = str(rv.const)
        tm, tn = tile_coords(ints[0], ints[1], ints[2], group, raster)
        pair = (self.bounded_int(tm, e.span), self.bounded_int(tn, e.span))
        if any(isinstance(p.type, ErrorType) for p in pair):
            return error_value(e.span)
        return Value("tile_coords", _PAIR, e.span, None, pair)


__all__ = ["TileForms"]
