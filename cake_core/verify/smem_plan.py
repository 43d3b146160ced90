"""The shared-memory plan of a kernel: where each buffer and barrier goes, and the total.

One plan serves the verifier (CK201 compares its total with the opt-in limit), the
resource table of `cake check --resources`, and the lowering, which must place
allocations exactly here: buffers first, by decreasing alignment (declaration order
among equals), then mbarriers.  Sorting by alignment keeps padding to what the largest
alignments force; a swizzled buffer's address pattern is only what TMA and wgmma expect
when its base is aligned to the swizzle period, so the dynamic smem base itself is
declared `__align__(1024)`.
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
        return self.placements[-1].end if self.placements else 0

    @property
    def buffer_bytes(self) -> int:
        return sum(p.nbytes for p in self.placements if p.kind == "buffer")

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
        """The allocation whose placement crosses the limit."""
        return next((p for p in self.placements if p.end > self.limit), None)

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
    order = sorted(enumerate(allocs),
                   key=lambda ia: (ia[1].kind == "barrier", -alignment(ia[1]), ia[0]))
    out: list[Placement] = []
    offset = 0
    for _, a in order:
        align = alignment(a)
        start = -(-offset // align) * align
        nbytes = (sizes or {}).get(a.name, a.nbytes)
        layout = str(a.layout) if a.layout is not None else "mbarrier"
        out.append(Placement(a.name, a.kind, start, nbytes, align, start - offset, a.span,
                             layout))
        offset = start + nbytes
    return SmemPlan(tuple(out), limit)


def smem_plan(kernel: Kernel, arch: ArchSpec) -> SmemPlan:
    return plan_allocations(kernel.smem, arch.smem_per_block_optin)
