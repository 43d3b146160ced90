"""Per-phase accounting of raw mbarriers: arrivals (CK303) and transaction bytes (CK302).

A raw mbarrier phase completes when it has received the arrival count it was created
with and every byte announced by `expect_tx` has landed.  Each agent that signals a
barrier does so in *batches*: the arrivals and copies it makes on the barrier between
two of its blocking operations (a wait, an acquire, a barrier sync); an arrival op that
runs again (the next iteration of a loop that never blocks) starts a new batch too.  In
a kernel whose roles run in step, batch j of every agent belongs to phase j of the
barrier, so phase j gets the sum of the agents' batch-j arrivals and bytes.  Only phases
that some agent waits for are checked.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from cake_core.diagnostics import codes
from cake_core.diagnostics.model import Applicability, Diagnostic, Fix, Related, TextEdit
from cake_core.ir.kernel import IfOp, Op
from cake_core.verify.events import Arrive, BarKey, Copy, Wait
from cake_core.verify.facts import KernelFacts
from cake_core.verify.local import AgentRun


@dataclass(slots=True)
class _Phase:
    arrivals: int = 0
    expected: int | None = 0
    delivered: int = 0
    arrive_ops: list[tuple[str, Op]] = field(default_factory=list)
    made: list[int] = field(default_factory=list)
    """The arrivals each of `arrive_ops` made."""
    guarded: list[tuple[Op, Arrive]] = field(default_factory=list)
    """Arrivals a lane, warp or thread condition narrowed (see `arrivers.py`)."""
    expect_ops: list[Op] = field(default_factory=list)
    copy_ops: list[tuple[Op, int]] = field(default_factory=list)


def tally(facts: KernelFacts, runs: list[AgentRun],
          first_wait: dict[BarKey, Op] | None = None
          ) -> tuple[dict[BarKey, list[_Phase]], dict[BarKey, int]]:
    """Arrivals and bytes per phase of each barrier, and the last phase each is waited
    for; `first_wait`, when given, collects each barrier's first wait."""
    phases: dict[BarKey, list[_Phase]] = {}
    waited: dict[BarKey, int] = {}
    for run in runs:
        batch: dict[BarKey, int] = {}
        open_: set[BarKey] = set()
        arrived: dict[BarKey, set[int]] = {}  # arrival ops already in the open batch
        for ev in run.events:
            s = ev.sync
            if ev.blocks:
                open_.clear()
                if isinstance(s, Wait):
                    waited[s.bar] = max(waited.get(s.bar, -1), s.phase)
                    if first_wait is not None:
                        first_wait.setdefault(s.bar, ev.op)
                continue
            if not isinstance(s, Arrive | Copy) or s.bar is None or s.bar[1] is None:
                continue
            again = isinstance(s, Arrive) and id(ev.op) in arrived.get(s.bar, ())
            if s.bar not in open_ or again:
                open_.add(s.bar)
                arrived[s.bar] = set()
                batch[s.bar] = batch.get(s.bar, -1) + 1
            if isinstance(s, Arrive):
                arrived[s.bar].add(id(ev.op))
            table = phases.setdefault(s.bar, [])
            j = batch[s.bar]
            while len(table) <= j:
                table.append(_Phase())
            ph = table[j]
            if isinstance(s, Arrive):
                ph.arrivals += s.count
                ph.arrive_ops.append((run.agent.label, ev.op))
                ph.made.append(s.count)
                if s.guard is not None and all(o is not ev.op for o, _ in ph.guarded):
                    ph.guarded.append((ev.op, s))
                if ev.op.prim.effects.tx_bytes:
                    ph.expect_ops.append(ev.op)
                    ph.expected = None if s.expect_bytes is None or ph.expected is None \
                        else ph.expected + s.expect_bytes
            else:
                ph.delivered += s.nbytes
                ph.copy_ops.append((ev.op, s.nbytes))
    return phases, waited


