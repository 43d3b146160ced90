"""Bank conflicts as a price: wavefronts per conflict-free wavefront, per op.

Shared-memory bandwidth is wavefronts, not bytes: an access whose lanes collide on banks
takes `n` wavefronts where one would do, and moves its bytes `n` times slower.  The
verifier already counts wavefronts exactly from lane addresses (`cake_core.verify.banks`,
driven by `cake_core.verify.layout.conflict_reports`, the code behind CK404); this module
asks it once per kernel and turns each report into the ratio the cost facets scale their
shared-memory time by.  Nothing here computes an address.

Only the accesses the bank model follows are priced this way: `ldmatrix`, `load` and
`store` of `rows` fragments, and `cp_async` writes.  TMA and wgmma keep a ratio of 1: the
layout rules (CK402/CK403) only let them touch buffers in a layout their descriptors
encode, and for those the hardware walks whole 128-byte lines (a swizzle atom's 8 rows of
16-byte chunks land on distinct banks, and an unswizzled wgmma operand is stored as
contiguous 8 x 16-byte blocks), so they are conflict-free by construction.  Stores of
mma accumulators to shared memory are not modelled by the verifier either; they keep 1.

The ratio of an op is the one of its worst starting offset, as the diagnostic reports it:
conflicts repeat every 1024 bytes, so in the kernels seen so far every stage, warp and
iteration shares one pattern, and where they differ the worst is an upper bound.  A start
that depends on a launch-time dim cannot be analysed and keeps 1.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

from cake_core.ir.kernel import Kernel, Op
from cake_core.verify.layout import conflict_reports, uses_by_buffer
from cake_core.verify.views import ViewTracer


@dataclass(frozen=True, slots=True)
class Conflict:
    """One op's shared-memory access: wavefronts taken and the conflict-free count."""

    wavefronts: int
    ideal: int
    worst: int
    """Most wavefronts one phase takes: the n of an n-way conflict."""

    @property
    def ratio(self) -> float:
        return self.wavefronts / self.ideal if self.ideal else 1.0


#: Kernels analysed recently, by identity (IR kernels are not rebuilt in place, and a
#: prediction profiles the same kernel many times: calibration, tactics, benchmarks).
_CACHE: OrderedDict[Kernel, dict[int, Conflict]] = OrderedDict()
_CACHE_SIZE = 64


def kernel_conflicts(kernel: Kernel) -> dict[int, Conflict]:
    """id(op) -> its conflicts, for every op whose access takes extra wavefronts."""
    hit = _CACHE.get(kernel)
    if hit is not None:
        _CACHE.move_to_end(kernel)
        return hit
    out = _analyse(kernel)
    _CACHE[kernel] = out
    if len(_CACHE) > _CACHE_SIZE:
        _CACHE.popitem(last=False)
    return out


def op_conflict(kernel: Kernel, op: Op) -> Conflict | None:
    return kernel_conflicts(kernel).get(id(op))


def _analyse(kernel: Kernel) -> dict[int, Conflict]:
    tracer = ViewTracer(kernel)
    uses = uses_by_buffer(kernel, tracer)
    out: dict[int, Conflict] = {}
    for name, buf_uses in uses.items():
        g = tracer.geometries.get(name)
        if g is None:
            continue
        for use, rep in conflict_reports(g, buf_uses):
            if rep.extra <= 0:
                continue
            c = Conflict(rep.wavefronts, rep.phases, rep.worst)
            prev = out.get(id(use.op))
            if prev is None or c.ratio > prev.ratio:
                out[id(use.op)] = c
    return out
