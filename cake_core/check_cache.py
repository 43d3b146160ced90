"""Per-kernel reuse of the type check across checks of one document.

A kernel's IR and its type findings depend on its own text, on the top-level statements
above it (the constants and dims it can see), on the registry and on the target arch —
nothing else.  So when an editor re-checks a file after an edit inside one kernel, every
other kernel's findings are those of the previous check, moved to where the kernel now
starts, and only the edited kernel is built again.  That keeps the language server's
latency flat as a file grows; `cake_core/verify/cache.py` does the same for the verifier.

How a check walks the module, statement by statement, in the order the builder does:

* A top-level statement that is not a kernel updates the *prelude*: the globals the
  kernels below it see.  Each prelude state is remembered under a digest of every
  statement so far (its lines and where they start), so an unchanged prelude is the
  very same state, with the very same `Value` objects, as in the previous check: IR kept
  from that check stays consistent with the new program's constants.
* A kernel is looked up by the bytes of its lines and the digest of the prelude above it.
  On a hit its findings are moved by whole lines (its text, and so every column, is
  unchanged); ranges in the prelude above it stay where they are (the digest pins them).
  Findings that mention any other place are reused only where the kernel has not moved.
* The IR is not needed for the findings, so it is made lazily: a kernel that did not move
  keeps its IR object, a kernel that moved is built again only when something asks for
  the whole program (hovers, tactics, plugin rules) or for that kernel (the verifier,
  when its own cache misses).

Exactness rests on the parser's rule that a statement's AST is a function of its own
lines (`cake_core/syntax/reuse.py` rests on the same rule).  It holds for a clean parse;
after a syntax error the parser repairs the text before converting it, so there a reused
kernel must also have the same AST as the one it was built from, node for node.  It also
rests on the builder keeping kernels apart: a kernel's findings are its own (it retracts
only its own findings, see `kernel_checks.check_pipelines`) and it never changes a
global's `Value` (only its own unnamed op results are named in place), so a kernel's
findings and IR are the same whatever kernels stand above it.
"""

from __future__ import annotations

import bisect
import dataclasses
import hashlib
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from cake_core.diagnostics import codes
from cake_core.diagnostics.model import Diagnostic
from cake_core.elab.builder import MAX_KERNELS, ProgramBuilder, kernel_over_limit
from cake_core.ir.kernel import Kernel, Program, Value
from cake_core.primitives.registry import Registry
from cake_core.shift import LineShift, spans_of
from cake_core.source import SourceFile, Span
from cake_core.syntax import ast
from cake_core.syntax.reuse import Origin
from cake_core.verify.cache import Ready

__all__ = ["Build", "KernelChecks", "KernelRef", "Ready"]


@dataclass(frozen=True, slots=True, eq=False)
class _Prelude:
    """The top-level state after some non-kernel statements (immutable once made)."""

    digest: bytes
    globals: dict[str, Value]
    constant_spans: dict[str, Span]
    diagnostics: tuple[Diagnostic, ...]
    """The findings of the last statement (the others are in the earlier states)."""
    stmt: ast.Stmt | None
    regions: tuple[tuple[int, int], ...]
    """Byte ranges of the lines of every statement so far, in order: fixed places."""


_ROOT = _Prelude(b"", {}, {}, (), None, ())


@dataclass(slots=True, eq=False)
class _Entry:
    """One kernel as built: its AST, IR and findings, where it stood then."""

    fn: ast.FunctionDef
    clean: bool
    """Built from a clean parse (then text equality alone implies AST equality)."""
    prelude: _Prelude
    lo: int
    hi: int
    line: int
    """Its lines: [lo, hi) in bytes, starting at `line`."""
    kernel: Kernel | None
    diagnostics: tuple[Diagnostic, ...]
    movable: bool
    """Every range its findings mention lies in its lines or in the prelude."""
    origin: Origin
    """`fn` as the parser converted it, and how far it had moved since (`reuse.Origin`)."""


