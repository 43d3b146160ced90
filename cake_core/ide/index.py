"""The symbol index of one parsed file: definitions, references and call sites, by position.

Name resolution follows the builder's rules: one scope per kernel in program order (a
re-bound name resolves to its latest definition before the use), then the file's top-level
constants, then built-in names. Role names are string literals (`role("load", ...)`,
`producer="load"`), so they are tracked as symbols of their own.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from enum import StrEnum

from cake_core.elab.scope import builtin
from cake_core.ide.forms import FORMS
from cake_core.ir.kernel import ForOp, Kernel, Program, Value
from cake_core.ir.symbolic import Dim
from cake_core.ir.types import (
    BarrierType,
    FragmentType,
    PipelineType,
    SmemType,
    StageType,
    Type,
)
from cake_core.primitives.registry import Primitive, Registry, builtin_registry
from cake_core.source import Span
from cake_core.syntax import ast

#: Keyword arguments whose string values name roles.
ROLE_KEYWORDS = frozenset({"producer", "consumer", "consumers", "role", "roles"})


class SymbolKind(StrEnum):
    KERNEL = "kernel"
    CONSTANT = "constant"
    DIM = "dim"
    PARAM = "param"
    BUFFER = "buffer"
    PIPELINE = "pipeline"
    BARRIER = "barrier"
    FRAGMENT = "fragment"
    STAGE = "stage"
    LOOP = "loop"
    VALUE = "value"
    ROLE = "role"


@dataclass(eq=False, slots=True)
class Symbol:
    """One definition: a constant, a kernel parameter, a buffer, a role, ..."""

    name: str
    kind: SymbolKind
    span: Span
    """The defining name (for a role: its string literal, quotes included)."""
    extent: Span
    """The whole defining statement or block (document outlines select it)."""
    kernel: str | None
    """The kernel it belongs to; None for top-level constants and kernels."""
    value: Value | None = None
    """Its typed IR value, when the builder got that far."""


@dataclass(frozen=True, slots=True)
class Occurrence:
    span: Span
    symbol: Symbol
    definition: bool


@dataclass(frozen=True, slots=True)
class CallSite:
    """A call of a primitive, a method or a builder form (`range`, `role`, `cdiv`, ...)."""

    span: Span
    """The callee's name (for a method: the attribute after the dot)."""
    call: Span
    name: str
    primitive: Primitive | None
    method: bool = False


@dataclass
class SymbolIndex:
    """Definitions, references and call sites of one file, sorted by position."""

    program: Program | None
    symbols: list[Symbol] = field(default_factory=list)
    occurrences: list[Occurrence] = field(default_factory=list)
    calls: list[CallSite] = field(default_factory=list)
    kernels: list[tuple[ast.FunctionDef, Kernel | None]] = field(default_factory=list)
    _starts: list[int] = field(default_factory=list, repr=False)
    _by_kernel: dict[str | None, list[Symbol]] = field(default_factory=dict, repr=False)

    def occurrence_at(self, offset: int) -> Occurrence | None:
        """The name under the cursor; a cursor just after a name still selects it."""
        return _find(self.occurrences, self._starts, offset)

    def call_at(self, offset: int) -> CallSite | None:
        for c in self.calls:
            if c.span.start.offset <= offset <= c.span.end.offset:
                return c
        return None

    def references(self, symbol: Symbol, *, include_definition: bool = True) -> list[Occurrence]:
        return [o for o in self.occurrences if o.symbol is symbol
                and (include_definition or not o.definition)]

    def kernel_at(self, offset: int) -> tuple[ast.FunctionDef, Kernel | None] | None:
        for fn, k in self.kernels:
            if fn.span.start.offset <= offset <= fn.span.end.offset:
                return fn, k
        return None

    def visible_at(self, offset: int) -> list[Symbol]:
        """Names a kernel body may use at `offset`: top-level constants, then the kernel's
        parameters and the definitions made before `offset` (latest binding wins)."""
        out = {s.name: s for s in self.symbols_of(None) if s.kind is not SymbolKind.KERNEL}
        here = self.kernel_at(offset)
        if here is not None:
            fn, _ = here
            for s in self.symbols_of(fn.name):
                if s.kind is not SymbolKind.ROLE and \
                        fn.span.start.offset <= s.span.start.offset < offset:
                    out[s.name] = s
        return list(out.values())

    def symbols_of(self, kernel: str | None) -> list[Symbol]:
        """The definitions inside one kernel (None: the top level), in source order."""
        return self._by_kernel.get(kernel, [])

    def roles(self, kernel: str) -> list[Symbol]:
        return [s for s in self.symbols_of(kernel) if s.kind is SymbolKind.ROLE]


