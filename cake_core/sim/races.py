"""Happens-before race detection on shared-memory bytes.

Every actor -- a role process, and each asynchronous engine a process drives (its TMA
loads per barrier, its cp.async copies, its wgmma groups, its bulk stores) -- owns one
vector-clock component.  Synchronisation moves clocks: an mbarrier phase collects the
clocks of everything that arrived on it (TMA completions included) and hands them to
each waiter; `syncthreads` and named barriers join their participants; `cp_async_wait`,
`wgmma_wait` and `tma_store_wait` join the copies they waited for.  Two accesses to the
same bytes race when at least one writes and neither is ordered before the other --
whatever order this particular schedule happened to run them in, so one run finds races
that another interleaving would turn into wrong numbers.

Records are FastTrack-style epochs: an access stores its actor's component and that
component's value; a later access is ordered after it when its clock has caught up.
An access that covers an older one and is ordered after it makes the older one
redundant, which keeps the log to roughly one record per live buffer region.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from cake_core.ir.kernel import Op
from cake_core.sim.layout import Buffer, Footprint

VC = dict[int, int]


def join(into: VC, other: VC) -> None:
    """`into` = pointwise max(into, other)."""
    for k, v in other.items():
        if into.get(k, 0) < v:
            into[k] = v


@dataclass(eq=False, slots=True)
class Access:
    """One read or write of a set of smem bytes by one actor at one epoch."""

    buffer: Buffer
    fp: Footprint
    mask: np.ndarray | None
    """Which elements of the footprint were touched (a warp's share of a copy), or all."""
    write: bool
    comp: int
    epoch: int
    op: Op
    who: str
    proxy: str = "generic"
    """"generic" (ld/st.shared, cp.async) or "async" (TMA, wgmma operand reads)."""
    fenced: bool = False
    issued: bool = False
    threads: np.ndarray | None = None
    """The threads of its process that made it (None: all of them), for the fences."""
    """Made by an asynchronous operation (a copy, a bulk store, a wgmma group) on its own
    time, rather than by a process at its place in the program."""
    lo: int = 0
    hi: int = 0
    dense: bool = True
    _addrs: np.ndarray | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if self.mask is None:
            self.lo, self.hi, self.dense = self.fp.lo, self.fp.hi, self.fp.dense
        else:
            a = self.addrs
            es = self.fp.itemsize
            self.lo = int(a.min()) if a.size else 0
            self.hi = int(a.max()) + es if a.size else 0
            self.dense = self.hi - self.lo == a.size * es

    @property
    def addrs(self) -> np.ndarray:
        if self._addrs is None:
            a = self.fp.byte_addr.ravel()
            if self.mask is not None:
                a = a[self.mask.ravel()]
            self._addrs = a
        return self._addrs

    @property
    def kind(self) -> str:
        return "write" if self.write else "read"

    def relative(self, lo: int, hi: int) -> str:
        """Bytes [lo, hi) as offsets inside the buffer."""
        return f"[{lo - self.buffer.offset}, {hi - self.buffer.offset})"


@dataclass(frozen=True, slots=True)
class Conflict:
    first: Access
    second: Access
    lo: int
    hi: int
    kind: str
    """"race" (unordered) or "proxy" (ordered, but a generic write unfenced before an
    async-proxy read)."""


def _overlap(a: Access, b: Access) -> tuple[int, int] | None:
    lo, hi = max(a.lo, b.lo), min(a.hi, b.hi)
    if lo >= hi:
        return None
    if a.dense and b.dense:
        return lo, hi
    x, y = a.addrs, b.addrs
    x = x[(x >= lo) & (x < hi)]
    y = y[(y >= lo) & (y < hi)]
    common = np.intersect1d(x, y, assume_unique=False)
    if common.size == 0:
        return None
    return int(common.min()), int(common.max()) + a.fp.itemsize


def _covers(a: Access, b: Access) -> bool:
    if a.fp is b.fp and a.mask is None:
        return True
    return a.dense and a.lo <= b.lo and b.hi <= a.hi


class RaceLog:
    """The live access records of one block's shared memory, by buffer.

    Buffers placed by hand (`smem(..., offset=)`) may share bytes; such buffers share one
    record list, so an access through one is checked against accesses through the other
    (addresses are absolute, so the byte comparison needs nothing else).
    """

    def __init__(self) -> None:
        self.by_buffer: dict[str, list[Access]] = {}
        self._key: dict[str, str] = {}
        self._ranges: list[tuple[int, int, str]] = []

    def key(self, buf: Buffer) -> str:
        """The record list of `buf`: its own, or that of a buffer it overlaps."""
        k = self._key.get(buf.name)
        if k is None:
            lo, hi = buf.offset, buf.offset + buf.nbytes
            k = next((key for a, b, key in self._ranges if a < hi and lo < b), buf.name)
            self._key[buf.name] = k
            self._ranges.append((lo, hi, k))
        return k

    def access(self, acc: Access, vc: VC) -> Conflict | None:
        """Record `acc` (made by an actor whose clock is `vc`); return what it conflicts with."""
        name = self.key(acc.buffer)
        recs = self.by_buffer.setdefault(name, [])
        found: Conflict | None = None
        keep: list[Access] = []
        for r in recs:
            ordered = vc.get(r.comp, 0) >= r.epoch or r.comp == acc.comp
            if found is None and (acc.write or r.write):
                proxy = (ordered and r.write and r.proxy == "generic" and not r.fenced
                         and acc.proxy == "async" and not acc.write and r.comp != acc.comp)
                if not ordered or proxy:
                    ov = _overlap(r, acc)
                    if ov is not None:
                        found = Conflict(r, acc, ov[0], ov[1], "race" if not ordered else "proxy")
                        keep.append(r)
                        continue
            if ordered and (acc.write or not r.write) and _covers(acc, r):
                continue  # acc supersedes r: anything racing with r also races with acc
            keep.append(r)
        keep.append(acc)
        self.by_buffer[name] = keep
        return found
