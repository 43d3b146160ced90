"""Lanes: which threads of a process run the code at hand.

A process stands for one or more warps of a role and runs the role's code once for all
their threads.  That is exact while the threads agree; a condition on a thread's own
index (`lane.id`, `thread.id`, and `warp.rank` in `elect_one()`'s test) is where they
may not.  Such a condition is evaluated for every thread of the process: when the
threads disagree, the process runs the `then` branch with the threads that took it and
then the `else` branch with the others, as a warp runs a divergent branch, and it does
so without splitting the role into warp-by-warp processes (which would have each warp
perform the role's collective ops on its own).  `Proc.lanes` holds the active threads
(None: all of them).

What the threads of a branch do counts for those threads only:

- an elected op (a TMA copy, a bulk store, an elected arrival, `expect_tx`) is issued by
  the role's thread 0 (the lowering's `leader`), so it runs only when that thread is
  active: `if lane.id == 5: tma_load(...)` issues nothing, as on the GPU;
- arrivals made per thread or per warp count the active threads or the warps with an
  active lane (`if lane.id == 0: bar.arrive(per="thread")` is one arrival per warp);
- `fence_proxy_async()` covers only the writes of its active threads, and a collective
  write is spread over every thread of the process, so a fence by some of them leaves
  it unfenced.

A loop whose bounds depend on the thread's index runs every iteration some thread needs,
each with the threads whose range holds it.  A thread index used as data (`buf[lane.id]`)
takes the value of the first active thread (reported as a CK510 note).
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import TypeVar

import numpy as np

from cake_core.sim.state import Proc

WARP = 32
THREAD_VARS = ("lane.id", "thread.id", "warp.id", "warp.rank", "warpgroup.id",
               "warpgroup.rank")
"""The index variables that differ between the threads of one process."""
LANE_DEPENDENT = frozenset({"lane.id", "thread.id"})
"""A condition on one of these can split the threads of a warp."""

T = TypeVar("T")


def active(proc: Proc) -> np.ndarray:
    """The active threads of `proc`, shape (warps, 32)."""
    if proc.lanes is not None:
        return proc.lanes
    return np.ones((len(proc.warps), WARP), dtype=bool)


def thread_env(proc: Proc, role_start: int, w: int, lane: int) -> dict[str, int]:
    """The index variables of thread `lane` of the process's `w`-th warp."""
    warp = proc.warps[w]
    return {"lane.id": lane, "thread.id": warp * WARP + lane, "warp.id": warp,
            "warp.rank": warp - role_start, "warpgroup.id": warp // 4,
            "warpgroup.rank": (warp - role_start) // 4}


def per_thread(proc: Proc, role_start: int, fn: Callable[[], bool]) -> np.ndarray:
    """`fn()` evaluated for each active thread, with the index variables set to that
    thread's (False for the inactive ones)."""
    out = np.zeros((len(proc.warps), WARP), dtype=bool)
    for (w, lane), v in per_thread_values(proc, role_start, fn).items():
        out[w, lane] = v
    return out


def per_thread_values(proc: Proc, role_start: int, fn: Callable[[], T]
                      ) -> dict[tuple[int, int], T]:
    """`fn()` for each active thread (warp position, lane), with that thread's indices."""
    env = proc.env
    saved = {k: env.get(k) for k in THREAD_VARS}
    out: dict[tuple[int, int], T] = {}
    try:
        for w, lane in np.argwhere(active(proc)):
            env.update(thread_env(proc, role_start, int(w), int(lane)))
            out[int(w), int(lane)] = fn()
    finally:
        env.update(saved)
    return out


def run_with(proc: Proc, role_start: int, lanes: np.ndarray,
             body: Generator[T, None, None]) -> Generator[T, None, None]:
    """Run `body` with only `lanes` active; the index variables read as data are the
    first active thread's."""
    saved_lanes = proc.lanes
    env = proc.env
    saved = {k: env.get(k) for k in THREAD_VARS}
    proc.lanes = None if lanes.all() else lanes
    w, lane = (int(x) for x in np.argwhere(lanes)[0])
    env.update(thread_env(proc, role_start, w, lane))
    try:
        yield from body
    finally:
        proc.lanes = saved_lanes
        env.update(saved)


def holds_thread0(proc: Proc) -> bool:
    """Whether the process's first thread is active (the role's thread 0 when the process
    is the role's first)."""
    return proc.lanes is None or bool(proc.lanes[0, 0])


def arrivals(proc: Proc, scope: str) -> int:
    """How many arrivals one per-thread or per-warp arrival op of the process makes."""
    if proc.lanes is None:
        return len(proc.warps) * (WARP if scope == "thread" else 1)
    if scope == "thread":
        return int(proc.lanes.sum())
    return int(proc.lanes.any(axis=1).sum())


def covers(fence: np.ndarray | None, writers: np.ndarray | None) -> bool:
    """Whether a fence by the threads `fence` covers a write by the threads `writers`
    (None: every thread of the process)."""
    if fence is None:
        return True
    if writers is None:
        return False
    return not bool((writers & ~fence).any())
