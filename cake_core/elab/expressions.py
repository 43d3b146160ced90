"""Expression evaluation for the IR builder: folding, names, calls, views.

Shared by the top level (where only constants and `dim()` are legal) and kernel bodies
(where calls become ops).  Kept separate from statement handling so each file reads as
one concern.
"""

from __future__ import annotations

import builtins
import difflib
import math
from collections.abc import Callable
from dataclasses import replace
from operator import attrgetter
from typing import Any

from cake_core.diagnostics import codes
from cake_core.diagnostics.model import Applicability, Diagnostic, Fix, Related, TextEdit
from cake_core.elab.calls import Argument, bind, check_arguments
from cake_core.elab.forms import BuilderForms
from cake_core.elab.scope import (
    INDEX_SPACES,
    INT_TYPE,
    builtin,
    builtin_names,
    float_value,
    int_value,
    str_value,
)
from cake_core.elab.state import KernelState, ProgramState
from cake_core.ir import symbolic as S
from cake_core.ir.kernel import Op, Value
from cake_core.ir.types import (
    BarrierType,
    DType,
    DTypeType,
    ErrorType,
    FragmentType,
    IndexSpaceType,
    IntType,
    NoneType,
    ScalarType,
    SmemType,
    StageType,
    TensorType,
    TileType,
    TupleType,
    Type,
)
from cake_core.ir.values import (
    Predicate,
    ViewOrigin,
    constant_truth,
    error_value,
    sym_of,
)
from cake_core.primitives.registry import Primitive
from cake_core.primitives.typecheck import CallContext
from cake_core.source import Span
from cake_core.syntax import ast

#: Operator spelling -> primitive, used by the builder for `a + b` and friends.
OPERATORS = {"+": "add", "-": "sub", "*": "mul", "/": "div", "<": "lt", "<=": "le",
             ">": "gt", ">=": "ge", "==": "eq", "!=": "ne"}

_BOOL = ScalarType(DType.BOOL)
_type_of = attrgetter("type")  # in C: no Python frame per element
_HOLDS_VALUES = (tuple, ViewOrigin)  # consts through which `note_use` marks more values
#: Int literal -> its `Const`, shared: Consts are immutable and the same few literals
#: (0, 1, 4, 128, ...) recur in every kernel.  Bounded, as a long-lived server sees many.
_LITERALS: dict[int, S.Const] = {}
_INDEX_KINDS = (IntType, StageType)  # a tuple, not `IntType | StageType`: built once
_INT_OPS = {"+": S.add, "-": S.sub, "*": S.mul, "//": S.floordiv, "%": S.mod}