def check(facts: KernelFacts, runs: list[AgentRun]) -> list[Diagnostic]:
    first_wait: dict[BarKey, Op] = {}
    phases, waited = tally(facts, runs, first_wait)
    out: list[Diagnostic] = []
    done: set[tuple[str, str]] = set()
    for key in sorted(set(phases) | set(waited), key=lambda k: (k[0], k[1] or 0)):
        decl = facts.barriers.get(key[0])
        if decl is None:
            continue
        last = waited.get(key, -1)
        if key not in phases and last >= 0 and ("count", key[0]) not in done:
            done.add(("count", key[0]))
            wait = first_wait.get(key)
            out.append(_orphan(facts, key, wait, decl[1]) if wait is not None else
                       _count(facts, key, 0, _Phase(), decl[0].count, decl[1]))
            continue
        for j, ph in enumerate(phases.get(key, [])[: last + 1]):
            never = next(((op, a) for op, a in ph.guarded if a.count == 0
                          and op.prim.effects.tx_bytes), None)
            if never is not None and ("count", key[0]) not in done:
                # an expect_tx its elected thread never reaches: neither the arrival nor
                # the bytes happen, and the condition is the bug
                done.update({("count", key[0]), ("tx", key[0])})
                out.append(_guarded(facts, key, j, ph, decl[0].count, decl[1], never))
                continue
            if ("tx", key[0]) not in done and (ph.delivered or ph.expected):
                d = _bytes(facts, key, ph)
                if d is not None:
                    done.add(("tx", key[0]))
                    out.append(d)
                    if not ph.expect_ops:  # the missing expect_tx is the missing arrival too
                        done.add(("count", key[0]))
            if ("count", key[0]) not in done and ph.arrivals != decl[0].count:
                done.add(("count", key[0]))
                out.append(_guarded(facts, key, j, ph, decl[0].count, decl[1], ph.guarded[0])
                           if ph.guarded else
                           _count(facts, key, j, ph, decl[0].count, decl[1]))
    return out


def _bytes(facts: KernelFacts, key: BarKey, ph: _Phase) -> Diagnostic | None:
    if ph.expected is None or ph.expected == ph.delivered:
        return None
    name = f"{key[0]}[{key[1]}]" if facts.barriers[key[0]][0].n > 1 else key[0]
    parts = ", ".join(f"{_dst(op)}: {n}" for op, n in ph.copy_ops) or "none"
    related = [Related(op.span, f"delivers {n} bytes") for op, n in ph.copy_ops][:4]
    if not ph.expect_ops:
        first = ph.copy_ops[0][0]
        bar_span = first.arg_spans.get("bar")
        fixes = []
        if bar_span is not None:
            call = f"{facts.text(bar_span)}.expect_tx({ph.delivered})"
            fixes.append(Fix(f"arm the barrier: `{call}`", (facts.insert_before(first.span, call),),
                             Applicability.UNSAFE))
        return codes.EXPECT_TX_MISMATCH.at(
            first.span, f"the TMA copies into `{name}` deliver {ph.delivered} bytes "
            f"({parts}), but no `expect_tx` arms the phase with them: it can complete before "
            "the data lands", related=related[1:], fixes=fixes)
    op = ph.expect_ops[0]
    fixes = []
    if len(ph.expect_ops) == 1 and "bytes" in op.arg_spans:
        fixes.append(Fix(f"expect {ph.delivered} bytes",
                         (TextEdit(op.arg_spans["bytes"], str(ph.delivered)),)))
    diff = ph.expected - ph.delivered
    effect = ("the phase never completes and its waiters hang" if diff > 0 else
              "the phase completes before all the data has landed")
    return codes.EXPECT_TX_MISMATCH.at(
        op.arg_spans.get("bytes", op.span),
        f"`{name}` is armed with {ph.expected} bytes, but its TMA copies deliver "
        f"{ph.delivered} ({parts}): {effect}", related=related, fixes=fixes)


