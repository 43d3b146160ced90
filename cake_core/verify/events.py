"""The concrete events of one agent's unrolled program, as the later rules consume them.

`local.py` produces them (it knows each agent's stage indices and async groups);
`phases.py` counts mbarrier arrivals and bytes from them; `deadlock.py` runs all agents'
events together.  Every event keeps its op, so a finding can point at the source.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from cake_core.ir.kernel import ForOp, IfOp, Op
from cake_core.source import Span
from cake_core.verify.effects import Region

#: A raw mbarrier: (allocation name, index).  The index is None when it is not known.
BarKey = tuple[str, int | None]


@dataclass(frozen=True, slots=True)
class Access:
    """A shared-memory access.  Async accesses complete later, at `done` (see below)."""

    region: Region
    write: bool
    span: Span
    async_group: str | None = None
    """"tma", "cp_async", "wgmma", "bulk_store" or None for a synchronous access."""
    seq: int = 0
    """For cp_async, wgmma and bulk_store: the agent's group number, counting from 1."""


@dataclass(frozen=True, slots=True)
class PipeSync:
    pipeline: str
    action: str  # acquire | commit | wait | release
    stage: int
    round: int


@dataclass(frozen=True, slots=True)
class Arrive:
    bar: BarKey
    count: int
    expect_bytes: int | None = None
    """For expect_tx: the bytes declared (None when not a constant)."""
    guard: IfOp | ForOp | None = None
    """The innermost lane, warp or thread condition that left some threads out, or the
    loop with a per-thread trip count around it (see `arrivers.py`): `count` is what the
    threads it admits make."""
    who: str = ""
    """Who arrives under `guard`, in words."""


@dataclass(frozen=True, slots=True)
class Copy:
    """An async copy that signals its bytes on a raw mbarrier or a pipeline stage."""

    bar: BarKey | None
    nbytes: int
    pipeline: str | None = None
    stage: int = -1
    round: int = -1


@dataclass(frozen=True, slots=True)
class Wait:
    bar: BarKey
    parity: int
    phase: int
    """The phase this wait is meant for: its agent's n-th wait on the barrier waits for
    phase n, or n - 1 when the first wait uses parity 1 (a barrier that starts free)."""


@dataclass(frozen=True, slots=True)
class BarrierSync:
    """syncthreads() (id 0, all warps) or a named barrier; `wait` False for barrier_arrive."""

    id: int
    warps: int
    wait: bool


@dataclass(frozen=True, slots=True)
class GroupWait:
    group: str
    done: int
    """How many of the agent's groups are complete after the wait."""


Sync = PipeSync | Arrive | Copy | Wait | BarrierSync | GroupWait


@dataclass(slots=True)
class Event:
    op: Op
    accesses: list[Access] = field(default_factory=list)
    sync: Sync | None = None
    fence_proxy: bool = False
    where: tuple[tuple[str, int], ...] = ()
    """Loop indices when the event happened, for messages."""

    @property
    def blocks(self) -> bool:
        s = self.sync
        return (isinstance(s, Wait) or (isinstance(s, PipeSync) and s.action in ("acquire", "wait"))
                or (isinstance(s, BarrierSync) and s.wait))
