"""Which names an op's result is bound to, read from the kernel's syntax tree.

The IR keeps one `Value` per name binding: `dist = cn - 2.0 * dot` makes the `sub` op's
result `_t5` and a second value `dist` that later ops read.  The assignment itself is no IR
node, so the lowering and the simulator both learn from the source, here, that `dist`
receives the `sub` result (the generated C++ then declares the array as `dist` directly).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from cake_core.ir.kernel import Kernel, Op
from cake_core.syntax import ast


@dataclass(slots=True)
class Bindings:
    after_op: dict[int, tuple[str, ...]] = field(default_factory=dict)
    """id(op) -> the names its (single) result is bound to, in assignment order."""
    aliases: dict[str, str] = field(default_factory=dict)
    """`y = x` with no op in between: y names what x names."""

    def names_of(self, op: Op) -> tuple[str, ...]:
        return self.after_op.get(id(op), ())


def bindings_of(kernel: Kernel, module: ast.Module | None) -> Bindings:
    out = Bindings()
    if module is None:
        return out
    fn = next((s for s in module.body if isinstance(s, ast.FunctionDef)
               and s.name_span == kernel.name_span), None)
    if fn is None:
        return out
    by_span: dict[tuple[int, int], Op] = {}
    for op in kernel.ops():  # later ops (outer expressions) win over inner ones
        by_span[(op.span.start.offset, op.span.end.offset)] = op
    after: dict[int, list[str]] = {}

    def bind(target: ast.Expr, value: ast.Expr) -> None:
        if isinstance(target, ast.Tuple) and isinstance(value, ast.Tuple | ast.ListExpr) \
                and len(target.elts) == len(value.elts):
            for t, v in zip(target.elts, value.elts, strict=True):
                bind(t, v)
            return
        if not isinstance(target, ast.Name):
            return
        e = value
        while isinstance(e, ast.Attribute) and e.attr == "T":
            e = e.value
        op = by_span.get((e.span.start.offset, e.span.end.offset))
        if op is not None and len(op.results) == 1:
            after.setdefault(id(op), []).append(target.id)
        elif isinstance(e, ast.Name):
            out.aliases[target.id] = e.id

    for node in ast.walk(fn):
        if isinstance(node, ast.Assign):
            for t in node.targets:
                bind(t, node.value)
        elif isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
            updated = by_span.get((node.span.start.offset, node.span.end.offset))
            if updated is not None:
                after.setdefault(id(updated), []).append(node.target.id)
    out.after_op = {k: tuple(v) for k, v in after.items()}
    return out
