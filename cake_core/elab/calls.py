"""Binding call arguments to a primitive's parameters and checking their kinds.

Kept apart from the builder because plugins' primitives go through exactly the same
binding, and its messages (missing, unknown, wrong kind) must read the same for all.
"""

from __future__ import annotations

import difflib

from cake_core.diagnostics import codes
from cake_core.diagnostics.model import Applicability, Diagnostic, Fix, TextEdit
from cake_core.elab.scope import BOOL_TYPE, float_value, int_value, none_value, str_value
from cake_core.ir.kernel import Value
from cake_core.ir.symbolic import Const
from cake_core.ir.types import ErrorType, NoneType, TupleType, Type
from cake_core.primitives.registry import ParamSpec, Primitive
from cake_core.source import Span

_KIND_NAMES = {
    "TensorType": "a global Tensor", "TileType": "a global tile (Tensor.tile)",
    "SmemType": "a shared-memory buffer or view", "FragmentType": "a register fragment",
    "PipelineType": "a pipeline", "BarrierType": "an mbarrier", "IntType": "an int",
    "ScalarType": "a scalar", "StrType": "a string", "DTypeType": "a dtype",
    "LayoutType": "a layout", "TupleType": "a tuple", "NoneType": "None",
    "StageType": "a pipeline stage", "RangeType": "a range",
}


def kind_name(cls: type[Type]) -> str:
    return _KIND_NAMES.get(cls.__name__, cls.__name__)


#: An argument as written: its value and the span of the expression that gave it.  A
#: plain pair, not a class: every argument of every call makes one.
Argument = tuple[Value, Span]


def default_value(spec: ParamSpec, span: Span) -> Value:
    d = spec.default
    if d is None:
        return none_value(span)
    if isinstance(d, bool):  # a flag, spelled as the literal would be (`True`)
        return Value(str(d), BOOL_TYPE, span, None, d)
    if isinstance(d, int):
        return int_value(Const(d), span)
    if isinstance(d, float):
        return float_value(d, span)
    if isinstance(d, str):
        return str_value(d, span)
    raise TypeError(f"unsupported default {d!r} for parameter {spec.name}")


def bind(prim: Primitive, positional: list[Argument], keywords: dict[str, tuple[Argument, Span]],
         call_span: Span, diags: list[Diagnostic],
         ) -> tuple[dict[str, Value], dict[str, Span]] | None:
    """Match arguments to parameters; report problems and return None on failure."""
    params = prim.params
    values: dict[str, Value] = {}
    spans: dict[str, Span] = {}
    ok = True
    if len(positional) > len(params):
        _, extra_span = positional[len(params)]
        user_params = [p.name for p in params if p.name != "self"]
        diags.append(codes.BAD_ARGUMENTS.at(
            extra_span,
            f"`{prim.signature}` takes {len(user_params)} argument"
            f"{'s' if len(user_params) != 1 else ''}, got "
            f"{len(positional) - (len(params) - len(user_params))}"))
        return None
    for i, (value, span) in enumerate(positional):  # (zip with strict= costs more than it reads)
        name = params[i].name
        values[name], spans[name] = value, span
    meant: set[str] = set()  # parameters a misspelt keyword was taken for
    if keywords:
        names = {p.name for p in params}
        for kw, ((value, span), name_span) in keywords.items():
            if kw not in names:
                pool = [p.name for p in params if p.name != "self"]
                hit = difflib.get_close_matches(kw, pool, n=1, cutoff=0.5)
                fixes = [Fix(f"rename to `{hit[0]}`", (TextEdit(name_span, hit[0]),),
                             Applicability.SAFE)] if hit else []
                msg = f"`{prim.name}` has no parameter `{kw}`"
                msg += f"; did you mean `{hit[0]}`?" if hit else f" (parameters: {', '.join(pool)})"
                diags.append(codes.BAD_ARGUMENTS.at(name_span, msg, fixes=fixes))
                meant.update(hit)
                ok = False
                continue
            if kw in values:
                diags.append(codes.BAD_ARGUMENTS.at(name_span, f"`{kw}` is given twice"))
                ok = False
                continue
            values[kw], spans[kw] = value, span
    # the positional ones are bound: only the parameters after them can be missing
    for spec in params[len(positional):] if len(positional) < len(params) else ():
        if spec.name in values:
            continue
        if spec.required and spec.name not in meant:  # else already reported as misspelt
            diags.append(codes.BAD_ARGUMENTS.at(
                call_span, f"`{prim.signature}` is missing `{spec.name}`"))
            ok = False
        elif not spec.required:
            values[spec.name] = default_value(spec, call_span)
    if not ok:
        return None
    return values, spans


_ERROR_OR_TUPLE = (ErrorType, TupleType)


def check_arguments(prim: Primitive, values: dict[str, Value], spans: dict[str, Span],
                    diags: list[Diagnostic]) -> bool:
    """Whether bound arguments may go to the type rule; reports what makes them unfit.

    An argument (or a tuple element) whose own definition failed makes the call fail
    quietly: that mistake is already reported.  Otherwise each argument's type must be one
    its parameter accepts, and constants must be constant.  One pass does both checks
    (every call goes through here), so findings of the second wait until the first passed.
    """
    found: list[Diagnostic] = []
    for spec in prim.params:
        v = values[spec.name]
        t = v.type
        if isinstance(t, _ERROR_OR_TUPLE):  # (one test for the common case: neither)
            if isinstance(t, ErrorType):
                return False
            if isinstance(v.const, tuple):
                for e in v.const:
                    if isinstance(e.type, ErrorType):
                        return False
        if spec.default is None and isinstance(t, NoneType):
            continue  # an optional argument left out (or passed as None): the rule decides
        if spec.kinds and not isinstance(t, spec.kinds):
            want = " or ".join(kind_name(k) for k in spec.kinds)
            what = "receiver" if spec.name == "self" else f"`{spec.name}`"
            found.append(codes.TYPE_MISMATCH.at(
                spans.get(spec.name, v.span),
                f"{what} of `{prim.name}` must be {want}, got {t.describe()}"))
        elif spec.const and v.sym is not None and v.sym.const is None:
            found.append(codes.NOT_CONSTANT.at(
                spans.get(spec.name, v.span),
                f"`{spec.name}` of `{prim.name}` must be a compile-time constant, not "
                f"`{v.sym}`"))
    diags.extend(found)
    return not found