def _count(facts: KernelFacts, key: BarKey, j: int, ph: _Phase, count: int,
           decl: Op) -> Diagnostic:
    senders = _senders(ph)
    effect = ("the phase never completes and its waiters hang" if ph.arrivals < count else
              "the phase completes early, before every arrival it should wait for")
    related = [Related(op.span, f"{label} arrives here") for label, op in ph.arrive_ops][:4]
    tx = "; an expect_tx is one arrival" if ph.expect_ops else ""
    fixes = _count_fix(ph, decl)
    return codes.ARRIVAL_COUNT_MISMATCH.at(
        decl.arg_spans.get("count", decl.span),
        f"`{key[0]}` waits for {count} arrival{'s' if count != 1 else ''} per phase, but phase "
        f"{j} gets {ph.arrivals} ({senders}{tx}): {effect}",
        related=related, fixes=fixes)


def _senders(ph: _Phase) -> str:
    who: dict[str, int] = {}
    for (label, _), n in zip(ph.arrive_ops, ph.made, strict=True):
        who[label] = who.get(label, 0) + n
    return ", ".join(f"{label} {n}" for label, n in who.items()) or "nothing arrives on it"


def _count_fix(ph: _Phase, decl: Op) -> list[Fix]:
    if "count" not in decl.arg_spans or ph.arrivals <= 0:
        return []
    plural = "s" if ph.arrivals != 1 else ""
    edit = TextEdit(decl.arg_spans["count"], str(ph.arrivals))
    return [Fix(f"count {ph.arrivals} arrival{plural}", (edit,), Applicability.UNSAFE)]


def _guarded(facts: KernelFacts, key: BarKey, j: int, ph: _Phase, count: int, decl: Op,
             at: tuple[Op, Arrive]) -> Diagnostic:
    """CK303 at an arrival a lane, warp or thread condition narrowed: the condition says
    who arrives, and that is where the count and the code disagree."""
    op, a = at
    if isinstance(a.guard, IfOp):
        cond = a.guard.cond.span
        under = f"under `{facts.text(cond)}`"
    else:
        cond = a.guard.span if a.guard is not None else op.span
        under = f"in the loop on line {cond.start.line + 1}"
    effect = ("the phase never completes and its waiters hang" if ph.arrivals < count else
              "the phase completes early, before every arrival it should wait for")
    related = [Related(cond, "this decides who arrives"),
               Related(decl.arg_spans.get("count", decl.span),
                       f"`{key[0]}` counts {count} arrival{'s' if count != 1 else ''}")]
    related += [Related(o.span, f"{label} arrives here") for label, o in ph.arrive_ops
                if o is not op][:2]
    per = op.args.get("per")
    scope = per.const if per is not None and isinstance(per.const, str) else "role"
    return codes.ARRIVAL_COUNT_MISMATCH.at(
        op.span, f"{under} this arrival is made by {a.who}: {a.count} "
        f"arrival{'s' if a.count != 1 else ''}, and phase {j} of `{key[0]}` gets "
        f"{ph.arrivals} ({_senders(ph)}) where it waits for {count}: {effect}",
        related=related, fixes=_count_fix(ph, decl),
        notes=(f"a `per=\"{scope}\"` arrival under a condition on the thread indices is "
               "made only by the threads the condition admits; count those, or arrive "
               "outside the condition",))


def _orphan(facts: KernelFacts, key: BarKey, wait: Op, decl: Op) -> Diagnostic:
    """A wait on a barrier nothing ever arrives on: the bug is the wait (or the missing
    arrival it expects), not the barrier's count, so it is reported at the wait."""
    name = f"{key[0]}[{key[1]}]" if facts.barriers[key[0]][0].n > 1 else key[0]
    return codes.ARRIVAL_COUNT_MISMATCH.at(
        wait.span, f"this wait on `{name}` never returns: no role arrives on `{name}` and no "
        "TMA copy signals it, so its phase 0 never completes",
        related=[Related(decl.span, f"`{key[0]}` is created here")],
        notes=["arrive on the barrier (or give it to the TMA copy the waiter expects), or "
               "wait on the barrier that is signalled"])


def _dst(op: Op) -> str:
    span = op.arg_spans.get("dst")
    return op.prim.name if span is None else f"line {span.start.line + 1}"
