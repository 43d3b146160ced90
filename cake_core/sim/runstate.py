"""The state one simulated launch shares: findings, each block's memory and barriers.

`SimRun` spans every block of a launch under one schedule; `BlockState` is one block:
its shared memory (bytes and an initialisation bitmap), the barriers and pipelines its
roles created, its processes and the asynchronous work in flight.  `Findings` keeps one
diagnostic per distinct bug however many blocks hit it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from cake_core.diagnostics.model import Diagnostic, sort_diagnostics
from cake_core.sim.races import RaceLog
from cake_core.sim.state import AsyncOp, GlobalTensor, GroupBarrier, Proc

if TYPE_CHECKING:
    from cake_core.sim.program import SimKernel

#: The SM count (`sm_count()`) a simulated launch sees unless it gives `sm_count=`: small
#: and fixed, so runs are deterministic and a persistent kernel's tile loop runs more than
#: once per block on the simulator's small shapes (a count of 1 would leave no second block
#: to interleave with).
SIM_SM_COUNT = 2


class Findings:
    """Diagnostics of a run, one per distinct bug (by code and the places involved)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._diags: dict[tuple[object, ...], Diagnostic] = {}
        self.counts: dict[tuple[object, ...], int] = {}

    def add(self, d: Diagnostic, key: tuple[object, ...] | None = None) -> None:
        k = key or (d.code, d.span.start.offset, d.span.end.offset,
                    tuple((r.span.start.offset, r.span.end.offset) for r in d.related))
        self.counts[k] = self.counts.get(k, 0) + 1
        if k not in self._diags:
            self._diags[k] = d.with_path(self.path)

    def diagnostics(self) -> list[Diagnostic]:
        return sort_diagnostics(list(self._diags.values()))


@dataclass(eq=False)
class BlockState:
    """One block's shared state: its shared memory, barriers, pipelines and copies."""

    coords: tuple[int, int, int]
    linear: int
    smem: np.ndarray
    init: np.ndarray
    warps: int
    races: RaceLog = field(default_factory=RaceLog)
    objects: dict[str, object] = field(default_factory=dict)
    procs: list[Proc] = field(default_factory=list)
    async_ops: list[AsyncOp] = field(default_factory=list)
    bars: dict[int, GroupBarrier] = field(default_factory=dict)
    comps: dict[tuple[object, ...], int] = field(default_factory=dict)
    counters: dict[int, int] = field(default_factory=dict)
    faulted: bool = False
    issued: int = 0

    def component(self, key: tuple[object, ...]) -> int:
        c = self.comps.get(key)
        if c is None:
            c = self.comps[key] = len(self.comps) + 1
        return c

    def group_barrier(self, bid: int, need: int) -> GroupBarrier:
        b = self.bars.get(bid)
        if b is None:
            b = self.bars[bid] = GroupBarrier(bid, need)
        return b

    def describe(self) -> str:
        x, y, z = self.coords
        return f"block ({x}, {y}, {z})"


@dataclass(eq=False)
class SimRun:
    """State shared by every block of one simulated launch under one schedule."""

    sk: SimKernel
    dims: dict[str, int]
    tensors: dict[str, GlobalTensor]
    scalars: dict[str, np.ndarray | float]
    findings: Findings
    schedule_name: str
    steps: int = 0
    ops: int = 0
    async_ops: int = 0
