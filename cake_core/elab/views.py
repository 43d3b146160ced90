"""Attributes and subscripts: looking into a value rather than computing a new one.

`block.x`, `.shape`, `.dtype`, `.T`, a buffer's stage `buf[s]`, an mbarrier's slot and a
tuple's item make no op: they pick or re-type part of a value, and a view of shared memory
records where it came from (`ViewOrigin`) for the analyses.  Their checks (index ranges,
stage counts, the runtime range of an index variable) are about shapes, not about
primitives, so they live apart from calls and operators.
"""

from __future__ import annotations

import difflib

from cake_core.diagnostics import codes
from cake_core.diagnostics.model import Applicability, Fix, TextEdit
from cake_core.elab.forms import BuilderForms
from cake_core.elab.scope import int_value
from cake_core.elab.state import KernelState, ProgramState
from cake_core.ir import symbolic as S
from cake_core.ir.kernel import Value
from cake_core.ir.types import (
    BarrierType,
    DTypeType,
    ErrorType,
    FragmentType,
    IndexSpaceType,
    IntType,
    SmemType,
    StageType,
    TensorType,
    TileType,
    TupleType,
)
from cake_core.ir.values import ViewOrigin, error_value, sym_of
from cake_core.syntax import ast

_INDEX_KINDS = (IntType, StageType)  # a tuple, not `IntType | StageType`: built once


