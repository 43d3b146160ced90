"""Who runs an arrival: the threads of an agent that a lane, warp or thread guard admits.

`bar.arrive(per=...)` says who arrives when the whole role reaches it.  Under a run-time
`if` on `lane.id`, `thread.id`, `warp.id` or `warp.rank` only some threads get there, and
the lowering emits the arrival inside that `if`, so the count follows the guard:

- `per="thread"`: every thread the guard admits arrives (`if lane.id == 0` is one
  arrival per warp; `if warp.rank == 0` the 32 threads of one warp; `if thread.id == T`
  one thread, or none when thread T is not in the role);
- `per="warp"`: each warp the guard admits arrives once.  The lowering meets the warp's
  lanes first (`__syncwarp()`) and arrives from lane 0, so the guard must keep whole
  warps: one that splits a warp's lanes is CK314 (`divergence.py`), and the count here
  takes the warps it admits at all, which is what the author meant;
- `per="role"` (and `expect_tx`): the role's thread 0 arrives, the lowering's `leader`
  (the thread `elect_one()` runs), so the arrival happens only when the guard admits that
  thread (`if lane.id == 5: bar.arrive()` never arrives).

The guards are decided thread by thread with the loop indices of the walk, so any
condition on the thread indices and loop counters is counted exactly.  What cannot be
decided is said, never guessed: a comparison between a thread index and a launch size or
a scalar read from memory (`lane.id < n`), or a loop whose bounds depend on the thread.
"""

from __future__ import annotations

from dataclasses import dataclass

from cake_core.diagnostics import codes
from cake_core.diagnostics.model import Diagnostic, Related
from cake_core.ir.kernel import ForOp, IfOp, Kernel, Op, Value, walk_nodes
from cake_core.ir.symbolic import Dim, Var
from cake_core.ir.values import Predicate
from cake_core.source import Span
from cake_core.verify.unroll import THREAD_VARS, Agent, Env, atoms, evaluate, truth

WARP = 32


@dataclass(frozen=True, slots=True)
class Counted:
    """The arrivals one run of an arrival op makes, and how the guards shaped them."""

    n: int | None
    """None when the guards cannot be decided (see `unknown`)."""
    guard: IfOp | ForOp | None = None
    """The innermost guard that left some of the agent's threads out, or else the loop
    with a per-thread trip count that repeats the arrival, if any."""
    who: str = ""
    """Who arrives, in words, when a guard narrowed it (for messages)."""
    unknown: str | None = None
    """Why the number of arrivals cannot be known before launch."""
    at: Span | None = None
    """The condition or loop that makes it unknown."""
    warps_out: int = 0
    """Warps of the agent none of whose threads arrive (per-thread and per-warp arrivals):
    their work is not ordered before the phase (CK313)."""


