"""The typed IR of a kernel: values, ops, structured control flow, roles.

The builder (`builder.py`) produces a `Program` from the AST; analyses (verifier,
simulator, cost model, lowering) consume it and never look at text again, except
through the spans every node keeps for diagnostics.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from cake_core.ir.symbolic import Dim, SymExpr, Var, cdiv, sub
from cake_core.ir.types import DType, NoneType, SmemLayout, Type
from cake_core.source import Span

if TYPE_CHECKING:
    from cake_core.primitives.registry import Primitive


@dataclass(eq=False, slots=True)
class Value:
    """A named, typed value.  Identity matters: two values with one name are different
    definitions (a fragment re-bound in a loop gets a new Value each time).

    `sym` holds the integer expression of int-typed values; `const` the Python value
    of compile-time constants that are not ints (dtypes, layouts, strings, floats).
    The builder makes thousands and passes the fields positionally,
    `Value(name, type, span, None, const)`: a keyword argument to a class call costs a dict.
    """

    name: str
    type: Type
    span: Span
    sym: SymExpr | None = None
    const: object = None

    def __repr__(self) -> str:
        return f"%{self.name}: {self.type.describe()}"


@dataclass(eq=False, slots=True)
class Op:
    """One primitive application: `results = prim(args...)`.

    `args` holds the bound arguments by parameter name (missing optional ones are
    filled with their defaults as Values); `arg_spans` where each came from.
    """

    prim: Primitive
    args: dict[str, Value]
    results: tuple[Value, ...]
    span: Span
    arg_spans: dict[str, Span] = field(default_factory=dict)
    role: str | None = None

    @property
    def name(self) -> str:
        return self.prim.name

    def given(self, name: str) -> Value | None:
        """An optional argument when the kernel gave it: omitted ones hold their default,
        a None-typed Value, which every facet reads as absent."""
        v = self.args.get(name)
        return None if v is None or isinstance(v.type, NoneType) else v

    def __repr__(self) -> str:
        res = ", ".join(f"%{r.name}" for r in self.results)
        args = ", ".join(f"{k}=%{v.name}" for k, v in self.args.items())
        return f"{res + ' = ' if res else ''}{self.prim.name}({args})"


@dataclass(eq=False, slots=True)
class ForOp:
    var: Value
    start: SymExpr
    stop: SymExpr
    step: SymExpr
    body: list[Node]
    span: Span
    role: str | None = None

    @property
    def trip_count(self) -> SymExpr:
        return cdiv(sub(self.stop, self.start), self.step)


@dataclass(eq=False, slots=True)
class IfOp:
    cond: Value
    then: list[Node]
    orelse: list[Node]
    span: Span
    role: str | None = None
    elected: bool = False
    """`with elect_one():` -- `then` runs in one fixed thread, the role's thread 0 (`cond` is
    `warp.rank == 0 and lane.id == 0`), the thread that issues the role's TMA copies, so the
    per-thread async groups it commits are the ones the role's other one-thread ops see."""


@dataclass(eq=False, slots=True)
class Role:
    """A warp role: `with role("load", warps=range(0, 4), regs=40):`."""

    name: str
    warp_start: int
    warp_stop: int
    regs: int | None
    body: list[Node]
    span: Span
    name_span: Span

    @property
    def warps(self) -> int:
        return self.warp_stop - self.warp_start


Node = Op | ForOp | IfOp | Role


@dataclass(slots=True)
class Param:
    name: str
    value: Value
    span: Span


@dataclass(slots=True)
class SmemAlloc:
    """A shared-memory allocation (a buffer, or the barriers of a pipeline/mbarrier)."""

    name: str
    dtype: DType | None
    shape: tuple[int, ...]
    layout: SmemLayout | None
    nbytes: int
    align: int
    span: Span
    kind: str = "buffer"  # "buffer" | "barrier"
    offset: int | None = None
    """A byte offset the kernel placed the buffer at (`smem(..., offset=)`); None: planned."""
    offset_span: Span | None = None


@dataclass(eq=False, slots=True)
class Kernel:
    name: str
    arch: str
    grid: tuple[SymExpr, ...]
    warps: int
    cluster: tuple[int, ...]
    params: list[Param]
    body: list[Node]
    span: Span
    name_span: Span
    decorator_span: Span
    dims: dict[str, Dim] = field(default_factory=dict)
    roles: dict[str, Role] = field(default_factory=dict)
    smem: list[SmemAlloc] = field(default_factory=list)
    values: dict[str, Value] = field(default_factory=dict)
    """Every named definition in the kernel (last binding wins), for hovers and tools."""
    arch_span: Span | None = None
    warps_span: Span | None = None

    @property
    def threads(self) -> int:
        return self.warps * 32

    def walk(self) -> Iterator[Node]:
        """Every node in program order (pre-order)."""
        yield from walk_nodes(self.body)

    def ops(self) -> Iterator[Op]:
        for n in self.walk():
            if isinstance(n, Op):
                yield n


def walk_nodes(nodes: Sequence[Node]) -> Iterator[Node]:
    for n in nodes:
        yield n
        if isinstance(n, ForOp | Role):
            yield from walk_nodes(n.body)
        elif isinstance(n, IfOp):
            yield from walk_nodes(n.then)
            yield from walk_nodes(n.orelse)


@dataclass(eq=False, slots=True)
class Program:
    """A whole .cake file: its top-level constants, dims and kernels."""

    path: str
    constants: dict[str, Value] = field(default_factory=dict)
    dims: dict[str, Dim] = field(default_factory=dict)
    kernels: list[Kernel] = field(default_factory=list)
    constant_spans: dict[str, Span] = field(default_factory=dict)
    """Where each top-level constant's value is written (`BM, BN = 128, 256` gives the
    span of `128` for BM): tactics and fixes rewrite constants there."""


__all__ = ["Dim", "ForOp", "IfOp", "Kernel", "Node", "Op", "Param", "Program", "Role",
           "SmemAlloc", "Value", "Var", "walk_nodes"]