class Evaluator(BuilderForms):
    def __init__(self, pb: ProgramState, kernel: KernelState | None) -> None:
        self.pb = pb
        self.k = kernel
        self.diags = pb.diags
        self._tmp = 0
        self._unnamed: dict[int, Value] = {}
        """This kernel's op results not yet bound to a name, by identity (see `bind`).  By
        provenance, not by name: a user's global may well be called `_t1`."""
        self._stage_mismatches: set[tuple[str, str]] = set()
        self._arch_reported: dict[str, Diagnostic] = {}  # primitive -> its CK108
        self._index_vars: dict[tuple[str, str], S.Var] = {}  # see _index_var

    # -- names --------------------------------------------------------------------------
    def lookup(self, name: str, span: Span) -> Value:
        k = self.k
        if k is not None:
            v = k.scope.get(name)
            if v is not None:
                k.note_use(v)
                return v
        v = self.pb.globals.get(name)
        if v is not None:
            return v
        b = builtin(name, span)
        if b is not None:
            return b
        pool = list(self.pb.globals) + builtin_names()
        if self.k is not None:
            pool += list(self.k.scope)
        pool += [p.name for p in self.pb.registry.functions()]
        hit = difflib.get_close_matches(name, pool, n=1, cutoff=0.6)
        fixes = [Fix(f"replace with `{hit[0]}`", (TextEdit(span, hit[0]),),
                     Applicability.UNSAFE)] if hit else []
        self.diags.append(codes.UNKNOWN_NAME.at(
            span, f"`{name}` is not defined" + (f"; did you mean `{hit[0]}`?" if hit else ""),
            fixes=fixes))
        return error_value(span)

    def bind(self, target: ast.Expr, value: Value, *, scope: dict[str, Value],
             stmt: ast.Stmt | None = None) -> None:
        if isinstance(value.type, ErrorType):
            for name in _names_in(target):
                self._set(name, error_value(target.span), scope, stmt)
            return
        if isinstance(target, ast.Name):
            v = value
            if v.name == target.id:
                pass  # e.g. an op's result, already named for its target
            elif self._unnamed.pop(id(v), None) is v:
                v.name = target.id  # `x = a + b`: the op's result is `x`, not a copy of it
            elif not isinstance(v.type, TupleType):
                v = Value(target.id, value.type, target.span, value.sym, value.const)
                if isinstance(value.sym, S.Dim) and scope is self.pb.globals:
                    v = value  # keep the dim's identity for hovers
            self._set(target.id, v, scope, stmt)
        elif isinstance(target, ast.Tuple):
            elts = value.const if isinstance(value.type, TupleType) else None
            if not isinstance(elts, tuple) or len(elts) != len(target.elts):
                n = len(elts) if isinstance(elts, tuple) else 1
                self.diags.append(codes.TYPE_MISMATCH.at(
                    target.span, f"cannot unpack {n} value{'s' if n != 1 else ''} into "
                    f"{len(target.elts)} names"))
                for name in _names_in(target):  # bound, so their uses stay quiet
                    self._set(name, error_value(target.span), scope, stmt)
                return
            for t, e in zip(target.elts, elts, strict=True):
                self.bind(t, e, scope=scope, stmt=stmt)
        else:
            self.diags.append(codes.UNSUPPORTED_SYNTAX.at(
                target.span, "assign to a name or a tuple of names"))

    def _set(self, name: str, v: Value, scope: dict[str, Value], stmt: ast.Stmt | None) -> None:
        if self.k is not None and scope is self.k.scope:
            if v.name != name:
                v = Value(name, v.type, v.span, v.sym, v.const)
            self.k.define(name, v, stmt)
        else:
            if name in scope and not isinstance(scope[name].type, ErrorType):
                self.diags.append(codes.REDEFINITION.at(
                    v.span, f"`{name}` is already defined at the top level",
                    related=[Related(scope[name].span, "defined here")]))
                return
            scope[name] = v

    # -- expressions ---------------------------------------------------------------------
    def expr(self, e: ast.Expr, targets: tuple[str, ...] = ()) -> Value:
        cls = type(e)
        if cls is ast.Name:
            # the most common node: the kernel's and the file's own names and built-ins
            # resolve here, with fewer calls; `lookup` has the whole story (and typos)
            name = e.id  # type: ignore[attr-defined]
            k = self.k
            if k is not None:
                v = k.scope.get(name)
                if v is not None:
                    k.used[id(v)] = v  # `KernelBuilder.note_use`, inlined ...
                    if isinstance(v.const, _HOLDS_VALUES):
                        k.note_use(v)  # ... unless the value holds others
                    return v
            v = self.pb.globals.get(name)
            if v is None:
                v = builtin(name, e.span) or self.lookup(name, e.span)
            return v
        # a table keyed by node class instead of an isinstance chain: this runs for
        # every node of every expression
        handler = _EXPR_HANDLERS.get(cls) or _expr_handler(cls)
        return handler(self, e, targets)

    def _invalid(self, e: ast.Invalid, targets: tuple[str, ...]) -> Value:
        return error_value(e.span)  # the parser already reported it

    def _name(self, e: ast.Name, targets: tuple[str, ...]) -> Value:
        return self.lookup(e.id, e.span)

    def _tuple(self, e: ast.Tuple | ast.ListExpr, targets: tuple[str, ...]) -> Value:
        expr, values = self.expr, []
        for x in e.elts:  # a loop, not a comprehension: one call fewer (tuples abound)
            values.append(expr(x))
        elts = tuple(values)
        return Value("tuple", TupleType(tuple(map(_type_of, elts))), e.span, None, elts)

    def _binop_node(self, e: ast.BinOp, targets: tuple[str, ...]) -> Value:
        return self.binop(e.op, e.left, e.right, e.span)

    def _ifexp(self, e: ast.IfExp, targets: tuple[str, ...]) -> Value:
        test = self.expr(e.test)
        truth = constant_truth(test)
        if truth is None:
            if not isinstance(test.type, ErrorType):
                self.diags.append(codes.NOT_CONSTANT.at(
                    e.test.span, "a conditional expression needs a compile-time condition; "
                    "use where() on fragments"))
            return error_value(e.span)
        return self.expr(e.body if truth else e.orelse)

    def _unsupported(self, e: ast.Expr, targets: tuple[str, ...]) -> Value:
        self.diags.append(codes.UNSUPPORTED_SYNTAX.at(e.span, "this expression is not supported"))
        return error_value(e.span)

    def _constant(self, e: ast.Constant, targets: tuple[str, ...] = ()) -> Value:
        c = e.value
        if type(c) is int:  # the common literal first (a bool is an int, but not this)
            sym = _LITERALS.get(c)
            if sym is None:
                sym = S.Const(c)
                if len(_LITERALS) < 4096:
                    _LITERALS[c] = sym
            return Value(str(c), INT_TYPE, e.span, sym)  # `int_value`, inlined
        if type(c) is str:
            return str_value(c, e.span)
        if isinstance(c, bool):
            return Value(str(c), _BOOL, e.span, None, c)
        if isinstance(c, int):
            return int_value(S.Const(c), e.span)
        if isinstance(c, float):
            return float_value(c, e.span)
        if isinstance(c, str):
            return str_value(c, e.span)
        return Value("None", NoneType(), e.span)

    def binop(self, op: str, left: ast.Expr, right: ast.Expr, span: Span) -> Value:
        a, b = self.expr(left), self.expr(right)
        if isinstance(a.type, ErrorType) or isinstance(b.type, ErrorType):
            return error_value(span)
        ints = isinstance(a.type, IntType | StageType) and isinstance(b.type, IntType | StageType)
        if ints:
            sa, sb = sym_of(a), sym_of(b)
            if op in _INT_OPS:
                try:
                    return int_value(_INT_OPS[op](sa, sb), span)
                except ZeroDivisionError:
                    self.diags.append(codes.DIVISION_BY_ZERO.at(span, "division by zero"))
                    return error_value(span)
            if op == "**" and sa.const is not None and sb.const is not None and sb.const >= 0:
                return int_value(S.Const(sa.const ** sb.const), span)
            if op == "/":
                fix = self._op_fix(left, right, "/", "//")
                self.diags.append(codes.TYPE_MISMATCH.at(
                    span, "`/` on ints: integer division is `//`", fixes=fix))
                return error_value(span)
            if op in ("<<", ">>", "&", "|", "^") and sa.const is not None and sb.const is not None:
                x, y = sa.const, sb.const
                val = {"<<": x << y, ">>": x >> y, "&": x & y, "|": x | y, "^": x ^ y}[op]
                return int_value(S.Const(val), span)
        if _is_number(a) and _is_number(b):
            folded = _fold_float(op, _pyval(a), _pyval(b))
            if folded is not None:
                return float_value(folded, span)
        prim_name = OPERATORS.get(op)
        if prim_name is None or self.k is None:
            self.diags.append(codes.TYPE_MISMATCH.at(
                span, f"`{op}` is not defined for {a.type.describe()} and {b.type.describe()}"))
            return error_value(span)
        return self.apply(prim_name, [(a, left.span), (b, right.span)], {}, span)

    def _op_fix(self, left: ast.Expr, right: ast.Expr, old: str, new: str) -> list[Fix]:
        src = self.pb.source
        between = src.data[left.span.end.offset:right.span.start.offset]
        i = between.find(old.encode())
        if i < 0:
            return []
        start = left.span.end.offset + i
        return [Fix(f"use `{new}`", (TextEdit(src.span(start, start + len(old)), new),),
                    Applicability.UNSAFE)]

    def _unary(self, e: ast.UnaryOp, targets: tuple[str, ...] = ()) -> Value:
        v = self.expr(e.operand)
        if isinstance(v.type, ErrorType):
            return error_value(e.span)
        if e.op == "not":
            t = constant_truth(v)
            if t is not None:
                return Value(str(not t), _BOOL, e.span, None, not t)
            return Value("not", _BOOL, e.span, None, Predicate("not", (v,)))
        if isinstance(v.type, IntType) and v.sym is not None:
            if e.op == "-":
                return int_value(S.sub(S.Const(0), v.sym), e.span)
            if e.op == "+":
                return v
            if e.op == "~" and v.sym.const is not None:
                return int_value(S.Const(~v.sym.const), e.span)
        if isinstance(v.type, ScalarType) and isinstance(v.const, float) and e.op in "+-":
            return float_value(-v.const if e.op == "-" else v.const, e.span)
        if isinstance(v.type, FragmentType) and e.op == "-" and self.k is not None:
            return self.apply("neg", [(v, e.operand.span)], {}, e.span)
        self.diags.append(codes.TYPE_MISMATCH.at(
            e.span, f"`{e.op}` is not defined for {v.type.describe()}"))
        return error_value(e.span)

    def _compare(self, e: ast.Compare, targets: tuple[str, ...] = ()) -> Value:
        vals = [self.expr(x) for x in e.operands]
        if any(isinstance(v.type, ErrorType) for v in vals):
            return error_value(e.span)
        if any(isinstance(v.type, FragmentType) for v in vals):
            if len(e.ops) != 1:
                self.diags.append(codes.TYPE_MISMATCH.at(
                    e.span, "chained comparisons are not defined on fragments"))
                return error_value(e.span)
            return self.apply(OPERATORS[e.ops[0]], [(vals[0], e.operands[0].span),
                                                    (vals[1], e.operands[1].span)], {},
                              e.span)
        results: list[bool | None] = []
        for op, a, b in zip(e.ops, vals, vals[1:], strict=False):
            results.append(_compare_const(op, a, b))
        if all(r is not None for r in results):
            val = all(results)
            return Value(str(val), _BOOL, e.span, None, val)
        for v, x in zip(vals, e.operands, strict=True):
            if not isinstance(v.type, IntType | StageType | ScalarType):
                self.diags.append(codes.TYPE_MISMATCH.at(
                    x.span, f"cannot compare {v.type.describe()}"))
                return error_value(e.span)
        return Value("cond", _BOOL, e.span, None,
                     Predicate("compare", (e.ops, tuple(_sym_or(v) for v in vals))))

    def _boolop(self, e: ast.BoolOp, targets: tuple[str, ...] = ()) -> Value:
        vals = [self.expr(x) for x in e.values]
        if any(isinstance(v.type, ErrorType) for v in vals):
            return error_value(e.span)
        truths = [constant_truth(v) for v in vals]
        if all(t is not None for t in truths):
            val = all(truths) if e.op == "and" else any(truths)
            return Value(str(val), _BOOL, e.span, None, val)
        return Value(e.op, _BOOL, e.span, None, Predicate(e.op, tuple(vals)))

    # -- attributes and subscripts -----------------------------------------------------------
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

    def _subscript(self, e: ast.Subscript, targets: tuple[str, ...] = ()) -> Value:
        base = self.expr(e.value)
        if isinstance(base.type, ErrorType):
            return error_value(e.span)
        raw = e.index.elts if isinstance(e.index, ast.Tuple) else (e.index,)
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

    # -- calls -------------------------------------------------------------------------------
    def _call(self, e: ast.Call, targets: tuple[str, ...]) -> Value:
        if isinstance(e.func, ast.Name):
            name = e.func.id
            special = _FORMS.get(name)
            shadowed = (self.k is not None and name in self.k.scope) or name in self.pb.globals
            if special is not None and not shadowed:
                return special(self, e)
            prim = self.pb.registry.function(name)
            if prim is None:
                if shadowed:
                    self.diags.append(codes.TYPE_MISMATCH.at(
                        e.func.span, f"`{name}` is a value, not a primitive: it cannot be called"))
                    return error_value(e.span)
                return self._unknown_call(e, name)
            if self.k is None:
                self.diags.append(codes.INVALID_TOPLEVEL.at(
                    e.span, f"`{name}(...)` runs on the device: call it inside a @kernel"))
                return error_value(e.span)
            args, kws = self._args(e)
            if args is None:
                return error_value(e.span)
            return self.apply(prim, args, kws, e.span, targets)
        if isinstance(e.func, ast.Attribute):
            recv = self.expr(e.func.value)
            if isinstance(recv.type, ErrorType):
                return error_value(e.span)
            prim = self.pb.registry.method(recv.type, e.func.attr)
            if prim is None:
                return self._attribute(e.func)  # reports the unknown attribute
            if self.k is None:
                self.diags.append(codes.INVALID_TOPLEVEL.at(e.span, "methods run inside a @kernel"))
                return error_value(e.span)
            args, kws = self._args(e)
            if args is None:
                return error_value(e.span)
            args = [(recv, e.func.value.span), *args]
            return self.apply(prim, args, kws, e.span, targets)
        self.diags.append(codes.UNKNOWN_PRIMITIVE.at(e.func.span, "only primitives can be called"))
        return error_value(e.span)

    def _unknown_call(self, e: ast.Call, name: str) -> Value:
        reg = self.pb.registry
        hit = _PYTHON_EQUIVALENTS.get(name) or \
            reg.suggest(name, extra=[n for n in builtin_names() if n[0].islower()])
        fixes = [Fix(f"call `{hit}`", (TextEdit(e.func.span, hit),), Applicability.UNSAFE)] \
            if hit else []
        notes = []
        if name in _PYTHON_BUILTINS:
            notes.append("CAKE IR is not executed as Python: only CAKE primitives can be called")
        self.diags.append(codes.UNKNOWN_PRIMITIVE.at(
            e.func.span, f"`{name}` is not a CAKE primitive"
            + (f"; did you mean `{hit}`?" if hit else ""), fixes=fixes, notes=notes))
        for a in (*e.args, *(kw.value for kw in e.keywords)):
            self.expr(a)  # still resolve names inside, so typos there are found too
        return error_value(e.span)

    def _args(self, e: ast.Call) -> tuple[list[Argument] | None, dict]:
        expr, args = self.expr, []
        for a in e.args:  # a loop, not a comprehension: one call fewer per call
            args.append((expr(a), a.span))
        kws = {}
        for kw in e.keywords:
            value = kw.value
            kws[kw.name] = ((expr(value), value.span), kw.name_span)
        return args, kws

    def apply(self, prim_or_name: object, args: list[Argument], kws: dict, span: Span,
              targets: tuple[str, ...] = ()) -> Value:
        """Bind, type-check and emit one primitive application; return its result."""
        k = self.k
        if k is None or k.arch is None:  # e.g. `grid=(div(M, BM),)` in @kernel(...)
            self.diags.append(codes.INVALID_TOPLEVEL.at(
                span, "this runs on the device: it cannot appear in @kernel(...) or at the "
                "top level"))
            return error_value(span)
        arch = k.arch
        prim = prim_or_name if isinstance(prim_or_name, Primitive) else \
            self.pb.registry.function(str(prim_or_name))
        assert prim is not None
        # first: on an arch without the primitive, how it was called does not matter
        missing = None
        if prim.requires and not arch.features.issuperset(prim.requires):  # the rare case
            missing = [f.value for f in prim.requires if not arch.has(f)]
        if missing:
            kernel = k.kernel
            first = self._arch_reported.get(prim.key)
            at = next((i for i, d in enumerate(self.diags) if d is first), None)
            if first is not None and at is not None:
                # one finding per primitive; its later uses become related ranges
                self.diags[at] = self._arch_reported[prim.key] = replace(first, related=(
                    *first.related, Related(span, f"`{prim.name}` is also used here")))
                return error_value(span)
            hint = prim.unsupported or f"check docs/hardware.md for what {arch.name} offers"
            diag = codes.ARCH_UNSUPPORTED.at(
                span, f"`{prim.name}` needs {', '.join(missing)}, which {arch.name} "
                "does not have", notes=[hint],
                related=[] if kernel is None or kernel.arch_span is None else
                [Related(kernel.arch_span, "target arch set here")])
            self._arch_reported[prim.key] = diag
            self.diags.append(diag)
            return error_value(span)
        bound = bind(prim, args, kws, span, self.diags)
        if bound is None:
            return error_value(span)
        values, spans = bound
        if not check_arguments(prim, values, spans, self.diags):
            return error_value(span)
        role = k.role
        ctx = CallContext(prim, values, spans, span, arch, k, role.name if role else None,
                          targets)
        try:
            result = prim.type_rule(ctx)
        except Exception as exc:  # a faulty type rule must not take the compiler down
            self.diags.append(codes.INTERNAL_ERROR.at(
                span, f"type rule of `{prim.key}` failed: {type(exc).__name__}: {exc}"))
            return error_value(span)
        found = ctx.diagnostics
        if found:
            self.diags.extend(found)
            if not any(d.severity.value == "warning" for d in found):
                return error_value(span)
        if isinstance(result, ErrorType):
            return error_value(span)
        used = k.used
        for v in values.values():
            used[id(v)] = v  # `KernelBuilder.note_use`, inlined ...
            if isinstance(v.const, _HOLDS_VALUES):
                k.note_use(v)  # ... unless the value holds others
        if isinstance(result, TupleType):
            names = targets if len(targets) == len(result.elts) else ()
            results = tuple(Value(names[i], t, span) if names else self._temporary(t, span)
                            for i, t in enumerate(result.elts))
            out = Value("tuple", result, span, None, results)
        else:
            if isinstance(result, NoneType):
                results, out = (), Value("None", result, span)
            else:
                out = Value(targets[0], result, span) if len(targets) == 1 and targets[0] \
                    else self._temporary(result, span)
                results = (out,)
        k.new_op(Op(prim, values, results, span, spans))
        return out

    def _temporary(self, ty: Type, span: Span) -> Value:
        """An op result without a target name: `bind` names it in place later."""
        self._tmp += 1
        v = Value(f"_t{self._tmp}", ty, span)
        self._unnamed[id(v)] = v
        return v