class KernelRef:
    """A kernel of the current check: where it is, and its IR, made on first use."""

    __slots__ = ("_build", "_kernel", "exists", "fn", "prelude")

    def __init__(self, fn: ast.FunctionDef, prelude: _Prelude, kernel: Kernel | None,
                 exists: bool, build: Callable[[ast.FunctionDef, _Prelude], Kernel | None]):
        self.fn = fn
        self.prelude = prelude
        self.exists = exists
        """Whether the builder makes a `Kernel` of it (a bad decorator makes none)."""
        self._kernel = kernel
        self._build = build

    @property
    def span(self) -> Span:
        return self.fn.span

    def get(self) -> Kernel:
        if self._kernel is None:
            kernel = self._build(self.fn, self.prelude)
            assert kernel is not None, "a kernel built once builds again"
            self._kernel = kernel
        return self._kernel


@dataclass
class Build:
    """What `build_program` gives, with the program's kernels made lazily."""

    source: SourceFile
    diagnostics: list[Diagnostic]
    refs: list[KernelRef] | list[Ready]
    """The kernels the program holds, in order."""
    skeleton: Program
    """The program without its kernels: constants, dims, where constants are written."""
    _program: Program | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def program(self) -> Program:
        """The whole program, equal to a fresh build's (made once, on first use)."""
        with self._lock:
            if self._program is None:
                s = self.skeleton
                self._program = Program(s.path, s.constants, s.dims,
                                        [r.get() for r in self.refs], s.constant_spans)
            return self._program


class KernelChecks:
    """The type-check results of one document's kernels, reused by its next checks.

    Not thread-safe: one document is checked by one thread at a time (the language
    server's checker).  The `Build` it returns may be completed from another thread.
    """

    def __init__(self, limit: int = 64) -> None:
        self._entries: OrderedDict[tuple[bytes, bytes], _Entry] = OrderedDict()
        self._preludes: OrderedDict[bytes, _Prelude] = OrderedDict()
        self._limit = limit
        """Entries kept beyond twice the kernels (and prelude statements) of a check."""
        self._context: tuple[int, str | None, str] | None = None
        self.hits = 0
        self.misses = 0

    def build(self, module: ast.Module, source: SourceFile, registry: Registry,
              arch: str | None, *, clean: bool,
              moved: Mapping[int, Origin] | None = None) -> Build:
        """Type-check `module` as `build_program` does, reusing unchanged kernels.

        `clean` says the parse had no syntax error (tree-sitter found none), so that a
        statement's AST follows from its text.  `moved` is the parser's word on which
        statements are shifted copies of which (`ParseResult.moved`): after a syntax
        error it spares comparing a kernel with the one checked before, node by node.
        """
        context = (id(registry), arch, source.path)
        if context != self._context:  # other primitives, arch or path: nothing carries over
            self._entries.clear()
            self._preludes.clear()
            self._context = context
        run = _Run(self, module, source, registry, arch, clean, moved or {})
        build = run.walk()
        kernels = sum(isinstance(s, ast.FunctionDef) for s in module.body)
        _trim(self._entries, 2 * kernels + self._limit)
        _trim(self._preludes, 2 * (len(module.body) - kernels) + self._limit)
        return build