def threads_of(kernel: Kernel, agent: Agent) -> list[Env]:
    """The index variables of each thread of `agent`, in thread order."""
    if agent.role is not None:
        warps = range(agent.role.warp_start, agent.role.warp_stop)
        start = agent.role.warp_start
    else:
        taken = {w for r in kernel.roles.values() for w in range(r.warp_start, r.warp_stop)}
        warps = range(kernel.warps) if not taken else \
            [w for w in range(kernel.warps) if w not in taken]  # type: ignore[assignment]
        start = 0
    return [{"lane.id": lane, "thread.id": w * WARP + lane, "warp.id": w,
             "warp.rank": w - start, "warpgroup.id": w // 4,
             "warpgroup.rank": (w - start) // 4}
            for w in warps for lane in range(WARP)]


def _undecidable(cond: Value) -> str | None:
    """The first comparison that sets a thread index against something unknown before
    launch (a dim or a scalar parameter), as `lane.id < n`."""
    stack: list[object] = [cond]
    while stack:
        x = stack.pop()
        if isinstance(x, Value) and isinstance(x.const, Predicate):
            p = x.const
            if p.op != "compare":
                stack.extend(p.conditions)
                continue
            names = atoms(x)
            if names & THREAD_VARS and any(n.startswith("$") or n == "<scalar>"
                                           for n in names):
                return ", ".join(sorted(n.lstrip("$") for n in names
                                        if n.startswith("$") or n == "<scalar>"))
    return None


class Arrivers:
    """Counts the arrivals of arrival ops under their guards, for one agent."""

    def __init__(self, kernel: Kernel, agent: Agent) -> None:
        self.kernel = kernel
        self.agent = agent
        self._threads: list[Env] | None = None
        self._cache: dict[object, tuple[list[bool], IfOp | None] | Counted] = {}

    @property
    def threads(self) -> list[Env]:
        if self._threads is None:
            self._threads = threads_of(self.kernel, self.agent)
        return self._threads

    def count(self, scope: str, count: int, guards: list[tuple[IfOp, bool]],
              loops: list[ForOp], env: Env) -> Counted:
        """The arrivals of one run of an op with `count` and `per=scope` under `guards`."""
        warps = self.agent.warps
        whole = count * (warps * WARP if scope == "thread" else warps if scope == "warp"
                         else 1)
        if not guards and not loops:
            return Counted(whole)
        if guards:
            admitted = self._admitted(guards, env)
            if isinstance(admitted, Counted):
                return admitted
            mask, narrowing = admitted
        else:
            mask, narrowing = [True] * len(self.threads), None
        trips = self._trips(loops, guards, env) if loops else None
        if isinstance(trips, Counted):
            return trips
        if narrowing is None and trips is None:
            return Counted(whole)
        reps = trips or [1] * len(mask)
        if scope == "thread":
            n = sum(r for m, r in zip(mask, reps, strict=True) if m)
            who = _threads_word(sum(mask), self._warps_with(mask), warps)
        elif scope == "warp":
            n = sum(max(r for i, r in enumerate(reps) if mask[i] and i // WARP == w)
                    for w in self._warps_with(mask))
            k = len(self._warps_with(mask))
            who = f"{k} warp{'s' if k != 1 else ''} of {warps}"
        else:
            n = reps[0] if mask[0] else 0
            who = ("the role's thread 0, the elected thread" if mask[0] else
                   "nobody: the elected thread (the role's thread 0) is not among the threads "
                   "the condition admits")
        if trips is not None:
            who += ", each as many times as the loop runs for it"
        out = warps - len(self._warps_with(mask)) if scope != "role" else 0
        return Counted(count * n, narrowing or (loops[-1] if loops else None), who,
                       warps_out=out)

    def _trips(self, loops: list[ForOp], guards: list[tuple[IfOp, bool]], env: Env
               ) -> list[int] | Counted:
        """How many times each thread runs the loops whose bounds depend on the thread.
        Their iterations add to one phase only when nothing in them blocks, and they are
        walked once, so a condition on their counter cannot be decided."""
        names = {loop.var.sym.name if isinstance(loop.var.sym, Var) else loop.var.name
                 for loop in loops}
        head = loops[-1].span
        for g, _ in guards:
            if atoms(g.cond) & names:
                return Counted(None, unknown="its condition tests the counter of a loop whose "
                               "trip count depends on the thread", at=g.cond.span)
        for loop in loops:
            bound = {a.name for e in (loop.start, loop.stop, loop.step) for a in e.atoms()
                     if isinstance(a, Var | Dim)}
            launch = [a.name for e in (loop.start, loop.stop, loop.step) for a in e.atoms()
                      if isinstance(a, Dim)]
            if bound & names - {loop.var.sym.name if isinstance(loop.var.sym, Var) else ""}:
                return Counted(None, unknown="it runs in nested loops whose trip counts depend "
                               "on the thread and on each other", at=loop.span)
            if launch:
                return Counted(None, unknown="it runs in a loop whose trip count depends on the "
                               f"thread and on `{launch[0]}`, known only at launch",
                               at=loop.span)
            if any(isinstance(n, Op) and _blocks(n) for n in walk_nodes(loop.body)):
                return Counted(None, unknown="it runs in a loop whose trip count depends on the "
                               "thread and which blocks (its lanes' iterations fall in "
                               "different phases)", at=loop.span)
        out: list[int] = []
        for t in self.threads:
            e = {**env, **t}
            n = 1
            for loop in loops:
                a, b, c = (evaluate(x, e) for x in (loop.start, loop.stop, loop.step))
                if a is None or b is None or not c:
                    return Counted(None, unknown="it runs in a loop whose trip count cannot "
                                   "be decided for each thread", at=head)
                n *= len(range(a, b, c))
            out.append(n)
        return out

    def _warps_with(self, mask: list[bool]) -> set[int]:
        return {i // WARP for i, m in enumerate(mask) if m}

    def _admitted(self, guards: list[tuple[IfOp, bool]], env: Env
                  ) -> tuple[list[bool], IfOp | None] | Counted:
        """Which threads pass every guard, and the innermost guard that drops some."""
        names = {n for g, _ in guards for n in atoms(g.cond)} - THREAD_VARS
        key = (tuple((id(g), b) for g, b in guards),
               tuple(sorted((n, env.get(n)) for n in names)))
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        mask = [True] * len(self.threads)
        narrowing: IfOp | None = None
        out: tuple[list[bool], IfOp | None] | Counted | None = None
        for g, branch in guards:
            why = _undecidable(g.cond)
            if why is not None:
                out = Counted(None, unknown=f"the condition compares a thread index with "
                              f"`{why}`, known only at launch", at=g.cond.span)
                break
            before = sum(mask)
            for i, t in enumerate(self.threads):
                if not mask[i]:
                    continue
                v = truth(g.cond, {**env, **t})
                if v is None:
                    out = Counted(None, unknown="the condition cannot be decided for each "
                                  "thread", at=g.cond.span)
                    break
                mask[i] = v == branch
            if out is not None:
                break
            if sum(mask) < before:
                narrowing = g
        result = out if out is not None else (mask, narrowing)
        self._cache[key] = result
        return result


def _blocks(op: Op) -> bool:
    eff = op.prim.effects
    return eff.waits is not None or eff.fence in ("block", "named")


def unknown_arrivals(op: Op, counted: Counted) -> Diagnostic:
    """CK303 at an arrival whose number of arrivals the verifier cannot know: a barrier's
    count is fixed when it is created, so the kernel must make the arrivals countable."""
    related = [] if counted.at is None else [Related(counted.at, "this decides who arrives")]
    return codes.ARRIVAL_COUNT_MISMATCH.at(
        op.span, f"cannot count the arrivals this `{op.prim.name}` makes per phase: "
        f"{counted.unknown}, so no fixed barrier count can be checked against it", related=related,
        notes=("an mbarrier's count is fixed when it is created: arrive from a set of "
               "threads known at compile time (`if lane.id == 0:`, `if warp.rank < 2:`, "
               "`per=\"warp\"`) and keep data-dependent choices out of who arrives",))


def _threads_word(n: int, warps: set[int], role_warps: int) -> str:
    per_warp = n // len(warps) if warps and n % len(warps) == 0 else None
    if n == 0:
        return "no thread"
    if per_warp is not None and len(warps) == role_warps and per_warp < WARP:
        lanes = f"{per_warp} lane{'s' if per_warp != 1 else ''}"
        return f"{lanes} of each of the {role_warps} warps ({n} threads)"
    if per_warp == WARP:
        return f"the {n} threads of {len(warps)} warp{'s' if len(warps) != 1 else ''}"
    return f"{n} thread{'s' if n != 1 else ''}"


__all__ = ["Arrivers", "Counted", "threads_of", "unknown_arrivals"]
