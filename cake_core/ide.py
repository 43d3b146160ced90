"""Editor queries over one checked file: what a name means, where it is defined and used.

The language server (and any other tool that points at source: an agent's repair step, a
refactoring tactic) asks these questions with byte offsets and gets back spans and IR
values; it never walks the AST or the IR itself.  Name resolution follows the builder's
rules: one scope per kernel in program order (a re-bound name resolves to its latest
definition before the use), then the file's top-level constants, then built-in names.
Role names are string literals (`role("load", ...)`, `producer="load"`), so they are
tracked as symbols of their own.

Everything here is read-only and tolerant: it works on the AST of a file with syntax
errors and on a partial `Program`, so hovers and completion keep working while the user
types.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass, field
from enum import StrEnum

from cake_core.elab.scope import builtin
from cake_core.ir.kernel import ForOp, Kernel, Program, Value
from cake_core.ir.symbolic import Dim
from cake_core.ir.types import (
    BarrierType,
    FragmentType,
    IndexSpaceType,
    PipelineType,
    SmemType,
    StageType,
    TensorType,
    TileType,
    Type,
)
from cake_core.primitives.registry import Primitive, Registry, builtin_registry
from cake_core.source import SourceFile, Span
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


@dataclass(frozen=True, slots=True)
class FormSignature:
    """A builder form: evaluated by the compiler, so it has no registry entry."""

    name: str
    params: tuple[str, ...]
    doc: str

    @property
    def signature(self) -> str:
        return f"{self.name}({', '.join(self.params)})"


FORMS: dict[str, FormSignature] = {f.name: f for f in (
    FormSignature("dim", ("name", "multiple_of=1", "max=None"),
                  "A size known at launch, not at compile time: `M = dim(\"M\")`. "
                  "`multiple_of` states a divisibility fact the verifier may rely on."),
    FormSignature("cdiv", ("a", "b"), "Ceiling division of ints; folds when both are constants."),
    FormSignature("min", ("a", "b", "..."), "The smallest of two or more ints (folded)."),
    FormSignature("max", ("a", "b", "..."), "The largest of two or more ints (folded)."),
    FormSignature("range", ("start", "stop", "step=1"),
                  "The iteration space of a `for` loop or a role's warps: `range(stop)` or "
                  "`range(start, stop[, step])`; the step is a positive constant."),
    FormSignature("role", ("name", "warps=range(first, stop)", "regs=None"),
                  "A warp role: the warps that run the block under it, and optionally the "
                  "registers per thread they keep (setmaxnreg)."),
    FormSignature("kernel", ("arch", "grid", "warps=4", "cluster=(1,)"),
                  "The decorator of a kernel: target arch, launch grid, warps per block."),
    FormSignature("swizzle", ("span", 'order="row"'),
                  "An XOR-swizzled smem layout of 32, 64 or 128-byte rows (as TMA and wgmma "
                  "read them); removes bank conflicts without padding."),
    FormSignature("padded", ("n",), "A row-major smem layout with `n` padding elements per row."),
    FormSignature("Tensor", ("dtype", "shape"),
                  "A kernel parameter in global memory: `Tensor[bf16, (M, K)]`."),
)}


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


# --- attributes and receivers (completion after a dot) -----------------------------------
@dataclass(frozen=True, slots=True)
class Attribute:
    name: str
    detail: str
    doc: str
    primitive: Primitive | None = None


def attributes_of(t: Type, registry: Registry | None = None) -> list[Attribute]:
    """What may follow `value.` for a value of type `t` (the builder's attribute rules)."""
    reg = registry or builtin_registry()
    out = [Attribute(p.name, p.signature, p.doc, p) for p in reg.methods_of(t)]
    if isinstance(t, IndexSpaceType):
        out += [Attribute(a, f"{t.name}.{a}: int", f"The {a} index of this {t.name}.")
                for a in t.attrs]
    if isinstance(t, SmemType):
        out.append(Attribute("T", "smem view", "The transposed view (no data moves)."))
    if isinstance(t, TensorType | SmemType | FragmentType | TileType):
        out.append(Attribute("shape", "tuple of ints", "The shape, as a tuple of ints."))
        out.append(Attribute("dtype", "dtype", "The element type."))
    if isinstance(t, StageType):
        out.append(Attribute("phase", "int", "The barrier phase parity of this stage."))
    return out


_RECEIVER = re.compile(r"([A-Za-z_]\w*)((?:\s*\[[^\[\]]*\])*)((?:\s*\.\s*[A-Za-z_]\w*"
                       r"(?:\s*\[[^\[\]]*\])*)*)\s*\.\s*(\w*)$")


def receiver_type(text_before: str, index: SymbolIndex, offset: int | None) -> Type | None:
    """The type of `recv` in `... recv.partial` (the text just before the cursor).

    With `offset` None the name is looked up anywhere in the index (its latest
    definition): for an index of an older text, where the cursor's offset means nothing.
    """
    m = _RECEIVER.search(text_before)
    if m is None:
        return None
    base, subs, chain = m.group(1), m.group(2), m.group(3)
    t = _name_type(base, index, offset)
    if t is None:
        return None
    t = _subscripted(t, subs)
    for part in re.findall(r"\.\s*([A-Za-z_]\w*)((?:\s*\[[^\[\]]*\])*)", chain):
        attr, subs = part
        if attr == "T" and isinstance(t, SmemType):
            t = _subscripted(t, subs)
            continue
        return None
    return t


def _name_type(name: str, index: SymbolIndex, offset: int | None) -> Type | None:
    pool = index.visible_at(offset) if offset is not None else reversed(index.symbols)
    for s in pool:
        if s.name == name and s.kind is not SymbolKind.ROLE:
            return s.value.type if s.value is not None else None
    v = builtin(name, _EMPTY)
    return v.type if v is not None else None


def _subscripted(t: Type, subs: str) -> Type:
    """Indexing a buffer gives a view of the same kind; indexing barriers gives one."""
    if not subs.strip():
        return t
    if isinstance(t, BarrierType):
        return BarrierType(t.name, t.count, t.n, indexed=True)
    return t


# --- the call around the cursor (signature help) -----------------------------------------
@dataclass(frozen=True, slots=True)
class CallAtCursor:
    name: str
    receiver: str | None
    """The receiver's text for a method call (`ab` in `ab.wait(`)."""
    arg_index: int
    keyword: str | None
    """The `name=` being written, if the cursor is in a keyword argument."""


_CALLEE = re.compile(r"((?:[A-Za-z_]\w*(?:\[[^\[\]]*\])*\s*\.\s*)*)([A-Za-z_]\w*)\s*$")
_KEYWORD = re.compile(r"^\s*([A-Za-z_]\w*)\s*=(?!=)")
_WINDOW = 8000


def call_at_cursor(text: str, index: int) -> CallAtCursor | None:
    """The innermost call whose parentheses hold `index` (a str index into `text`).

    A forward scan of the text before the cursor, tolerant of unbalanced code: it is
    what a user is in the middle of typing.
    """
    start = text.rfind("\n", 0, max(0, index - _WINDOW)) + 1
    stack: list[list[int]] = []  # [open position, commas, current argument start]
    i = start
    quote = ""
    while i < index:
        ch = text[i]
        if quote:
            if ch == "\\":
                i += 1
            elif ch == quote:
                quote = ""
        elif ch in "\"'":
            quote = ch
        elif ch == "#":
            nl = text.find("\n", i, index)
            i = index if nl < 0 else nl
            continue
        elif ch in "([{":
            stack.append([i, 0, i + 1])
        elif ch in ")]}":
            if stack:
                stack.pop()
        elif ch == "," and stack:
            stack[-1][1] += 1
            stack[-1][2] = i + 1
        i += 1
    for pos, commas, arg_start in reversed(stack):
        if text[pos] != "(":
            continue
        m = _CALLEE.search(text, max(0, pos - 200), pos)
        if m is None or m.end() != pos:
            continue
        receiver = m.group(1).strip().rstrip(".").strip() or None
        kw = _KEYWORD.match(text[arg_start:index])
        return CallAtCursor(m.group(2), receiver, commas, kw.group(1) if kw else None)
    return None


# --- implementation ------------------------------------------------------------------------
_EMPTY = SourceFile("").span(0, 0)
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
            return _subscripted(t, "[]") if t is not None else None
        if isinstance(e, ast.Attribute) and e.attr == "T":
            return self.type_of(e.value)
        return None


def _names(target: ast.Expr) -> list[ast.Name]:
    if isinstance(target, ast.Name):
        return [target]
    if isinstance(target, ast.Tuple | ast.ListExpr):
        return [n for t in target.elts for n in _names(t)]
    return []


__all__ = ["FORMS", "ROLE_KEYWORDS", "Attribute", "CallAtCursor", "CallSite", "FormSignature",
           "Occurrence", "Symbol", "SymbolIndex", "SymbolKind", "attributes_of", "build_index",
           "call_at_cursor", "kind_of", "receiver_type"]