class _Run:
    """One check's walk over the module."""

    def __init__(self, cache: KernelChecks, module: ast.Module, source: SourceFile,
                 registry: Registry, arch: str | None, clean: bool,
                 moved: Mapping[int, Origin]) -> None:
        self.cache = cache
        self.module = module
        self.source = source
        self.registry = registry
        self.arch = arch
        self.clean = clean
        self.moved = moved
        self.diagnostics: list[Diagnostic] = []
        """The builder's findings so far, in its order."""

    def walk(self) -> Build:
        state = _ROOT
        refs: list[KernelRef] = []
        saw_kernel = False
        kernels = 0
        for stmt in self.module.body:
            if isinstance(stmt, ast.FunctionDef):
                saw_kernel = True
                kernels += 1
                if kernels > MAX_KERNELS:
                    over = kernel_over_limit(stmt, kernels)
                    if over is not None:
                        self.diagnostics.append(over)
                    continue
                ref = self.kernel(stmt, state)
                if ref.exists:
                    refs.append(ref)
            else:
                state = self.statement(stmt, state)
                self.diagnostics.extend(state.diagnostics)
        diagnostics = self.diagnostics
        # the end of `ProgramBuilder.build`: constants and dims, and CK010 for no kernel
        pb = self.builder(state, list(diagnostics))
        pb.build(ast.Module(self.module.span, ()))
        if not saw_kernel:
            diagnostics = pb.diags
        skeleton = pb.program
        skeleton.constant_spans = dict(state.constant_spans)
        return Build(self.source, diagnostics, refs, skeleton)

    # -- the prelude ----------------------------------------------------------------------
    def statement(self, stmt: ast.Stmt, prev: _Prelude) -> _Prelude:
        cache = self.cache
        lo, hi = _lines(self.source, stmt.span)
        start = stmt.span.start
        digest = hashlib.blake2b(
            b"%s|%d|%d|%d|%d|" % (prev.digest, start.offset, start.line, lo, hi)
            + self.source.data[lo:hi], digest_size=16).digest()
        hit = cache._preludes.get(digest)
        if hit is not None and hit.stmt == stmt:
            cache._preludes.move_to_end(digest)
            return hit
        pb = self.builder(prev, [])
        pb.program.constant_spans = dict(prev.constant_spans)
        pb.build(ast.Module(stmt.span, (stmt,)))
        diags = pb.diags
        if diags and diags[-1].code == codes.NO_KERNEL.code:
            diags.pop()  # the one-statement module has no kernel; the real one may
        state = _Prelude(digest, pb.globals, pb.program.constant_spans, tuple(diags), stmt,
                         (*prev.regions, (lo, hi)))
        cache._preludes[digest] = state
        return state

    # -- kernels --------------------------------------------------------------------------
    def kernel(self, fn: ast.FunctionDef, state: _Prelude) -> KernelRef:
        cache = self.cache
        lo, hi = _lines(self.source, fn.span)
        text = self.source.data[lo:hi]
        key = (hashlib.blake2b(text, digest_size=16).digest(), state.digest)
        line = fn.span.start.line
        entry = cache._entries.get(key)
        if entry is not None and self.usable(entry, fn, lo, line):
            cache._entries.move_to_end(key)
            cache.hits += 1
            moved = LineShift(lo - entry.lo, line - entry.line, (entry.lo, entry.hi))
            self.diagnostics.extend(moved.diagnostic(d) for d in entry.diagnostics)
            # the IR is reused where it stands, built on this very prelude state
            same = moved.still and entry.prelude is state
            return KernelRef(fn, state, entry.kernel if same else None,
                             entry.kernel is not None, self.rebuild)
        cache.misses += 1
        pb = self.builder(state, [])
        pb.build(ast.Module(fn.span, (fn,)))
        kernel = pb.program.kernels[0] if pb.program.kernels else None
        own = tuple(pb.diags)
        self.diagnostics.extend(own)
        movable = all((lo <= s.start.offset and s.end.offset <= hi)
                      or _within(state.regions, s) for d in own for s in spans_of(d))
        cache._entries[key] = _Entry(fn, self.clean, state, lo, hi, line, kernel, own,
                                     movable, self.origin(fn))
        return KernelRef(fn, state, kernel, kernel is not None, self.rebuild)

    def usable(self, entry: _Entry, fn: ast.FunctionDef, lo: int, line: int) -> bool:
        if not entry.movable and (lo, line) != (entry.lo, entry.line):
            return False
        if self.clean and entry.clean:
            return True
        offset, lines = lo - entry.lo, line - entry.line
        root, moved_bytes, moved_lines = self.origin(fn)
        if root is entry.origin[0] and \
                (moved_bytes - entry.origin[1], moved_lines - entry.origin[2]) == (offset, lines):
            return True  # both are shifts of one converted kernel, this far apart
        return same_shifted(entry.fn, fn, offset, lines)

    def origin(self, fn: ast.FunctionDef) -> Origin:
        return self.moved.get(id(fn)) or (fn, 0, 0)

    def rebuild(self, fn: ast.FunctionDef, state: _Prelude) -> Kernel | None:
        """The IR of a reused kernel that moved, exactly as a fresh build makes it."""
        pb = self.builder(state, [])
        pb.build(ast.Module(fn.span, (fn,)))
        return pb.program.kernels[0] if pb.program.kernels else None

    # -- helpers --------------------------------------------------------------------------
    def builder(self, state: _Prelude, diags: list[Diagnostic]) -> ProgramBuilder:
        pb = ProgramBuilder(self.source, self.registry, self.arch)
        pb.globals = dict(state.globals)
        pb.diags = diags
        return pb


