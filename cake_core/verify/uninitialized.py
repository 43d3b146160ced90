"""CK335: a fragment declared with `fill=None` is read before anything writes it.

`fragment(..., fill=None)` asks for registers without the clearing moves: the tensor
cores will write them with `wgmma(acc, a, b, accumulate=False)` (scale-d 0), which
overwrites instead of adding.  Any other first use reads whatever the registers held, so
the rule finds, after each such declaration, the first operation that names the fragment
in program order (descending into loops and branches, stopping where the name is bound
again; `cake_core.ir.uses`) and accepts only

- a `wgmma` whose accumulator it is, with `accumulate=False`, or
- a `wgmma` inside a loop opened after the declaration whose `accumulate` is false on
  that loop's first trip (`accumulate=h > 0` in `for h in range(n)`), the k-loop form.

Anything else -- an element-wise read, a store, a wgmma that accumulates -- is reported at
that use, and so is a first wgmma under a branch: on the path around it the next use
reads garbage.

The fix drops `fill=None` (the fragment is cleared again, the behaviour of every other
fragment), so it is safe: it can only turn undefined values into zeros.
"""

from __future__ import annotations

from cake_core.diagnostics import codes
from cake_core.diagnostics.model import Applicability, Diagnostic, Fix, Related, TextEdit
from cake_core.ir.kernel import ForOp, Op, Program
from cake_core.ir.symbolic import Const, SymExpr, Var
from cake_core.ir.types import NoneType
from cake_core.ir.uses import FirstUse, declarations, first_use, writes_only
from cake_core.ir.values import Predicate
from cake_core.source import SourceFile

#: Every code this pass may emit.
CODES = (codes.UNINITIALIZED_FRAGMENT,)


def check(program: Program, source: SourceFile) -> list[Diagnostic]:
    out: list[Diagnostic] = []
    for kernel in program.kernels:
        for decl, rest in declarations(kernel):
            fill = decl.args.get("fill")
            if fill is None or not isinstance(fill.type, NoneType):
                continue
            use = first_use(decl, rest)
            if use is not None and not _overwrites(use):
                out.append(_finding(decl, use, source))
    return out


def _overwrites(use: FirstUse) -> bool:
    """Whether the use writes all of the fragment without reading it (on its first run)."""
    if use.branch or not writes_only(use):
        return False
    flag = use.op.args.get("accumulate")
    if flag is None:
        return False
    if flag.const is False:
        return True
    return isinstance(flag.const, Predicate) and bool(use.loops) and \
        _false_on_first_trip(flag.const, use.loops[-1])


def _false_on_first_trip(p: Predicate, loop: ForOp) -> bool:
    """`i > start`, `i != start`, `start < i` or `i >= start + 1` of loop variable `i`."""
    if p.op != "compare":
        return False
    ops, terms = p.chain
    if len(ops) != 1 or not all(isinstance(t, SymExpr) for t in terms):
        return False
    a, b = terms
    assert isinstance(a, SymExpr) and isinstance(b, SymExpr)
    op = ops[0]
    if _is_var(b, loop) and not _is_var(a, loop):
        a, b = b, a
        op = {"<": ">", "<=": ">=", ">": "<", ">=": "<="}.get(op, op)
    if not _is_var(a, loop):
        return False
    start = loop.start
    if op in (">", "!=") and b == start:
        return True
    return op == ">=" and isinstance(b, Const) and isinstance(start, Const) and \
        b.value == start.value + 1


def _is_var(e: SymExpr, loop: ForOp) -> bool:
    return isinstance(e, Var) and loop.var.sym is not None and e == loop.var.sym


def _finding(decl: Op, use: FirstUse, source: SourceFile) -> Diagnostic:
    what = ("is first used under a branch; on the path around it the next use reads it"
            if use.branch else "is read here")
    fixes: list[Fix] = []
    fill = decl.arg_spans.get("fill")
    if fill is not None:
        # delete `, fill=None`: from the comma after the previous argument to its end
        comma = source.data.rfind(b",", decl.span.start.offset, fill.start.offset)
        if comma >= 0:
            fixes.append(Fix("clear the fragment (drop `fill=None`)",
                             (TextEdit(source.span(comma, fill.end.offset), ""),),
                             Applicability.SAFE))
    return codes.UNINITIALIZED_FRAGMENT.at(
        use.op.span,
        f"`{use.name}` is declared with `fill=None` (no clearing) and {what} before a wgmma "
        "with `accumulate=False` writes it: its registers hold whatever was there",
        related=[Related(decl.span, f"`{use.name}` declared without a fill here")],
        notes=["write it first with `wgmma(..., accumulate=False)`, or drop `fill=None`"],
        fixes=fixes)


__all__ = ["CODES", "check"]
