"""CK329: an int read from global memory (`load_scalar`) out of a tensor the kernel writes.

A value read into an int steers the kernel: it is a loop bound, a tile coordinate, a
condition.  Blocks run in any order and nothing orders one block's global stores before
another block's loads, so a kernel that writes the tensor it reads its routing from gets
whichever value was there when the load ran (and the lowering reads it through the
read-only path, which may not see the kernel's own writes at all).  Routing data is an
input: the rule asks for it to stay one.

The finding is at the load: that is where a value of unknown age enters the kernel.  The
first write to the tensor is a related location.  The check is by tensor, not by element:
a kernel that writes one part of a tensor and reads another is still reported, since the
two parts are one buffer to the read-only cache.
"""

from __future__ import annotations

from cake_core.diagnostics import codes
from cake_core.diagnostics.model import Diagnostic, Related
from cake_core.ir.kernel import Kernel, Op, Program
from cake_core.ir.types import IntType, TensorType, TileType
from cake_core.source import SourceFile

#: Every code this pass may emit (tests/test_rule_codes.py holds it to that).
CODES = (codes.SCALAR_READ_OF_WRITTEN,)


def check(program: Program, source: SourceFile) -> list[Diagnostic]:
    out: list[Diagnostic] = []
    for kernel in program.kernels:
        out.extend(_check_kernel(kernel))
    return out


def _scalar_source(op: Op) -> str | None:
    """The tensor an op reads into an int: an op with an int result that reads a whole
    tensor argument (not a tile of it)."""
    if not op.results or not isinstance(op.results[0].type, IntType):
        return None
    for name in op.prim.effects.reads:
        v = op.args.get(name)
        if v is not None and isinstance(v.type, TensorType):
            return v.name
    return None


def _written(op: Op) -> str | None:
    for name in op.prim.effects.writes:
        v = op.args.get(name)
        if v is not None and isinstance(v.type, TileType):
            return v.type.tensor
    return None


def _check_kernel(kernel: Kernel) -> list[Diagnostic]:
    ops = list(kernel.ops())
    first_write: dict[str, Op] = {}
    for op in ops:
        t = _written(op)
        if t is not None and t not in first_write:
            first_write[t] = op
    out: list[Diagnostic] = []
    for op in ops:
        t = _scalar_source(op)
        write = first_write.get(t) if t is not None else None
        if write is None:
            continue
        out.append(codes.SCALAR_READ_OF_WRITTEN.at(
            op.span, f"this reads an int from `{t}`, which the kernel also writes (line "
            f"{write.span.start.line + 1}): blocks run in any order, so the value read "
            "depends on which block ran first",
            related=[Related(write.span, f"`{t}` is written here")],
            notes=["routing data (counts, offsets) must be an input the kernel only reads; "
                   "compute it in an earlier kernel"]))
    return out
