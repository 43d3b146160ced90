"""Calls: the builder forms, and binding, type-checking and emitting primitive ops.

A call is where the IR grows: `apply` checks that the arch has the primitive, binds and
checks the arguments, runs the primitive's type rule and appends the op to the kernel.
Everything that turns into an op goes through it (operators too), so it lives on its own,
apart from the compile-time evaluation around it.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable
from dataclasses import replace

from cake_core.diagnostics import codes
from cake_core.diagnostics.model import Applicability, Diagnostic, Fix, Related, TextEdit
from cake_core.elab.calls import Argument, bind, check_arguments
from cake_core.elab.forms import BuilderForms
from cake_core.elab.scope import builtin_names
from cake_core.elab.state import KernelState, ProgramState
from cake_core.elab.views import ViewEvaluation
from cake_core.ir.kernel import Op, Value
from cake_core.ir.types import ErrorType, NoneType, TupleType, Type
from cake_core.ir.values import ViewOrigin, error_value
from cake_core.primitives.registry import Primitive
from cake_core.primitives.typecheck import CallContext
from cake_core.source import Span
from cake_core.syntax import ast

#: Consts through which `note_use` marks more values.
HOLDS_VALUES = (tuple, ViewOrigin)

#: The builder forms by the name they are called with (`_form_cdiv` handles `cdiv(...)`),
#: looked up once here rather than by `getattr` on every call.
_FORMS: dict[str, Callable[[BuilderForms, ast.Call], Value]] = {
    name.removeprefix("_form_"): getattr(BuilderForms, name)
    for name in dir(BuilderForms) if name.startswith("_form_")}

#: Python functions people reach for, and the CAKE primitive that does that job
#: (a closer answer than the nearest spelling: `sum` is not `sub`).
_PYTHON_EQUIVALENTS = {"sum": "row_sum", "argmin": "row_argmin", "argmax": "row_argmax"}
#: Python's built-in functions (print, len, eval, exec, __import__, ...): calling one
#: means the text was written as a Python program, which is worth saying.
_PYTHON_BUILTINS = frozenset(n for n, v in vars(builtins).items() if callable(v))



class CallEvaluation(ViewEvaluation):
    """The Evaluator's calls, over its attributes (a call of an unknown method reports the
    attribute)."""

    def __init__(self, pb: ProgramState, kernel: KernelState | None) -> None:
        super().__init__(pb, kernel)
        self._tmp = 0
        self._unnamed: dict[int, Value] = {}
        """This kernel's op results not yet bound to a name, by identity (see `bind`).  By
        provenance, not by name: a user's global may well be called `_t1`."""
        self._arch_reported: dict[str, Diagnostic] = {}  # primitive -> its CK108
        self._reported_at: set[tuple[str, object, object]] = set()
        """Findings a type rule placed outside its call (at a declaration), so far."""

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
            # A rule that reports at a declaration (an accumulator's dtype) fires at every
            # use; the declaration is one bug, so one finding.
            seen = self._reported_at
            for d in found:
                where = (d.code, d.span.start, d.span.end)
                if d.span.start < span.start or span.end < d.span.end:
                    if where in seen:
                        continue
                    seen.add(where)
                self.diags.append(d)
            if not any(d.severity.value == "warning" for d in found):
                return error_value(span)
        if isinstance(result, ErrorType):
            return error_value(span)
        used = k.used
        for v in values.values():
            used[id(v)] = v  # `KernelBuilder.note_use`, inlined ...
            if isinstance(v.const, HOLDS_VALUES):
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
