"""What expression evaluation and the signature reader see of the builders.

`ProgramBuilder` (`builder.py`) and `KernelBuilder` (`kernel_builder.py`) drive the
Evaluator and the signature reader, which in turn read and extend the builders' state.
These protocols name that state, so the modules below the builders depend on it alone
and the builders depend on them: the import graph stays one-directional.
"""

from __future__ import annotations

from typing import Protocol

from cake_core.diagnostics.model import Diagnostic
from cake_core.hardware import ArchSpec
from cake_core.ir.kernel import Kernel, Op, Role, Value
from cake_core.ir.symbolic import Dim
from cake_core.primitives.registry import Registry
from cake_core.primitives.typecheck import KernelScope
from cake_core.source import SourceFile
from cake_core.syntax import ast


class ProgramState(Protocol):
    """The program under construction: its text, primitives, findings and globals."""

    source: SourceFile
    registry: Registry
    arch_override: str | None
    diags: list[Diagnostic]
    globals: dict[str, Value]

    def arch_spec(self, name: str) -> ArchSpec | None: ...
    def declared_dims(self) -> dict[str, Dim]: ...


class Evaluates(Protocol):
    def expr(self, e: ast.Expr, targets: tuple[str, ...] = ()) -> Value: ...


class KernelState(KernelScope, Protocol):
    """One @kernel function under construction: its scope, role, findings and ops."""

    fn: ast.FunctionDef
    diags: list[Diagnostic]
    scope: dict[str, Value]
    role: Role | None
    kernel: Kernel | None
    arch: ArchSpec | None
    used: dict[int, Value]

    @property
    def pb(self) -> ProgramState: ...
    @property
    def ev(self) -> Evaluates: ...

    def define(self, name: str, v: Value, stmt: ast.Stmt | None) -> None: ...
    def note_use(self, v: Value) -> None: ...
    def new_op(self, op: Op) -> None: ...
