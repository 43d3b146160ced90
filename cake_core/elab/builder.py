"""AST -> typed IR: name resolution, constant folding and type checking in one walk.

The walk never executes anything: top-level constants fold through `SymExpr`, and every
call is either a builder form (`dim`, `range`, `role`, `cdiv`, layouts) or a registry
primitive whose type rule decides the result type.  A value whose definition failed
gets `ErrorType`, so uses of it stay quiet: one mistake, one diagnostic.  This module
builds the program (its constants, dims and kernels, in order); each kernel's body is
`kernel_builder`'s.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from cake_core.diagnostics import codes
from cake_core.diagnostics.model import Diagnostic
from cake_core.elab.expressions import Evaluator
from cake_core.elab.kernel_builder import KernelBuilder
from cake_core.hardware import ArchSpec, get_arch
from cake_core.ir.kernel import Program, Value
from cake_core.ir.symbolic import Dim
from cake_core.primitives.registry import Registry, builtin_registry
from cake_core.source import SourceFile
from cake_core.syntax import ast

MAX_KERNELS = 256
"""The most @kernel functions one file may define.  Every kernel is checked, costed and
lowered on its own, so a file's time grows with their number; a generated file of
10,000 kernels is cut here, with one finding, instead of keeping a check busy for
minutes.  A real program is a handful of kernels per file."""


def kernel_over_limit(fn: ast.FunctionDef, seen: int) -> Diagnostic | None:
    """The finding for the first kernel past MAX_KERNELS (`seen` counts it), else None."""
    if seen != MAX_KERNELS + 1:
        return None
    return codes.TOO_MANY_KERNELS.at(
        fn.name_span, f"more than {MAX_KERNELS} kernels in one file: this one and the rest "
        "are not checked", notes=("split the kernels over several files",))


@dataclass
class BuildResult:
    program: Program
    diagnostics: list[Diagnostic] = field(default_factory=list)


def build_program(module: ast.Module, source: SourceFile, *, registry: Registry | None = None,
                  arch: str | None = None) -> BuildResult:
    """Type-check a parsed module and build its IR; never raises on bad input."""
    b = ProgramBuilder(source, registry or builtin_registry(), arch)
    b.build(module)
    return BuildResult(b.program, b.diags)


class ProgramBuilder:
    def __init__(self, source: SourceFile, registry: Registry, arch: str | None) -> None:
        self.source = source
        self.registry = registry
        self.arch_override = arch
        self.program = Program(source.path)
        self.diags: list[Diagnostic] = []
        self.globals: dict[str, Value] = {}
        self._arch_specs: dict[str, ArchSpec | None] = {}

    def build(self, module: ast.Module) -> None:
        ev = Evaluator(self, kernel=None)
        saw_kernel = False
        kernels = 0
        for stmt in module.body:
            if isinstance(stmt, ast.FunctionDef):
                saw_kernel = True
                kernels += 1
                if kernels > MAX_KERNELS:
                    over = kernel_over_limit(stmt, kernels)
                    if over is not None:
                        self.diags.append(over)
                    continue
                kb = KernelBuilder(self, stmt)
                try:
                    kernel = kb.build()
                finally:
                    kb.release()
                if kernel is not None:
                    self.program.kernels.append(kernel)
            elif isinstance(stmt, ast.Assign):
                value = ev.expr(stmt.value)
                for target in stmt.targets:
                    ev.bind(target, value, scope=self.globals)
                    self._note_constant_spans(target, stmt.value)
            elif isinstance(stmt, ast.ExprStmt) and isinstance(stmt.value, ast.Constant) and \
                    isinstance(stmt.value.value, str):
                continue  # a docstring
            elif isinstance(stmt, ast.Pass):
                continue
            else:
                self.diags.append(codes.INVALID_TOPLEVEL.at(
                    stmt.span, "only constants, dim() declarations and @kernel functions may "
                    "appear at the top level of a .cake file"))
        for name, v in self.globals.items():
            self.program.constants[name] = v
            if isinstance(v.sym, Dim):
                self.program.dims[v.sym.name] = v.sym
        if not saw_kernel and not any(d.code == "CK001" for d in self.diags):
            self.diags.append(codes.NO_KERNEL.at(
                self.source.span(0, 0), "this file defines no @kernel function"))

    def arch_spec(self, name: str) -> ArchSpec | None:
        """`get_arch(name)`, looked up once per build: every kernel names its arch twice."""
        if name not in self._arch_specs:
            self._arch_specs[name] = get_arch(name)
        return self._arch_specs[name]

    def declared_dims(self) -> dict[str, Dim]:
        """The dims declared so far: a kernel sees those above it, before `build` ends."""
        return {v.sym.name: v.sym for v in self.globals.values() if isinstance(v.sym, Dim)}


    def _note_constant_spans(self, target: ast.Expr, value: ast.Expr) -> None:
        if isinstance(target, ast.Name):
            self.program.constant_spans.setdefault(target.id, value.span)
        elif isinstance(target, ast.Tuple) and isinstance(value, ast.Tuple) and \
                len(target.elts) == len(value.elts):
            for t, v in zip(target.elts, value.elts, strict=True):
                self._note_constant_spans(t, v)