#: The builder forms by the name they are called with (`_form_cdiv` handles `cdiv(...)`),
#: looked up once here rather than by `getattr` on every call.
_FORMS: dict[str, Callable[[Evaluator, ast.Call], Value]] = {
    name.removeprefix("_form_"): getattr(Evaluator, name)
    for name in dir(Evaluator) if name.startswith("_form_")}

#: The handler of each expression node class.  Every handler takes the names the value
#: is assigned to; only calls use them (to name their results).
_EXPR_HANDLERS: dict[type, Callable[[Evaluator, Any, tuple[str, ...]], Value]] = {
    ast.Invalid: Evaluator._invalid,
    ast.Constant: Evaluator._constant,
    ast.Name: Evaluator._name,
    ast.Tuple: Evaluator._tuple,
    ast.ListExpr: Evaluator._tuple,
    ast.BinOp: Evaluator._binop_node,
    ast.UnaryOp: Evaluator._unary,
    ast.Compare: Evaluator._compare,
    ast.BoolOp: Evaluator._boolop,
    ast.IfExp: Evaluator._ifexp,
    ast.Attribute: Evaluator._attribute,
    ast.Subscript: Evaluator._subscript,
    ast.Call: Evaluator._call,
}


def _expr_handler(cls: type) -> Callable[[Evaluator, Any, tuple[str, ...]], Value]:
    """The handler of a node class missing from the table: that of its nearest base."""
    for base in cls.__mro__:
        handler = _EXPR_HANDLERS.get(base)
        if handler is not None:
            return handler
    return Evaluator._unsupported


