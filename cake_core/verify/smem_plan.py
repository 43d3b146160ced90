"""The shared-memory plan of a kernel: where each buffer and barrier goes, and the total.

One plan serves the verifier (CK201 compares its total with the opt-in limit), the
resource table of `cake check --resources`, and the lowering, which must place
allocations exactly here: buffers placed by hand (`smem(..., offset=)`) at their offsets,
then the others, by decreasing alignment (declaration order among equals), then mbarriers,
each at the lowest aligned address that overlaps no allocation placed before it.  Sorting
by alignment keeps padding to what the largest alignments force; a swizzled buffer's
address pattern is only what TMA and wgmma expect when its base is aligned to the swizzle
period, so the dynamic smem base itself is declared `__align__(1024)`.  Placed buffers
may overlap each other (that is how a kernel reuses bytes); the verifier checks they are
aligned (CK318) and never live at the same time (CK317).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from cake_core.hardware import ArchSpec
from cake_core.ir.kernel import Kernel, SmemAlloc
from cake_core.source import Span

#: Alignment of an unswizzled buffer: TMA needs 128-byte aligned shared-memory boxes.
BUFFER_ALIGN = 128
#: Alignment of a swizzled buffer: the period of its XOR pattern (8 rows of the span).
SWIZZLE_ALIGN = {32: 256, 64: 512, 128: 1024}
BARRIER_ALIGN = 8


def alignment(alloc: SmemAlloc) -> int:
    if alloc.kind == "barrier":
        return BARRIER_ALIGN
    span = alloc.layout.swizzle if alloc.layout is not None else 0
    return max(SWIZZLE_ALIGN.get(span, BUFFER_ALIGN), alloc.align, BUFFER_ALIGN)


@dataclass(frozen=True, slots=True)
class Placement:
    name: str
    kind: str
    offset: int
    nbytes: int
    align: int
    padding: int
    """Bytes left empty before this allocation to align it."""
    span: Span
    layout: str

    @property
    def end(self) -> int:
        return self.offset + self.nbytes


@dataclass(frozen=True, slots=True)
class SmemPlan:
    placements: tuple[Placement, ...]
    limit: int
    """The most a block may use: the arch's opt-in maximum per block."""

    @property
    def total(self) -> int:
        return max((p.end for p in self.placements), default=0)

    @property
    def buffer_bytes(self) -> int:
        """Bytes covered by buffers: hand-placed buffers sharing bytes count them once."""
        covered, end = 0, 0
        for p in sorted((p for p in self.placements if p.kind == "buffer"),
                        key=lambda p: p.offset):
            covered += max(0, p.end - max(p.offset, end))
            end = max(end, p.end)
        return covered

    @property
    def barrier_bytes(self) -> int:
        return sum(p.nbytes for p in self.placements if p.kind == "barrier")

    @property
    def padding_bytes(self) -> int:
        return sum(p.padding for p in self.placements)

    @property
    def fits(self) -> bool:
        return self.total <= self.limit

    def overflowing(self) -> Placement | None:
        """The allocation whose placement crosses the limit (the first to end past it)."""
        over = [p for p in self.placements if p.end > self.limit]
        return min(over, key=lambda p: p.offset) if over else None

    def get(self, name: str) -> Placement | None:
        return next((p for p in self.placements if p.name == name), None)

    def as_data(self) -> dict[str, object]:
        return {
            "total": self.total, "limit": self.limit, "buffers": self.buffer_bytes,
            "barriers": self.barrier_bytes, "padding": self.padding_bytes,
            "placements": [{"name": p.name, "kind": p.kind, "offset": p.offset,
                            "bytes": p.nbytes, "align": p.align, "padding": p.padding}
                           for p in self.placements],
        }


def plan_allocations(allocs: Sequence[SmemAlloc], limit: int,
                     sizes: dict[str, int] | None = None) -> SmemPlan:
    """Place `allocs`; `sizes` overrides byte counts by name (to try fewer stages)."""
    out: list[Placement] = []
    taken: list[tuple[int, int]] = []  # [start, end) of what is placed, sorted
    for a in allocs:
        if a.offset is not None:
            nbytes = (sizes or {}).get(a.name, a.nbytes)
            out.append(Placement(a.name, a.kind, a.offset, nbytes, alignment(a), 0, a.span,
                                 _layout(a)))
            taken.append((a.offset, a.offset + nbytes))
    taken.sort()
    order = sorted((ia for ia in enumerate(allocs) if ia[1].offset is None),
                   key=lambda ia: (ia[1].kind == "barrier", -alignment(ia[1]), ia[0]))
    offset = 0
    for _, a in order:
        align = alignment(a)
        nbytes = (sizes or {}).get(a.name, a.nbytes)
        start = -(-offset // align) * align
        for lo, hi in taken:  # first fit around the hand-placed buffers
            if hi > start and lo < start + nbytes:
                start = -(-hi // align) * align
        floor = max([offset, *(hi for _, hi in taken if hi <= start)])
        out.append(Placement(a.name, a.kind, start, nbytes, align, start - floor, a.span,
                             _layout(a)))
        offset = start + nbytes
    return SmemPlan(tuple(out), limit)


def _layout(a: SmemAlloc) -> str:
    return str(a.layout) if a.layout is not None else "mbarrier"


def smem_plan(kernel: Kernel, arch: ArchSpec) -> SmemPlan:
    return plan_allocations(kernel.smem, arch.smem_per_block_optin)
