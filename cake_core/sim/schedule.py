"""Schedulers: who runs next, and when an asynchronous copy or wgmma group completes.

At each step the engine offers the runnable processes and the pending asynchronous
operations that may complete next (any copy; the oldest wgmma group of a warpgroup); the
schedule picks one.  Different schedules expose different bugs: round-robin is the
friendly order (oldest first, at the first chance), adversarial completes copies as late
as possible (only when every process is blocked, only what a blocked wait needs, newest
first) and starves one role, random explores everything in between, reproducibly by
seed.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from cake_core.sim.state import AsyncOp, Proc


class Schedule:
    name = "schedule"

    def reset(self, procs: Sequence[Proc]) -> None:
        """Called at the start of every block."""

    def pick(self, runnable: Sequence[Proc], heads: Sequence[AsyncOp]) -> Proc | AsyncOp:
        raise NotImplementedError


class RoundRobin(Schedule):
    """Copies complete at the first chance; processes take turns, one step each."""

    name = "round-robin"

    def __init__(self) -> None:
        self._last = -1

    def reset(self, procs: Sequence[Proc]) -> None:
        self._last = -1

    def pick(self, runnable: Sequence[Proc], heads: Sequence[AsyncOp]) -> Proc | AsyncOp:
        if heads:
            return heads[0]
        nxt = [p for p in runnable if p.index > self._last]
        p = nxt[0] if nxt else runnable[0]
        self._last = p.index
        return p


class Adversarial(Schedule):
    """Late, out-of-order completion and a starved role.

    Asynchronous work completes only when no process can move, one operation at a time:
    among the operations some blocked wait needs, the newest first (so the copies of a
    group, and the loads one mbarrier counts, land in reverse order); an operation nobody
    waits for completes only when nothing else can.  The processes of the starved role
    run only when nobody else can.  A missing or too shallow wait then reads stale or
    unwritten data, and a producer runs as far ahead of its consumer as the
    synchronisation allows.
    """

    def __init__(self, starve: str | None = None) -> None:
        self.starve = starve
        self.name = "adversarial" + (f" (starving role '{starve}')" if starve else "")
        self._rr = RoundRobin()
        self._procs: Sequence[Proc] = ()

    def reset(self, procs: Sequence[Proc]) -> None:
        self._rr.reset(procs)
        self._procs = procs

    def pick(self, runnable: Sequence[Proc], heads: Sequence[AsyncOp]) -> Proc | AsyncOp:
        fed = [p for p in runnable if p.role != self.starve]
        if fed:
            return self._rr.pick(fed, ())
        if runnable:
            return self._rr.pick(runnable, ())
        needed: set[int] = set()
        for p in self._procs:
            if not p.done and p.blocked is not None and p.blocked.needs is not None:
                needed.update(id(a) for a in p.blocked.needs())
        wanted = [a for a in heads if id(a) in needed]
        return (wanted or list(heads))[-1]


class Seeded(Schedule):
    """Uniformly random among runnable processes and pending completions."""

    def __init__(self, seed: int) -> None:
        self.seed = seed
        self.name = f"random (seed {seed})"
        self._rng = random.Random(seed)

    def reset(self, procs: Sequence[Proc]) -> None:
        self._rng = random.Random(self.seed)

    def pick(self, runnable: Sequence[Proc], heads: Sequence[AsyncOp]) -> Proc | AsyncOp:
        options: list[Proc | AsyncOp] = [*runnable, *heads]
        return options[self._rng.randrange(len(options))]


def schedules(n: int, seed: int = 0, roles: Sequence[str] = ()) -> list[Schedule]:
    """The first `n` schedules explored: round-robin, adversarial, then seeded random.

    The adversarial schedule starves the last declared role (usually the consumer, so the
    producer runs as far ahead as the ring allows)."""
    out: list[Schedule] = []
    for i in range(max(n, 1)):
        if i == 0:
            out.append(RoundRobin())
        elif i == 1:
            out.append(Adversarial(roles[-1] if len(roles) > 1 else None))
        else:
            out.append(Seeded(seed + i - 2))
    return out


def by_name(name: str, seed: int = 0, roles: Sequence[str] = ()) -> Schedule:
    if name in ("round-robin", "round_robin", "rr"):
        return RoundRobin()
    if name == "adversarial":
        return Adversarial(roles[-1] if len(roles) > 1 else None)
    if name in ("random", "seeded"):
        return Seeded(seed)
    raise ValueError(f"unknown schedule {name!r} (round-robin, adversarial, random)")