#: Python functions people reach for, and the CAKE primitive that does that job
#: (a closer answer than the nearest spelling: `sum` is not `sub`).
_PYTHON_EQUIVALENTS = {"sum": "row_sum", "argmin": "row_argmin", "argmax": "row_argmax"}
#: Python's built-in functions (print, len, eval, exec, __import__, ...): calling one
#: means the text was written as a Python program, which is worth saying.
_PYTHON_BUILTINS = frozenset(n for n, v in vars(builtins).items() if callable(v))


def _names_in(t: ast.Expr) -> list[str]:
    if isinstance(t, ast.Name):
        return [t.id]
    if isinstance(t, ast.Tuple):
        return [n for x in t.elts for n in _names_in(x)]
    return []


def _sym_or(v: Value) -> object:
    return v.sym if v.sym is not None else v


def _is_number(v: Value) -> bool:
    return isinstance(v.type, IntType | ScalarType)


def _pyval(v: Value) -> float | int | None:
    if isinstance(v.type, IntType) and v.sym is not None:
        return v.sym.const
    if isinstance(v.type, ScalarType) and isinstance(v.const, int | float) and \
            not isinstance(v.const, bool):
        return v.const
    return None


def _fold_float(op: str, a: float | int | None, b: float | int | None) -> float | None:
    if a is None or b is None:
        return None
    try:
        if op == "+":
            return float(a + b)
        if op == "-":
            return float(a - b)
        if op == "*":
            return float(a * b)
        if op == "/":
            return float(a / b)
        if op == "**":
            return float(a ** b)
    except (ZeroDivisionError, OverflowError):
        return math.nan
    return None


def _compare_const(op: str, a: Value, b: Value) -> bool | None:
    x, y = _pyval(a), _pyval(b)
    if x is None or y is None:
        return None
    return {"<": x < y, "<=": x <= y, ">": x > y, ">=": x >= y, "==": x == y,
            "!=": x != y}.get(op)


__all__ = ["INDEX_SPACES", "Evaluator", "Predicate", "ViewOrigin", "constant_truth"]
