"""All agents run together on their unrolled programs (CK311, CK312, CK308, CK306, CK309,
CK319, CK320).

A bounded symbolic execution: every agent runs its events in order until it blocks, then
the next agent runs, until nobody can move.  Blocking follows the hardware: a pipeline
stage is full when its producer committed it and empty when every consumer released it;
a raw mbarrier completes a phase when its arrivals reach its count and its transaction
bytes are all delivered, and `wait(p)` returns once the current phase's parity is not
`p`; `syncthreads()` needs every warp of the block and a named barrier its warp count.
When agents are still blocked at the end, they deadlock: one finding per group of agents
waiting on each other, at the wait that blocked last (the one that closed the cycle).

Alongside, vector clocks record what each agent has observed of the others, and each
shared-memory access is checked against earlier conflicting ones: an access that does
not happen after another one it conflicts with is a race.  An async access (TMA copy,
wgmma read, bulk store) only counts as done once its completion was observed: a barrier
phase the bytes landed in, or a group wait.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from cake_core.diagnostics import codes
from cake_core.diagnostics.model import Diagnostic, Related
from cake_core.ir.kernel import Op
from cake_core.verify.drift import runaway_finding
from cake_core.verify.effects import ASYNC_PROXY
from cake_core.verify.events import (
    Access,
    Arrive,
    BarKey,
    BarrierSync,
    Copy,
    Event,
    GroupWait,
    PipeSync,
    Wait,
)
from cake_core.verify.facts import KernelFacts
from cake_core.verify.local import AgentRun

Clock = dict[object, int]


def _join(into: Clock, other: Clock) -> None:
    for k, v in other.items():
        if into.get(k, 0) < v:
            into[k] = v


@dataclass(slots=True)
class _Bar:
    count: int
    completed: int = 0
    arrivals: int = 0
    tx: int = 0
    pending: Clock = field(default_factory=dict)
    done: Clock = field(default_factory=dict)


@dataclass(slots=True)
class _Named:
    generation: int = 0
    warps: int = 0
    arrived: set[int] = field(default_factory=set)
    pending: Clock = field(default_factory=dict)
    done: dict[int, Clock] = field(default_factory=dict)
    ops: list[tuple[int, Op]] = field(default_factory=list)  # the open generation's arrivals
    need: int = 0  # the count its first arrival named
    waiters: int = 0  # the open generation's `barrier_sync`s


@dataclass(slots=True)
class _Record:
    agent: int
    access: Access
    op: Op
    key: object
    value: int
    fenced: bool = True


_NOT_RACES = {codes.PARITY_DRIFT.code, codes.NAMED_ARRIVE_ALONE.code,
              codes.NAMED_BARRIER_COUNT.code}


class Engine:
    def __init__(self, facts: KernelFacts, runs: list[AgentRun]) -> None:
        self.facts = facts
        self.agents = facts.agents
        self.events = [r.events for r in runs]
        self.pos = [0] * len(runs)
        self.clock: list[Clock] = [{i: 1} for i in range(len(runs))]
        self.bars: dict[BarKey, _Bar] = {}
        self.full: dict[tuple[str, int], tuple[int, Clock]] = {}
        self.empty: dict[tuple[str, int], tuple[int, Clock]] = {}
        self.released: dict[tuple[str, int, int], tuple[set[str], Clock]] = {}
        self.named: dict[int, _Named] = {}
        self.waiting: dict[int, tuple[int, int]] = {}
        self.records: dict[str, list[_Record]] = {}
        self.unfenced: list[list[_Record]] = [[] for _ in runs]
        self.blocked_at: dict[int, int] = {}
        self.tick = 0
        self.diagnostics: list[Diagnostic] = []
        self.stopped = False
        self._seen: set[object] = set()

    # -- the schedule -----------------------------------------------------------------------------
    def run(self) -> list[Diagnostic]:
        """Always advance the first agent (in declaration order) that can move, one event
        at a time: producers, declared first, run as far ahead as their consumers let them,
        which is the schedule that exposes a consumer reading too early."""
        n = len(self.agents)
        while not self.stopped:
            for i in range(n):
                if self.pos[i] >= len(self.events[i]):
                    continue
                if self.step(i, self.events[i][self.pos[i]]):
                    self.blocked_at.pop(i, None)
                    self.pos[i] += 1
                    break
                if i not in self.blocked_at:
                    self.tick += 1
                    self.blocked_at[i] = self.tick
            else:
                break
        races = [d for d in self.diagnostics if d.code not in _NOT_RACES]
        if races:  # a race comes first in the run; what hangs after it is its consequence
            return races
        if not self.stopped:
            self.deadlocks()
        return self.diagnostics

    def step(self, i: int, ev: Event) -> bool:
        s = ev.sync
        if not self.may_pass(i, ev):
            return False
        for a in ev.accesses:
            self.access(i, ev, a)
        if ev.fence_proxy:
            for r in self.unfenced[i]:
                r.fenced = True
            self.unfenced[i].clear()
        if isinstance(s, PipeSync) and s.action in ("commit", "release"):
            self.pipe_send(i, s)
        elif isinstance(s, Arrive):
            bar = self.bar(s.bar)
            if bar is not None:
                bar.arrivals += s.count
                bar.tx += s.expect_bytes or 0
                _join(bar.pending, self.clock[i])
                self.clock[i][i] += 1
                self.complete(s.bar, bar)
        elif isinstance(s, Copy) and s.bar is not None:
            bar = self.bar(s.bar)
            if bar is not None:
                bar.tx -= s.nbytes
                self.complete(s.bar, bar)
        elif isinstance(s, GroupWait):
            self.clock[i][(i, s.group)] = s.done
        return True

    # -- blocking --
    def may_pass(self, i: int, ev: Event) -> bool:
        s = ev.sync
        if isinstance(s, PipeSync) and s.action == "acquire":
            if s.round == 0:
                return True
            done, clk = self.empty.get((s.pipeline, s.stage), (0, {}))
            if done < s.round:
                return False
            _join(self.clock[i], clk)
        elif isinstance(s, PipeSync) and s.action == "wait":
            done, clk = self.full.get((s.pipeline, s.stage), (0, {}))
            if done < s.round + 1:
                return False
            _join(self.clock[i], clk)
        elif isinstance(s, Wait):
            bar = self.bar(s.bar)
            if bar is None:
                return True
            if bar.completed > s.phase + 1:
                self.diagnostics.append(runaway_finding(self.facts, ev.op, s.bar, bar.completed,
                                                        s.phase))
                self.stopped = True
                return False
            if bar.completed % 2 == s.parity:
                return False
            _join(self.clock[i], bar.done)
        elif isinstance(s, BarrierSync):
            return self.barrier(i, s, ev.op)
        return True

    def barrier(self, i: int, s: BarrierSync, op: Op) -> bool:
        nb = self.named.setdefault(s.id, _Named())
        if i in self.waiting:
            gen = self.waiting[i][1]
            if nb.generation <= gen:
                return False
            del self.waiting[i]
            _join(self.clock[i], nb.done[gen])
            return True
        gen = nb.generation
        if nb.ops and nb.need != s.warps:
            self.count_mismatch(i, s, op, nb)
        elif not nb.ops:
            nb.need = s.warps
        nb.warps += self.agents[i].warps
        nb.arrived.add(i)
        nb.ops.append((i, op))
        nb.waiters += s.wait
        _join(nb.pending, self.clock[i])
        self.clock[i][i] += 1
        if nb.warps >= s.warps:
            if nb.waiters == 0:
                self.arrival_alone(i, s, op, len(nb.ops))
            nb.done[gen] = dict(nb.pending)
            nb.generation += 1
            nb.warps, nb.arrived, nb.pending, nb.ops, nb.waiters = 0, set(), {}, [], 0
        if not s.wait:
            return True
        if nb.generation > gen:
            _join(self.clock[i], nb.done[gen])
            return True
        self.waiting[i] = (s.id, gen)
        return False

    # -- signalling --
    def bar(self, key: BarKey) -> _Bar | None:
        b = self.bars.get(key)
        if b is None:
            decl = self.facts.barriers.get(key[0])
            if decl is None or key[1] is None:
                return None
            b = self.bars[key] = _Bar(decl[0].count)
        return b

    def complete(self, key: BarKey, bar: _Bar) -> None:
        while bar.arrivals >= bar.count and bar.tx == 0:
            bar.arrivals -= bar.count
            _join(bar.done, bar.pending)
            bar.pending = {}
            bar.completed += 1
            bar.done[("bar", key)] = bar.completed

    def pipe_send(self, i: int, s: PipeSync) -> None:
        key = (s.pipeline, s.stage)
        clk = dict(self.clock[i])
        self.clock[i][i] += 1
        if s.action == "commit":
            done, total = self.full.get(key, (0, {}))
            _join(total, clk)
            total[("full", s.pipeline, s.stage)] = s.round + 1
            self.full[key] = (max(done, s.round + 1), total)
            return
        names, acc = self.released.setdefault((s.pipeline, s.stage, s.round), (set(), {}))
        names.add(self.agents[i].name)
        _join(acc, clk)
        if names >= set(self.facts.pipelines[s.pipeline].consumers):
            done, total = self.empty.get(key, (0, {}))
            _join(total, acc)
            self.empty[key] = (max(done, s.round + 1), total)

    # -- races --
    def access(self, i: int, ev: Event, a: Access) -> None:
        key, value = self.completion(i, ev, a)
        clk = self.clock[i]
        proxy_read = not a.write and a.async_group in ASYNC_PROXY
        for r in self.records.setdefault(a.region.buffer, []):
            if not (r.access.write or a.write) or not r.access.region.overlaps(a.region):
                continue
            if r.agent == i and (r.access.async_group != "tma" or a.write):
                continue  # the agent's own order: checked in local.py
            if clk.get(r.key, 0) >= r.value:
                if proxy_read and r.access.write and not r.fenced and r.agent != i:
                    self.unfenced_read(i, ev, a, r)
                continue
            self.race(i, ev, a, r)
        rec = _Record(i, a, ev.op, key, value,
                      fenced=not a.write or a.async_group not in (None, "cp_async"))
        self.records[a.region.buffer].append(rec)
        if not rec.fenced:
            self.unfenced[i].append(rec)

    def completion(self, i: int, ev: Event, a: Access) -> tuple[object, int]:
        """The clock entry that tells an observer this access is over."""
        g = a.async_group
        if g is None:
            return i, self.clock[i][i]
        if g == "tma":
            s = ev.sync
            if isinstance(s, Copy) and s.bar is not None:
                bar = self.bar(s.bar)
                return ("bar", s.bar), (bar.completed + 1 if bar is not None else 0)
            if isinstance(s, Copy) and s.pipeline is not None:
                return ("full", s.pipeline, s.stage), s.round + 1
            return i, self.clock[i][i]
        return (i, g), a.seq

    def race(self, i: int, ev: Event, a: Access, r: _Record) -> None:
        epoch = self.clock[i][i]
        keys = [("pair", id(ev.op), id(r.op)), ("gap", i, r.agent, epoch),
                ("agents", frozenset((i, r.agent)))]
        if any(k in self._seen for k in keys):
            return
        self._seen.update(keys)
        me, other = self.agents[i].label, self.agents[r.agent].label
        line = r.op.span.start.line + 1
        verb = "writes" if a.write else "reads"
        region = a.region.describe()
        if r.access.async_group == "wgmma":
            self.diagnostics.append(codes.WGMMA_NOT_WAITED.at(
                a.span, f"{me} {verb} {region} while the wgmma of {other} (line {line}) may still "
                "be reading it: that role hands the data back before `wgmma_wait` covers the "
                "wgmma", related=[Related(r.op.span, "the wgmma still in flight")]))
            return
        if r.access.async_group == "tma":
            what = f"the TMA copy into it (line {line}, {other}) may still be in flight"
        elif r.access.async_group == "bulk_store":
            what = f"the tma_store of {other} (line {line}) may still be reading it"
        else:
            theirs = "write" if r.access.write else "read"
            what = f"{other} may still {theirs} it (line {line})"
        self.diagnostics.append(codes.SMEM_RACE.at(
            a.span, f"{me} {verb} {region} while {what}: no barrier, pipeline or mbarrier wait "
            "orders the two", related=[Related(r.op.span, f"the conflicting access by {other}")]))

    def unfenced_read(self, i: int, ev: Event, a: Access, r: _Record) -> None:
        key = ("fence", id(ev.op), id(r.op))
        if key in self._seen:
            return
        self._seen.add(key)
        other = self.agents[r.agent].label
        self.diagnostics.append(codes.MISSING_PROXY_FENCE.at(
            ev.op.span, f"`{ev.op.prim.name}` reads {a.region.describe()} through the async "
            f"proxy, but {other} wrote it with generic stores (line {r.op.span.start.line + 1}) "
            "and did not call `fence_proxy_async()` before handing it over",
            related=[Related(r.op.span, "the unfenced write")]))

    # -- named barriers that order nothing (CK320) or are left open (CK319) --
    def arrival_alone(self, i: int, s: BarrierSync, op: Op, arrivals: int) -> None:
        """A generation of a named barrier completed by `barrier_arrive`s only: nobody was
        waiting in it, so the arrivals order nothing.  One arrival: its own warps reach the
        count (the count leaves out the waiting side).  Several: arrivals of successive
        turns add up to the count, because the `barrier_sync` meant to meet them is missing
        or counted elsewhere."""
        if ("alone", id(op)) in self._seen:
            return
        self._seen.add(("alone", id(op)))
        a = self.agents[i]
        if arrivals == 1:
            self.diagnostics.append(codes.NAMED_ARRIVE_ALONE.at(
                op.span, f"`barrier_arrive({s.id}, {s.warps})` by {a.label} ({a.warps} warps) "
                f"completes named barrier {s.id} on its own: no warp can be waiting in it, "
                "so the arrival orders nothing",
                notes=[f"count both sides: the {a.warps} arriving warps plus the warps that "
                       f"`barrier_sync({s.id}, ...)` waits with"]))
            return
        self.diagnostics.append(codes.NAMED_ARRIVE_ALONE.at(
            op.span, f"named barrier {s.id} completes with {arrivals} `barrier_arrive`s and "
            f"no `barrier_sync`: this arrival by {a.label} and the earlier ones add up to "
            f"its {s.warps} warps while nobody waits, so they order nothing",
            notes=[f"the side that should wait needs `barrier_sync({s.id}, {s.warps})` "
                   "between the arrivals it is meant to follow"]))

    def count_mismatch(self, i: int, s: BarrierSync, op: Op, nb: _Named) -> None:
        """Arrivals of one generation that disagree on the barrier's warp count: the
        hardware's behaviour is undefined, and which count completes the generation
        depends on who arrives last."""
        j, first = next(((j, o) for j, o in nb.ops if o is not op), (i, op))
        key = ("count", id(first), id(op))
        if key in self._seen:
            return
        self._seen.add(key)
        self.diagnostics.append(codes.NAMED_BARRIER_COUNT.at(
            op.span, f"named barrier {s.id} is counted as {s.warps} warps here by "
            f"{self.agents[i].label} but as {nb.need} warps by {self.agents[j].label}",
            related=[Related(first.span, f"counted as {nb.need} warps here")],
            notes=["every arrival and sync of one generation must name the same count: the "
                   "warps of all the sides that meet there"]))

    # -- deadlocks --
    def deadlocks(self) -> None:
        """One finding per group of agents stuck on each other (a sink of the wait-for graph).

        Agents that only wait on such a group are its victims, not members: they are
        named in a note, not reported again.
        """
        n = len(self.agents)
        blocked = [i for i in range(n) if self.pos[i] < len(self.events[i])]
        edges = {i: [j for j in self.waits_for(i) if j in blocked] for i in blocked}
        for group in _sink_groups(blocked, edges):
            closer = self.closing(group)
            finished = sorted({j for i in group for j in self.waits_for(i) if j not in blocked})
            victims = [i for i in blocked if i not in group and
                       any(j in group for j in edges[i])]
            self.report(closer, [closer, *sorted(set(group) - {closer}), *finished], victims)

    def closing(self, group: list[int]) -> int:
        """The member whose wait closes the cycle: data flows from writers to readers, so a
        writer waiting on a reader of its data is the back edge.  Otherwise the member
        that blocked last."""
        if len(group) > 1:
            writes = {i: {a.region.buffer for e in self.events[i] for a in e.accesses
                          if a.write} for i in group}
            reads = {i: {a.region.buffer for e in self.events[i] for a in e.accesses
                         if not a.write} for i in group}
            feeds = {i: sum(1 for j in group if j != i and writes[i] & reads[j])
                     for i in group}
            best = max(feeds.values())
            if best > 0:
                group = [i for i in group if feeds[i] == best]
        return max(group, key=lambda i: self.blocked_at.get(i, 0))

    def waits_for(self, i: int) -> list[int]:
        ev = self.events[i][self.pos[i]]
        s = ev.sync
        n = len(self.agents)
        if isinstance(s, PipeSync):
            pipe = self.facts.pipelines[s.pipeline]
            if s.action == "wait":
                return [a.index for a in self.agents if a.name == pipe.producer]
            names = self.released.get((s.pipeline, s.stage, s.round - 1), (set(), {}))[0]
            return [a.index for a in self.agents if a.name in pipe.consumers
                    and a.name not in names]
        if isinstance(s, Wait):
            later = [j for j in range(n) if self._signals(j, s.bar, self.pos[j])]
            return later or [j for j in range(n) if self._signals(j, s.bar, 0)]
        if isinstance(s, BarrierSync):
            nb = self.named.get(s.id, _Named())
            users = range(n) if s.id == 0 else [
                j for j in range(n)
                if any(isinstance(e.sync, BarrierSync) and e.sync.id == s.id
                       for e in self.events[j])]
            return [j for j in users if j not in nb.arrived and j != i]
        return []

    def _signals(self, j: int, bar: BarKey, start: int) -> bool:
        return any(isinstance(e.sync, Arrive | Copy) and e.sync.bar == bar
                   for e in self.events[j][start:])

    def report(self, closer: int, members: list[int], victims: list[int]) -> None:
        parts: list[str] = []
        related: list[Related] = []
        for i in members:
            a = self.agents[i]
            if self.pos[i] >= len(self.events[i]):
                parts.append(f"{a.label} has already finished")
                if a.role is not None:
                    related.append(Related(a.role.name_span, f"{a.label} ends without reaching "
                                           "what the others wait for"))
                continue
            ev = self.events[i][self.pos[i]]
            targets = [self.agents[j].label for j in self.waits_for(i) if j != i]
            tail = f" for {_join_names(targets)}" if targets else \
                " for a signal no other role sends"
            where = "".join(f", {k} = {v}" for k, v in ev.where)
            parts.append(f"{a.label} waits at `{self.facts.text(ev.op.span)}` "
                         f"(line {ev.op.span.start.line + 1}{where}){tail}")
            if i != closer:
                related.append(Related(ev.op.span, f"{a.label} blocks here{tail}"))
        ev = self.events[closer][self.pos[closer]]
        notes = ["found by running all roles together with the loops unrolled "
                 f"({_sizes(self.facts)})"]
        if victims:
            names = _join_names([self.agents[v].label for v in victims])
            notes.append(f"{names} {'is' if len(victims) == 1 else 'are'} blocked as well, "
                         "waiting on them")
        self.diagnostics.append(codes.DEADLOCK.at(
            ev.op.span, "deadlock: " + "; ".join(parts), related=related, notes=notes))


def _sink_groups(nodes: list[int], edges: dict[int, list[int]]) -> list[list[int]]:
    """Strongly connected components of the wait-for graph that wait on no other one."""
    tarjan = _Tarjan(edges)
    for v in nodes:
        if v not in tarjan.index:
            tarjan.visit(v)
    comps = tarjan.comps
    of = {v: i for i, c in enumerate(comps) for v in c}
    return [c for i, c in enumerate(comps)
            if all(of[w] == i for v in c for w in edges[v])]


class _Tarjan:
    """Tarjan's components, recursively (the graphs have a handful of nodes).  A class, not
    a closure: a recursive nested function is a reference cycle, left for the collector
    on every check."""

    def __init__(self, edges: dict[int, list[int]]) -> None:
        self.edges = edges
        self.index: dict[int, int] = {}
        self.low: dict[int, int] = {}
        self.stack: list[int] = []
        self.on: set[int] = set()
        self.comps: list[list[int]] = []

    def visit(self, v: int) -> None:
        index, low = self.index, self.low
        index[v] = low[v] = len(index)
        self.stack.append(v)
        self.on.add(v)
        for w in self.edges[v]:
            if w not in index:
                self.visit(w)
                low[v] = min(low[v], low[w])
            elif w in self.on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = self.stack.pop()
                self.on.discard(w)
                comp.append(w)
                if w == v:
                    break
            self.comps.append(comp)


def _join_names(names: list[str]) -> str:
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def _sizes(facts: KernelFacts) -> str:
    dims = [f"{k[1:]} = {v}" for k, v in sorted(facts.sizes.items()) if k.startswith("$")]
    return ", ".join(dims) if dims else "all sizes are constants"


def run(facts: KernelFacts, runs: list[AgentRun]) -> list[Diagnostic]:
    return Engine(facts, runs).run()
