"""Integer expressions over compile-time constants, launch-time dims and runtime indices.

Everything that counts in a kernel (tile shapes, grid sizes, loop bounds, tile
coordinates) is one of these.  Constants fold as they are built, so `BM * 2` is just
`256`; `dim("K")` stays symbolic and carries the divisibility facts the kernel
declares (`dim("K", multiple_of=64)`), which is what lets the verifier say whether a
tile loop has a ragged edge.  Runtime indices (`block.x`, a loop variable, a pipeline
stage) are `Var`s: they never fold, but their ranges are known.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from operator import attrgetter

MAX_CONST_BITS = 64
"""A compile-time integer must fit in this many bits (sign apart), as an integer literal
must: no size, index or count on a GPU needs more, and it keeps every fold cheap
(`10**10**10` is refused before it is computed, not after)."""

MAX_EXPR_NODES = 4096
"""The most nodes an expression tree may have, shared subtrees counted each time they
are used.  Names can share one subtree (`b = a + a; c = b + b`), so a few dozen lines
can describe an exponentially large tree, and every analysis that reads it (printing,
evaluation, bounds) would take exponential time."""

MAX_EXPR_DEPTH = 100
"""The deepest an expression tree may be: the analyses walk it recursively, and this
keeps them far from Python's recursion limit (the parser bounds nesting the same way)."""


class SymExpr:
    """Base of the integer expression tree.  Build with the helpers, not the classes."""

    __slots__ = ()

    # -- queries -------------------------------------------------------------------------
    #: The folded value when the expression is a compile-time constant, else None.
    #: A class attribute overridden by `Const`, not a method: it is read constantly.
    const: int | None = None

    def atoms(self) -> set[SymExpr]:
        """Dims and Vars the expression depends on."""
        out: set[SymExpr] = set()
        stack: list[SymExpr] = [self]
        while stack:
            e = stack.pop()
            if isinstance(e, Dim | Var):
                out.add(e)
            elif isinstance(e, BinExpr):
                stack.extend((e.left, e.right))
        return out

    @property
    def is_launch_constant(self) -> bool:
        """True when it depends only on constants and dims (known before launch)."""
        stack: list[SymExpr] = [self]  # `atoms()` without building the set
        while stack:
            e = stack.pop()
            if isinstance(e, Var):
                return False
            if isinstance(e, BinExpr):
                stack.extend((e.left, e.right))
        return True

    #: Nodes of the tree (shared subtrees counted each time) and its depth; see
    #: MAX_EXPR_NODES and MAX_EXPR_DEPTH.  Leaves answer from these class attributes.
    nodes: int = 1
    depth: int = 0

    # -- arithmetic --------------------------------------------------------------------
    def __add__(self, other: SymLike) -> SymExpr:
        return add(self, sym(other))

    def __radd__(self, other: SymLike) -> SymExpr:
        return add(sym(other), self)

    def __sub__(self, other: SymLike) -> SymExpr:
        return sub(self, sym(other))

    def __rsub__(self, other: SymLike) -> SymExpr:
        return sub(sym(other), self)

    def __mul__(self, other: SymLike) -> SymExpr:
        return mul(self, sym(other))

    def __rmul__(self, other: SymLike) -> SymExpr:
        return mul(sym(other), self)

    def __floordiv__(self, other: SymLike) -> SymExpr:
        return floordiv(self, sym(other))

    def __mod__(self, other: SymLike) -> SymExpr:
        return mod(self, sym(other))


SymLike = SymExpr | int


@dataclass(frozen=True, slots=True)
class Const(SymExpr):
    value: int

    const = property(attrgetter("value"))  # C-level getter: no Python frame per read
    is_launch_constant = True  # leaves answer directly, without the walk

    def __str__(self) -> str:
        return str(self.value)


@dataclass(frozen=True, slots=True)
class Dim(SymExpr):
    """A size known at launch: `dim("M", multiple_of=64, max=4096)`."""

    name: str
    multiple_of: int = 1
    max: int | None = None

    is_launch_constant = True

    def __str__(self) -> str:
        return "sm_count()" if self.name == SM_COUNT else self.name


@dataclass(frozen=True, slots=True)
class Var(SymExpr):
    """A runtime index (block.x, a loop variable, a stage).  `hi` is exclusive, None = unknown."""

    name: str
    lo: SymExpr | None = None
    hi: SymExpr | None = None

    is_launch_constant = False

    def __str__(self) -> str:
        return self.name


SM_COUNT = "sm_count"
"""The launch-time size `sm_count()` names: the multiprocessor count of the device the
kernel is launched on.  It is a `Dim` like `dim("M")` -- known at launch, never at compile
time -- except that the device, not the caller, supplies it: the lowered launcher asks the
driver, the simulator uses a small configurable count, the cost model the target GPU's.
`dim("sm_count")` is refused, so the name always means this."""


def sm_count() -> Dim:
    """The launch-time SM count (see SM_COUNT)."""
    return Dim(SM_COUNT)


def is_sm_count(e: SymExpr) -> bool:
    return isinstance(e, Dim) and e.name == SM_COUNT


_OPS = {"+": 6, "-": 6, "*": 7, "//": 7, "%": 7, "cdiv": 9, "min": 9, "max": 9}


@dataclass(frozen=True, slots=True)
class BinExpr(SymExpr):
    op: str  # one of _OPS
    left: SymExpr
    right: SymExpr
    nodes: int = field(default=0, compare=False, repr=False)
    depth: int = field(default=0, compare=False, repr=False)

    def __post_init__(self) -> None:
        left, right = self.left, self.right
        object.__setattr__(self, "nodes", left.nodes + right.nodes + 1)
        object.__setattr__(self, "depth", max(left.depth, right.depth) + 1)

    def __str__(self) -> str:
        op = self.op
        if op in ("cdiv", "min", "max"):
            return f"{op}({self.left}, {self.right})"
        prec = _OPS[op]
        return f"{_operand(self.left, op, prec, False)} {op} {_operand(self.right, op, prec, True)}"