def same_shifted(old: ast.Node, new: ast.Node, offset: int, lines: int) -> bool:
    """Whether AST `new` is `old` moved by `offset` bytes and `lines` lines, node for
    node (columns equal).  A tree too deep to compare counts as different."""
    try:
        if offset == 0 and lines == 0:
            return old == new
        return _Same(offset, lines).node(old, new)
    except RecursionError:
        return False


class _Same:
    def __init__(self, offset: int, lines: int) -> None:
        self.offset, self.lines = offset, lines

    def node(self, a: ast.Node, b: ast.Node) -> bool:
        cls = a.__class__
        if cls is not b.__class__:
            return False
        for name in _FIELDS.get(cls) or _fields(cls):
            x, y = getattr(a, name), getattr(b, name)
            kind = x.__class__
            if kind is Span:
                if y.__class__ is not Span or not self.span(x, y):
                    return False
            elif kind is tuple:
                if y.__class__ is not tuple or len(x) != len(y):
                    return False
                if x and isinstance(x[0], ast.Node):
                    if not all(self.node(i, j) for i, j in zip(x, y, strict=True)):
                        return False
                elif x != y:
                    return False
            elif isinstance(x, ast.Node):
                if not isinstance(y, ast.Node) or not self.node(x, y):
                    return False
            elif kind is not y.__class__ or x != y:
                return False
        return True

    def span(self, x: Span, y: Span) -> bool:
        (p, q), (r, s) = x, y
        off, lines = self.offset, self.lines
        return (p[0] + off == r[0] and q[0] + off == s[0] and p[1] + lines == r[1]
                and q[1] + lines == s[1] and p[2] == r[2] and p[3] == r[3] and q[2] == s[2]
                and q[3] == s[3])


_FIELDS: dict[type, tuple[str, ...]] = {}


def _fields(cls: type) -> tuple[str, ...]:
    names = _FIELDS[cls] = tuple(f.name for f in dataclasses.fields(cls))
    return names


def _lines(source: SourceFile, span: Span) -> tuple[int, int]:
    """[start, end) of the whole lines `span` touches, with the last line's newline."""
    data = source.data
    lo = data.rfind(b"\n", 0, span.start.offset) + 1
    nl = data.find(b"\n", max(span.end.offset, lo))
    return lo, len(data) if nl < 0 else nl + 1


def _within(regions: tuple[tuple[int, int], ...], s: Span) -> bool:
    i = bisect.bisect_right(regions, (s.start.offset, 1 << 62)) - 1
    return i >= 0 and regions[i][0] <= s.start.offset and s.end.offset <= regions[i][1]


def _trim(store: OrderedDict, limit: int) -> None:
    while len(store) > limit:
        store.popitem(last=False)
