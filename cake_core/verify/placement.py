"""Buffers placed by hand with `smem(..., offset=)`: aligned (CK318), and sharing bytes
only with buffers that are never live at the same time (CK317).

The planner never overlaps what it places itself, so only hand-placed buffers can share
bytes, and that is the point of placing them: an epilogue tile that reuses the bytes of
the main loop's ring.  Reuse is right only when no thread can still touch the one
buffer while another thread touches the other.  The lifetimes are read from the kernel's
top-level statements, conservatively, because threads do not run in step:

- a buffer is live from the first top-level statement that uses it to the last one (a
  use inside a loop or a role counts for the whole statement);
- roles run concurrently, so a use in any role is a use in all of them;
- two buffers used in disjoint ranges are apart only if a `syncthreads()` at the top
  level lies between the ranges: without one, a fast warp may start on the second
  buffer while a slow one still works on the first.

Asynchronous work still in flight past the last statement that names a buffer (a TMA
store not yet waited for) is not tracked; the simulator's race detection, which runs on
the same addresses as the lowering, catches it.
"""

from __future__ import annotations

from collections.abc import Iterator

from cake_core.diagnostics import codes
from cake_core.diagnostics.model import Diagnostic, Related
from cake_core.ir.kernel import Kernel, Node, Op, Program, Role, SmemAlloc, walk_nodes
from cake_core.ir.types import SmemType
from cake_core.source import SourceFile
from cake_core.verify.smem_plan import alignment

#: Every code this pass may emit (tests/test_rule_codes.py holds it to that).
CODES = (codes.SMEM_OVERLAP, codes.SMEM_OFFSET_MISALIGNED)


def check(program: Program, source: SourceFile) -> list[Diagnostic]:
    del source
    out: list[Diagnostic] = []
    for k in program.kernels:
        placed = [a for a in k.smem if a.kind == "buffer" and a.offset is not None]
        if not placed:
            continue
        out.extend(_misaligned(placed))
        out.extend(_overlaps(k, placed))
    return out


def _misaligned(placed: list[SmemAlloc]) -> Iterator[Diagnostic]:
    for a in placed:
        assert a.offset is not None
        align = alignment(a)
        if a.offset % align == 0:
            continue
        why = (f"its {a.layout} pattern repeats every {align} bytes and TMA and wgmma "
               "compute it from the address" if a.layout is not None and a.layout.swizzle
               else "TMA copies need 128-byte aligned shared-memory boxes")
        down, up = a.offset // align * align, -(-a.offset // align) * align
        yield codes.SMEM_OFFSET_MISALIGNED.at(
            a.offset_span or a.span, f"`{a.name}` is placed at byte {a.offset}, which is not a "
            f"multiple of {align}: {why}",
            notes=[f"the nearest aligned offsets are {down} and {up}"])


def _overlaps(k: Kernel, placed: list[SmemAlloc]) -> Iterator[Diagnostic]:
    live = _lifetimes(k)
    barriers = _block_barriers(k)
    reported: set[str] = set()
    for j, b in enumerate(placed):  # declaration order: the later one is the finding
        for a in placed[:j]:
            assert a.offset is not None and b.offset is not None
            lo, hi = max(a.offset, b.offset), min(a.offset + a.nbytes, b.offset + b.nbytes)
            if lo >= hi or b.name in reported:
                continue
            la, lb = live.get(a.name), live.get(b.name)
            if la is None or lb is None or _apart(la, lb, barriers):
                continue
            reported.add(b.name)
            yield codes.SMEM_OVERLAP.at(
                b.span, f"`{b.name}` (bytes [{b.offset}, {b.offset + b.nbytes})) overlaps "
                f"`{a.name}` (bytes [{a.offset}, {a.offset + a.nbytes})) on bytes [{lo}, {hi}), "
                "and the two are live at the same time: a write to one changes the other",
                related=[Related(a.span, f"`{a.name}` is declared here")],
                notes=["place it past the other buffer, or separate their uses with a "
                       "`syncthreads()` outside roles so that no thread still uses the "
                       "first when another starts on the second"])


def _lifetimes(k: Kernel) -> dict[str, tuple[int, int]]:
    """The range of top-level statements that use each buffer (roles count as one)."""
    roles = [i for i, n in enumerate(k.body) if isinstance(n, Role)]
    live: dict[str, tuple[int, int]] = {}
    for i, node in enumerate(k.body):
        lo, hi = (roles[0], roles[-1]) if isinstance(node, Role) else (i, i)
        for name in _buffers_used(node):
            old = live.get(name)
            live[name] = (lo, hi) if old is None else (min(old[0], lo), max(old[1], hi))
    return live


def _buffers_used(node: Node) -> set[str]:
    nodes = [node] if isinstance(node, Op) else walk_nodes([node])
    out: set[str] = set()
    for n in nodes:
        if isinstance(n, Op):
            for v in n.args.values():
                if isinstance(v.type, SmemType):
                    out.add(v.type.buffer)
    return out


def _block_barriers(k: Kernel) -> list[int]:
    return [i for i, n in enumerate(k.body)
            if isinstance(n, Op) and n.prim.effects.fence == "block"]


def _apart(a: tuple[int, int], b: tuple[int, int], barriers: list[int]) -> bool:
    first, second = (a, b) if a[1] < b[0] else (b, a)
    if first[1] >= second[0]:
        return False
    return any(first[1] < i < second[0] for i in barriers)