def _operand(e: SymExpr, op: str, prec: int, right_side: bool) -> str:
    """An operand of infix `op` (precedence `prec`), parenthesised where it needs it."""
    if isinstance(e, BinExpr) and e.op in _OPS and _OPS[e.op] < 9:
        p = _OPS[e.op]
        if p < prec or (right_side and p == prec and op != "+" and op != "*"):
            return f"({e})"
    return str(e)


def out_of_range(value: int) -> bool:
    """Whether a folded constant needs more than MAX_CONST_BITS bits."""
    return abs(value).bit_length() > MAX_CONST_BITS


def limit_problem(e: SymExpr) -> str | None:
    """Why `e` is past one of the limits above, or None when it is within them."""
    c = e.const
    if c is not None:
        if out_of_range(c):
            return f"the value needs {abs(c).bit_length()} bits; constants have at most " \
                   f"{MAX_CONST_BITS}"
        return None
    if e.nodes > MAX_EXPR_NODES:
        return f"the expression has {e.nodes} terms once names are expanded; the limit " \
               f"is {MAX_EXPR_NODES}"
    if e.depth > MAX_EXPR_DEPTH:
        return f"the expression is nested {e.depth} operations deep; the limit is " \
               f"{MAX_EXPR_DEPTH}"
    return None


def sym(x: SymLike) -> SymExpr:
    return Const(x) if isinstance(x, int) else x


def apply_op(op: str, a: int, b: int) -> int:
    """The value of `a op b` for one of the expression operators (the single definition
    the builder's folding, the cost model and the simulator all evaluate with)."""
    if op == "+":
        return a + b
    if op == "-":
        return a - b
    if op == "*":
        return a * b
    if op == "//":
        return a // b
    if op == "%":
        return a % b
    if op == "cdiv":
        return -(-a // b)
    if op == "min":
        return min(a, b)
    if op == "max":
        return max(a, b)
    raise ValueError(f"unknown operator {op!r}")


def _bin(op: str, a: SymExpr, b: SymExpr) -> SymExpr:
    """Build a node, folding constants; division by a zero constant raises ZeroDivisionError."""
    ca, cb = a.const, b.const
    if op in ("//", "%", "cdiv") and cb == 0:
        raise ZeroDivisionError(op)
    if ca is not None and cb is not None:
        return Const(apply_op(op, ca, cb))
    # identities that keep shapes readable
    if op == "+" and ca == 0:
        return b
    if op in ("+", "-") and cb == 0:
        return a
    if op == "*" and (ca == 1 or cb == 0):
        return b
    if op == "*" and (cb == 1 or ca == 0):
        return a
    if op in ("//", "cdiv") and cb == 1:
        return a
    if op == "%" and cb == 1:
        return Const(0)
    if op == "cdiv" and cb is not None and divides(a, cb):
        return BinExpr("//", a, b)
    if op == "-" and a == b:
        return Const(0)
    return BinExpr(op, a, b)


def add(a: SymExpr, b: SymExpr) -> SymExpr:
    return _bin("+", a, b)


def sub(a: SymExpr, b: SymExpr) -> SymExpr:
    return _bin("-", a, b)


def mul(a: SymExpr, b: SymExpr) -> SymExpr:
    return _bin("*", a, b)


def floordiv(a: SymExpr, b: SymExpr) -> SymExpr:
    return _bin("//", a, b)


def mod(a: SymExpr, b: SymExpr) -> SymExpr:
    return _bin("%", a, b)


def cdiv(a: SymExpr, b: SymExpr) -> SymExpr:
    return _bin("cdiv", a, b)


def smin(a: SymExpr, b: SymExpr) -> SymExpr:
    return _bin("min", a, b)


def smax(a: SymExpr, b: SymExpr) -> SymExpr:
    return _bin("max", a, b)


def multiple_of(e: SymExpr) -> int:
    """The largest factor the expression is known to be a multiple of (0 means zero)."""
    if isinstance(e, Const):
        return abs(e.value)
    if isinstance(e, Dim):
        return e.multiple_of
    if isinstance(e, Var):
        return 1
    if isinstance(e, BinExpr):
        if e.op == "*":
            return multiple_of(e.left) * multiple_of(e.right)
        if e.op in ("+", "-", "min", "max"):
            return math.gcd(multiple_of(e.left), multiple_of(e.right))
        if e.op == "//":
            m, d = multiple_of(e.left), e.right.const
            if d and m and m % d == 0:
                return m // d
    return 1


def divides(e: SymExpr, n: int) -> bool:
    """Whether `e` is provably a multiple of `n`."""
    if n == 0:
        return False
    m = multiple_of(e)
    return m == 0 or m % n == 0


def upper_bound(e: SymExpr) -> int | None:
    """A constant upper bound (inclusive) when one can be derived, else None."""
    if isinstance(e, Const):
        return e.value
    if isinstance(e, Dim):
        return e.max
    if isinstance(e, Var):
        if e.hi is None:
            return None
        hi = upper_bound(e.hi)
        return None if hi is None else hi - 1
    if isinstance(e, BinExpr):
        a, b = upper_bound(e.left), upper_bound(e.right)
        if e.op == "%" and e.right.const is not None:
            return e.right.const - 1
        if a is None or b is None:
            return None
        if e.op in ("+", "*", "max", "min", "cdiv") and b >= 0 and a >= 0:
            return apply_op(e.op, a, b)
        if e.op == "//" and e.right.const:
            return a // e.right.const
    return None