def build_index(module: ast.Module, program: Program | None,
                registry: Registry | None = None) -> SymbolIndex:
    """Index a parsed module against the program built from it (None if it was not)."""
    b = _Indexer(program, registry or builtin_registry())
    for stmt in module.body:
        b.toplevel(stmt)
    idx = b.index
    idx.occurrences.sort(key=lambda o: (o.span.start.offset, o.span.end.offset))
    idx._starts = [o.span.start.offset for o in idx.occurrences]
    for sym in idx.symbols:
        idx._by_kernel.setdefault(sym.kernel, []).append(sym)
    idx.calls.sort(key=lambda c: c.span.start.offset)
    return idx


def kind_of(value: Value | None) -> SymbolKind:
    t = value.type if value is not None else None
    if isinstance(t, SmemType):
        return SymbolKind.VALUE if t.is_view else SymbolKind.BUFFER
    return {PipelineType: SymbolKind.PIPELINE, BarrierType: SymbolKind.BARRIER,
            FragmentType: SymbolKind.FRAGMENT, StageType: SymbolKind.STAGE,
            }.get(type(t), SymbolKind.VALUE)


def subscripted(t: Type, subs: str) -> Type:
    """Indexing a buffer gives a view of the same kind; indexing barriers gives one.

    `subs` is the subscript text (empty: none); the index types a method call's receiver
    with it and the cursor queries a receiver still being typed, so both follow one rule.
    """
    if not subs.strip():
        return t
    if isinstance(t, BarrierType):
        return BarrierType(t.name, t.count, t.n, indexed=True)
    return t


# --- implementation ------------------------------------------------------------------------
_LONGEST_NAME = 256


def _find(occs: list[Occurrence], starts: list[int], offset: int) -> Occurrence | None:
    best: Occurrence | None = None
    i = bisect.bisect_right(starts, offset) - 1
    while i >= 0 and starts[i] >= offset - _LONGEST_NAME:
        o = occs[i]
        if offset <= o.span.end.offset and (best is None or offset < o.span.end.offset):
            best = o
        i -= 1
    return best