class ViewEvaluation(BuilderForms):
    """The Evaluator's attributes and subscripts, over the builder forms."""

    def __init__(self, pb: ProgramState, kernel: KernelState | None) -> None:
        self.pb = pb
        self.k = kernel
        self.diags = pb.diags
        self._stage_mismatches: set[tuple[str, str]] = set()
        self._index_vars: dict[tuple[str, str], S.Var] = {}  # see _index_var

    def _attribute(self, e: ast.Attribute, targets: tuple[str, ...] = ()) -> Value:
        base = self.expr(e.value)
        t = base.type
        if isinstance(t, ErrorType):
            return error_value(e.span)
        if isinstance(t, IndexSpaceType):
            if e.attr not in t.attrs:
                return self._no_attr(e, base, list(t.attrs))
            var = self._index_var(t.name, e.attr)
            return int_value(var, e.span, var.name)
        if isinstance(t, SmemType) and e.attr == "T":
            if len(t.shape) < 2:
                self.diags.append(codes.SHAPE_MISMATCH.at(e.span, "`.T` needs a 2-D view"))
                return error_value(e.span)
            shape = (*t.shape[:-2], t.shape[-1], t.shape[-2])
            nt = SmemType(t.dtype, shape, t.layout, t.buffer, t.buffer_shape, not t.transposed)
            return Value(f"{base.name}.T", nt, e.span, None, base.const)
        if isinstance(t, TensorType | SmemType | FragmentType | TileType):
            if e.attr == "shape":
                elts = tuple(int_value(d, e.span) for d in t.shape)
                return Value("shape", TupleType(tuple(x.type for x in elts)), e.span, None, elts)
            if e.attr == "dtype":
                return Value(t.dtype.value, DTypeType(), e.span, None, t.dtype)
        if isinstance(t, StageType) and e.attr == "phase":
            return int_value(S.Var(f"{base.name}.phase", S.Const(0), S.Const(2)), e.span)
        methods = [p.name for p in self.pb.registry.methods_of(t)]
        return self._no_attr(e, base, methods + (["T"] if isinstance(t, SmemType) else []))

    def _no_attr(self, e: ast.Attribute, base: Value, options: list[str]) -> Value:
        hit = difflib.get_close_matches(e.attr, options, n=1, cutoff=0.5)
        fixes = [Fix(f"use `.{hit[0]}`", (TextEdit(e.attr_span, hit[0]),),
                     Applicability.UNSAFE)] if hit else []
        msg = f"{base.type.describe()} has no attribute `{e.attr}`"
        if hit:
            msg += f"; did you mean `{hit[0]}`?"
        elif options:
            msg += f" (it has: {', '.join(sorted(set(options)))})"
        self.diags.append(codes.UNKNOWN_NAME.at(e.attr_span, msg, fixes=fixes))
        return error_value(e.span)

    def _index_var(self, space: str, attr: str) -> S.Var:
        """The runtime index `space.attr` with its range, as far as the kernel knows it.

        Built once per kernel (Vars are immutable and a kernel names `block.x` often); not
        `warp.rank`, whose range depends on the role, nor anything before the kernel exists.
        """
        cacheable = self.k is not None and self.k.kernel is not None and \
            (space, attr) != ("warp", "rank")
        if cacheable:
            cached = self._index_vars.get((space, attr))
            if cached is not None:
                return cached
        var = self._new_index_var(space, attr)
        if cacheable:
            self._index_vars[(space, attr)] = var
        return var

    def _new_index_var(self, space: str, attr: str) -> S.Var:
        hi: S.SymExpr | None = None
        k = self.k.kernel if self.k is not None else None
        if k is not None:
            if space == "block" and attr in "xyz":
                i = "xyz".index(attr)
                hi = k.grid[i] if i < len(k.grid) else S.Const(1)
            elif space == "warp" and attr == "id":
                hi = S.Const(k.warps)
            elif space == "warp" and attr == "rank" and self.k is not None and self.k.role:
                hi = S.Const(self.k.role.warps)
            elif space == "lane":
                hi = S.Const(32)
            elif space == "thread":
                hi = S.Const(k.threads)
            elif space == "warpgroup" and attr == "id":
                hi = S.Const(max(1, -(-k.warps // 4)))  # a last, partial warpgroup counts
        return S.Var(f"{space}.{attr}", S.Const(0), hi)

    def _fragment_columns(self, e: ast.Subscript, base: Value,
                          raw: tuple[ast.Expr, ...]) -> Value:
        """`x[:, a:b]` on a fragment: the calls layer makes it the `cols` primitive."""
        self.diags.append(codes.BAD_INDEX.at(e.index.span, "fragments cannot be sliced here"))
        return error_value(e.span)

    def _subscript(self, e: ast.Subscript, targets: tuple[str, ...] = ()) -> Value:
        base = self.expr(e.value)
        if isinstance(base.type, ErrorType):
            return error_value(e.span)
        raw = e.index.elts if isinstance(e.index, ast.Tuple) else (e.index,)
        if isinstance(base.type, FragmentType) and any(isinstance(x, ast.Slice) for x in raw):
            return self._fragment_columns(e, base, raw)
        for x in raw:
            if isinstance(x, ast.Slice):
                self.diags.append(codes.BAD_INDEX.at(
                    e.index.span, "slices are not supported; take sub-tiles with "
                    ".tile(shape, coords)"))
                return error_value(e.span)
        idx = [self.expr(x) for x in raw]
        for v in idx:
            if isinstance(v.type, ErrorType):
                return error_value(e.span)
        t = base.type
        if isinstance(t, SmemType):
            if len(idx) >= len(t.shape):
                self.diags.append(codes.BAD_INDEX.at(
                    e.index.span, f"{len(idx)} indices into a rank-{len(t.shape)} buffer leave "
                    "no tile; index only the leading (stage) dimensions"))
                return error_value(e.span)
            for i, v in enumerate(idx):
                x, extent = raw[i], t.shape[i]
                if not isinstance(v.type, _INDEX_KINDS):
                    self.diags.append(codes.TYPE_MISMATCH.at(
                        x.span, f"buffer indices are ints, not {v.type.describe()}"))
                    return error_value(e.span)
                if isinstance(v.type, StageType) and extent.const is not None and \
                        v.type.stages != extent.const:
                    pair = (t.buffer, v.type.pipeline)
                    if pair not in self._stage_mismatches:  # one finding per buffer/pipeline
                        self._stage_mismatches.add(pair)
                        self.diags.append(codes.BAD_INDEX.at(
                            x.span, f"stage of a {v.type.stages}-stage pipeline indexes "
                            f"`{t.buffer}`, which has {extent.const} stages"))
                    return error_value(e.span)
                # an index without a folded value has none: `sym_of` would make a Var
                c = v.sym.const if v.sym is not None else None
                ext = extent.const
                if c is not None and ext is not None and not 0 <= c < ext:
                    self.diags.append(codes.BAD_INDEX.at(
                        x.span, f"index {c} is out of range for extent {ext}"))
                    return error_value(e.span)
            nt = SmemType(t.dtype, t.shape[len(idx):], t.layout, t.buffer, t.buffer_shape,
                          t.transposed)
            return Value(f"{base.name}[...]", nt, e.span, None, ViewOrigin(base, tuple(idx)))
        if isinstance(t, BarrierType):
            if len(idx) != 1 or not isinstance(idx[0].type, _INDEX_KINDS):
                self.diags.append(codes.BAD_INDEX.at(e.index.span, "index an mbarrier array with "
                                                     "one int"))
                return error_value(e.span)
            c = sym_of(idx[0]).const
            if c is not None and not 0 <= c < t.n:
                self.diags.append(codes.BAD_INDEX.at(
                    e.index.span, f"mbarrier index {c} is out of range (it holds {t.n})"))
                return error_value(e.span)
            return Value(f"{base.name}[...]", BarrierType(t.name, t.count, t.n, True), e.span, None,
                         ViewOrigin(base, tuple(idx)))
        if isinstance(t, TupleType) and isinstance(base.const, tuple):
            c = sym_of(idx[0]).const if len(idx) == 1 and idx[0].sym is not None else None
            if c is None or not -len(base.const) <= c < len(base.const):
                self.diags.append(codes.BAD_INDEX.at(e.index.span, "tuple index must be a "
                                                     "constant within range"))
                return error_value(e.span)
            return base.const[c]
        if isinstance(t, TensorType):
            self.diags.append(codes.BAD_INDEX.at(
                e.span, f"global tensors are accessed by tiles: "
                f"`{base.name}.tile(shape, coords)`, e.g. `A.tile((BM, BK), (block.x, k))`"))
            return error_value(e.span)
        self.diags.append(codes.BAD_INDEX.at(e.span, f"{t.describe()} cannot be indexed"))
        return error_value(e.span)
