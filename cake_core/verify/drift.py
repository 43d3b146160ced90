"""Hand-written mbarrier parities that drift out of phase (CK312), and their fix.

A raw mbarrier completes phases 0, 1, 2, ...; `bar.wait(p)` returns once the phase with
parity `p` has completed, that is, as soon as the barrier's current phase has the other
parity.  A waiter that waits once per phase must therefore alternate its parity, starting
with 0 (or with 1 for a barrier that starts free, whose first wait returns at once).
Parities derived from the loop index go wrong in two common ways: a ring of barriers
indexed `k % STAGES` is visited every STAGES iterations, so its parity is
`(k // STAGES) % 2`, not `k % 2`; and a barrier that completes twice per iteration
gets ahead of a waiter that waits once.
"""

from __future__ import annotations

from cake_core.diagnostics import codes
from cake_core.diagnostics.model import Diagnostic, Fix, Related, TextEdit
from cake_core.ir.kernel import Op
from cake_core.ir.symbolic import BinExpr, Var
from cake_core.verify.effects import barrier_parts
from cake_core.verify.events import BarKey
from cake_core.verify.facts import KernelFacts


def _name(facts: KernelFacts, key: BarKey) -> str:
    decl = facts.barriers.get(key[0])
    single = decl is not None and decl[0].n == 1
    return key[0] if single or key[1] is None else f"{key[0]}[{key[1]}]"


def parity_finding(facts: KernelFacts, op: Op, key: BarKey, seen: list[int],
                   parity: int, where: tuple[tuple[str, int], ...] = ()) -> Diagnostic:
    """The n-th wait on a barrier uses the wrong parity (its waits do not alternate)."""
    history = ", ".join(str(p) for p in seen)
    span = op.arg_spans.get("parity", op.span)
    first = seen[0] if seen else parity
    at = "".join(f", {k} = {v}" for k, v in where)
    msg = (f"wait number {len(seen) + 1} on `{_name(facts, key)}`{f' ({at[2:]})' if at else ''} "
           f"uses parity {parity}, but its earlier waits used {history}: one wait per phase "
           "must alternate the parity, so this wait returns at once, on a phase that already "
           "completed")
    fixes = []
    ring = _ring_parity(facts, op, first)
    text = ring or _loop_parity(op, seen, first, where)
    if text is not None:
        title = "use the ring's phase" if ring else "flip the parity every iteration"
        fixes.append(Fix(f"{title}: `{text}`", (TextEdit(span, text),)))
    notes = []
    bar = op.args.get("self")
    if bar is not None and barrier_parts(bar)[1] is not None:
        notes.append("a barrier in a ring of n is waited on every n-th iteration: its parity "
                     "is (k // n) % 2")
    return codes.PARITY_DRIFT.at(span, msg, notes=notes, fixes=fixes)


def runaway_finding(facts: KernelFacts, op: Op, key: BarKey, completed: int,
                    phase: int) -> Diagnostic:
    """A barrier completed more phases than its waiter waited for."""
    span = op.arg_spans.get("parity", op.span)
    if phase < 0:
        # The first wait used parity 1, which a fresh barrier satisfies at once (it stands
        # for the phase before phase 0): the waiter does not wait for the first phase.
        return codes.PARITY_DRIFT.at(
            span, f"this first wait on `{_name(facts, key)}` uses parity 1, which a fresh "
            "barrier satisfies at once: it does not wait for phase 0, so what that phase "
            "announces (its arrivals, its TMA bytes) may not be there yet",
            notes=["parity 1 first is for a barrier that starts free (a producer waiting "
                   "for empty slots); a waiter for data starts with parity 0"],
            related=[Related(op.span, "the wait that does not wait")])
    ahead = completed - phase - 1
    plural = "s" if completed != 1 else ""
    return codes.PARITY_DRIFT.at(
        span, f"`{_name(facts, key)}` has completed {completed} phase{plural} "
        f"when this wait looks for phase {phase}: it completes more often than it is waited "
        f"on (already {ahead} phase{'s' if ahead != 1 else ''} ahead), so the parity no longer "
        "tells which phase completed",
        notes=["wait once for every phase of the barrier, or give each phase its own barrier"],
        related=[Related(op.span, "the wait that falls behind")])


def _ring_parity(facts: KernelFacts, op: Op, first: int) -> str | None:
    """`(k // STAGES) % 2` for `bars[k % STAGES].wait(...)` (plus 1 when it starts free)."""
    bar = op.args.get("self")
    if bar is None:
        return None
    _, idx = barrier_parts(bar)
    e = idx.sym if idx is not None else None
    if not (isinstance(e, BinExpr) and e.op == "%" and e.right.const is not None
            and e.right.const > 1 and isinstance(e.left, Var)):
        return None
    k, n = e.left.name, facts.spell(e.right.const)
    return f"({k} // {n}) % 2" if first == 0 else f"({k} // {n} + 1) % 2"


def _loop_parity(op: Op, seen: list[int], first: int,
                 where: tuple[tuple[str, int], ...]) -> str | None:
    """`k % 2` for a single barrier waited once per iteration of the loop over `k`."""
    bar = op.args.get("self")
    if bar is None or barrier_parts(bar)[1] is not None or not where:
        return None
    var, value = where[-1]
    if value != len(seen):
        return None
    return f"{var} % 2" if first == 0 else f"({var} + 1) % 2"