class _Indexer:
    def __init__(self, program: Program | None, registry: Registry) -> None:
        self.program = program
        self.registry = registry
        self.index = SymbolIndex(program)
        self.globals: dict[str, Symbol] = {}
        self.scope: dict[str, Symbol] = {}
        self.kernel: Kernel | None = None
        self.kname: str | None = None
        self.role_refs: list[tuple[str, Span]] = []
        self.kernel_roles: list[Symbol] = []
        self.results: dict[tuple[int, int], list[Value]] = {}
        self.loop_vars: dict[int, Value] = {}

    # -- definitions ------------------------------------------------------------------
    def define(self, name: str, kind: SymbolKind, span: Span, extent: Span,
               value: Value | None, scope: dict[str, Symbol] | None) -> Symbol:
        sym = Symbol(name, kind, span, extent, self.kname, value)
        self.index.symbols.append(sym)
        self.index.occurrences.append(Occurrence(span, sym, True))
        if scope is not None:
            scope[name] = sym
        return sym

    def toplevel(self, stmt: ast.Stmt) -> None:
        if isinstance(stmt, ast.FunctionDef):
            self.function(stmt)
        elif isinstance(stmt, ast.Assign):
            self.expr(stmt.value)
            consts = self.program.constants if self.program is not None else {}
            for target in stmt.targets:
                for name in _names(target):
                    v = consts.get(name.id)
                    kind = SymbolKind.DIM if v is not None and isinstance(v.sym, Dim) \
                        else SymbolKind.CONSTANT
                    self.define(name.id, kind, name.span, stmt.span, v, self.globals)

    def function(self, fn: ast.FunctionDef) -> None:
        kernel = None
        if self.program is not None:
            kernel = next((k for k in self.program.kernels
                           if k.name_span.start.offset == fn.name_span.start.offset), None)
        self.index.kernels.append((fn, kernel))
        self.kname = None
        self.define(fn.name, SymbolKind.KERNEL, fn.name_span, fn.span, None, None)
        self.kname, self.kernel = fn.name, kernel
        self.scope = {}
        self.role_refs = []
        self.kernel_roles = []
        self.results, self.loop_vars = {}, {}
        if kernel is not None:
            for n in kernel.walk():
                if isinstance(n, ForOp):
                    self.loop_vars[n.var.span.start.offset] = n.var
            for op in kernel.ops():
                self.results.setdefault((op.span.start.offset, op.span.end.offset),
                                        []).extend(op.results)
        for d in fn.decorators:
            self.expr(d)
        params = {p.name: p for p in kernel.params} if kernel is not None else {}
        for p in fn.params:
            if p.annotation is not None:
                self.expr(p.annotation)
            kp = params.get(p.name)
            self.define(p.name, SymbolKind.PARAM, p.name_span, p.span,
                        kp.value if kp is not None else None, self.scope)
        self.block(fn.body)
        roles = {s.name: s for s in self.kernel_roles}
        for name, span in self.role_refs:
            sym = roles.get(name)
            if sym is not None:
                self.index.occurrences.append(Occurrence(span, sym, False))
        self.kname, self.kernel = None, None

    def block(self, body: tuple[ast.Stmt, ...]) -> None:
        for s in body:
            self.stmt(s)

    def stmt(self, s: ast.Stmt) -> None:
        if isinstance(s, ast.Assign):
            self.expr(s.value)
            for target in s.targets:
                for name in _names(target):
                    v = self.value_for(name.id, s.value.span)
                    self.define(name.id, kind_of(v), name.span, s.span, v, self.scope)
        elif isinstance(s, ast.AugAssign):
            self.expr(s.target)
            self.expr(s.value)
        elif isinstance(s, ast.ExprStmt | ast.Return):
            if s.value is not None:
                self.expr(s.value)
        elif isinstance(s, ast.For):
            self.expr(s.iter)
            for name in _names(s.target):
                v = self.loop_vars.get(name.span.start.offset)
                self.define(name.id, SymbolKind.LOOP, name.span, s.span, v, self.scope)
            self.block(s.body)
        elif isinstance(s, ast.If):
            self.expr(s.test)
            self.block(s.body)
            self.block(s.orelse)
        elif isinstance(s, ast.With):
            for item in s.items:
                self.role_decl(item.context, s)
                self.expr(item.context)
            self.block(s.body)

    def role_decl(self, e: ast.Expr, with_stmt: ast.With) -> None:
        if isinstance(e, ast.Call) and isinstance(e.func, ast.Name) and e.func.id == "role" \
                and e.args and isinstance(e.args[0], ast.Constant) \
                and isinstance(e.args[0].value, str):
            self.kernel_roles.append(self.define(e.args[0].value, SymbolKind.ROLE,
                                                 e.args[0].span, with_stmt.span, None, None))

    def value_for(self, name: str, rhs: Span) -> Value | None:
        for v in self.results.get((rhs.start.offset, rhs.end.offset), ()):
            if v.name == name:
                return v
        if self.kernel is not None:
            return self.kernel.values.get(name)
        return None

    # -- uses -------------------------------------------------------------------------
    def resolve(self, name: str) -> Symbol | None:
        return self.scope.get(name) if self.kname is not None and name in self.scope \
            else self.globals.get(name)

    def expr(self, e: ast.Node | None) -> None:
        if e is None:
            return
        if isinstance(e, ast.Name):
            sym = self.resolve(e.id)
            if sym is not None:
                self.index.occurrences.append(Occurrence(e.span, sym, False))
            return
        if isinstance(e, ast.Call):
            self.call(e)
            return
        for child in ast.children(e):
            self.expr(child)

    def call(self, e: ast.Call) -> None:
        f = e.func
        if isinstance(f, ast.Name):
            prim = self.registry.function(f.id)
            if prim is not None or f.id in FORMS:
                self.index.calls.append(CallSite(f.span, e.span, f.id, prim))
            else:
                self.expr(f)
        elif isinstance(f, ast.Attribute):
            self.expr(f.value)
            t = self.type_of(f.value)
            prim = self.registry.method(t, f.attr) if t is not None else None
            self.index.calls.append(CallSite(f.attr_span, e.span, f.attr, prim, method=True))
        else:
            self.expr(f)
        for a in e.args:
            self.expr(a)
        for kw in e.keywords:
            self.expr(kw.value)
            if kw.name in ROLE_KEYWORDS:
                values = kw.value.elts if isinstance(kw.value, ast.Tuple | ast.ListExpr) \
                    else (kw.value,)
                for v in values:
                    if isinstance(v, ast.Constant) and isinstance(v.value, str):
                        self.role_refs.append((v.value, v.span))

    def type_of(self, e: ast.Expr) -> Type | None:
        if isinstance(e, ast.Name):
            sym = self.resolve(e.id)
            if sym is not None:
                return sym.value.type if sym.value is not None else None
            v = builtin(e.id, e.span)
            return v.type if v is not None else None
        if isinstance(e, ast.Subscript):
            t = self.type_of(e.value)
            return subscripted(t, "[]") if t is not None else None
        if isinstance(e, ast.Attribute) and e.attr == "T":
            return self.type_of(e.value)
        return None


def _names(target: ast.Expr) -> list[ast.Name]:
    if isinstance(target, ast.Name):
        return [target]
    if isinstance(target, ast.Tuple | ast.ListExpr):
        return [n for t in target.elts for n in _names(t)]
    return []


__all__ = ["ROLE_KEYWORDS", "CallSite", "Occurrence", "Symbol", "SymbolIndex", "SymbolKind",
           "build_index", "kind_of", "subscripted"]
