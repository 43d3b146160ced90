"""The pipeline protocol, read from the structure of each role (CK301, CK305).

A producer role brackets each stage with `acquire()` .. `commit()`, a consumer role with
`wait()` .. `release()`.  Here every path through a role is followed without running
it: both sides of an `if`, one iteration of a loop standing for all of them.  A loop
body must give back every stage it takes, and both sides of an `if` must leave the
pipeline in the same state.  An `if` whose condition depends on a loop index (`if k > 0`)
may legitimately differ between iterations; it is left to the unrolled run in
`local.py`, which sees the concrete iterations.
"""

from __future__ import annotations

from dataclasses import dataclass

from cake_core.diagnostics import codes
from cake_core.diagnostics.model import Applicability, Diagnostic, Fix, Related
from cake_core.ir.kernel import ForOp, IfOp, Node, Op, Role, walk_nodes
from cake_core.ir.symbolic import Var
from cake_core.ir.types import PipelineType
from cake_core.verify.facts import KernelFacts
from cake_core.verify.unroll import atoms

_OPEN = {"acquire": "producer", "wait": "consumer"}
_CLOSE = {"commit": "producer", "release": "consumer"}
_CLOSER = {"producer": "commit", "consumer": "release"}
_OPENER = {"producer": "acquire", "consumer": "wait"}


class _Stop(Exception):
    """The pipeline is reported (or undecidable) in this role: stop following it."""


@dataclass(frozen=True, slots=True)
class _State:
    """The stages a role holds: ops that opened them and are not closed yet."""

    producer: tuple[Op, ...] = ()
    consumer: tuple[Op, ...] = ()

    def held(self, side: str) -> tuple[Op, ...]:
        return self.producer if side == "producer" else self.consumer

    def with_(self, side: str, ops: tuple[Op, ...]) -> _State:
        return _State(ops, self.consumer) if side == "producer" else _State(self.producer, ops)

    def counts(self) -> tuple[int, int]:
        return len(self.producer), len(self.consumer)


class _RoleFlow:
    def __init__(self, facts: KernelFacts, role: Role, pipe: PipelineType) -> None:
        self.facts = facts
        self.role = role
        self.pipe = pipe
        self.loop_vars: list[str] = []
        self.found: Diagnostic | None = None

    def run(self) -> Diagnostic | None:
        try:
            end = self.nodes(self.role.body, _State())
        except _Stop:
            return self.found
        for side in ("producer", "consumer"):
            if end.held(side):
                op = end.held(side)[-1]
                self.report(op, f"`{self.pipe.name}.{op.prim.name}()` is never followed by "
                            f"`{self.pipe.name}.{_CLOSER[side]}()` in role {self.role.name!r}",
                            fix_after=op, side=side)
        return self.found

    # -- walking --
    def nodes(self, nodes: list[Node], st: _State) -> _State:
        for n in nodes:
            if isinstance(n, Op):
                st = self.op(n, st)
            elif isinstance(n, ForOp):
                st = self.loop(n, st)
            elif isinstance(n, IfOp):
                st = self.branch(n, st)
        return st

    def op(self, op: Op, st: _State) -> _State:
        eff = self.facts.effects(op)
        if eff.pipe is None or not isinstance(eff.pipe.type, PipelineType) or \
                eff.pipe.type.name != self.pipe.name:
            return st
        action = eff.pipe_action or ""
        name = self.pipe.name
        if action in _OPEN:
            side = _OPEN[action]
            held = st.held(side)
            if side == "producer" and held:
                line = held[-1].span.start.line + 1
                self.report(op, f"`{name}.acquire()` while the stage acquired on line {line} is "
                            f"not committed yet: each acquire needs its `{name}.commit()` first",
                            related=[Related(held[-1].span, "this stage is still open")])
            return st.with_(side, (*held, op))
        closed = _CLOSE.get(action)
        if closed is None:
            return st
        side = closed
        held = st.held(side)
        if not held:
            self.report(op, f"`{name}.{action}()` with no stage to {action}: no "
                        f"`{name}.{_OPENER[side]}()` precedes it on this path")
        return st.with_(side, held[1:])

    def loop(self, loop: ForOp, st: _State) -> _State:
        var = loop.var.sym.name if isinstance(loop.var.sym, Var) else loop.var.name
        self.loop_vars.append(var)
        out = self.nodes(loop.body, st)
        self.loop_vars.pop()
        if out.counts() == st.counts():
            return st
        for side in ("producer", "consumer"):
            before, after = st.held(side), out.held(side)
            if len(after) > len(before):
                op = after[-1]
                self.report(op, f"each iteration of this loop takes a stage with "
                            f"`{self.pipe.name}.{op.prim.name}()` and never gives it back: "
                            f"`{self.pipe.name}.{_CLOSER[side]}()` is missing",
                            related=[Related(loop.span, "the loop")],
                            fix_after=loop.body[-1], side=side, indent_like=op)
            if len(after) < len(before):
                closer = self._last_closer(loop.body, side)
                self.report(closer or loop, f"each iteration of this loop gives back a stage "
                            f"of `{self.pipe.name}` it did not take",
                            related=[Related(loop.span, "the loop")])
        raise _Stop

    def branch(self, node: IfOp, st: _State) -> _State:
        then = self.nodes(node.then, st)
        other = self.nodes(node.orelse, st)
        if then.counts() == other.counts():
            return then
        if atoms(node.cond) & set(self.loop_vars):
            raise _Stop  # differs by iteration: the unrolled run decides
        name = self.pipe.name
        sides = [self._describe(st, then), self._describe(st, other)]
        msg = (f"`{name}` is unbalanced across this `if`: the `if` branch {sides[0]}, the "
               f"{'`else` branch' if node.orelse else 'path around it'} {sides[1]}")
        related = [Related(o.span, f"`{name}.{o.prim.name}()` on one branch only")
                   for o in self._pipe_ops(node.then if len(node.then) else node.orelse)][:3]
        fixes = []
        missing = self._missing(node, then, other)
        if missing is not None:
            side, lacking = missing
            anchor = lacking[-1]
            fixes.append(Fix(f"add `{name}.{_CLOSER[side]}()` to the other branch",
                             (self.facts.insert_after(anchor.span, f"{name}.{_CLOSER[side]}()"),),
                             Applicability.UNSAFE))
        self.found = codes.PIPELINE_PROTOCOL.at(node.cond.span, msg, related=related, fixes=fixes)
        raise _Stop

    # -- helpers --
    def _missing(self, node: IfOp, then: _State,
                 other: _State) -> tuple[str, list[Node]] | None:
        """When one branch lacks exactly the closing op the other has: its side and body."""
        sides = ("producer", "consumer")
        for i, side in enumerate(sides):
            a, b = len(then.held(side)), len(other.held(side))
            if abs(a - b) != 1 or then.counts()[1 - i] != other.counts()[1 - i]:
                continue
            lacking, present = (node.then, node.orelse) if a > b else (node.orelse, node.then)
            if lacking and self._last_closer(present, side) is not None:
                return side, lacking
        return None

    def _describe(self, before: _State, after: _State) -> str:
        parts = []
        for side, (b, a) in zip(("producer", "consumer"),
                                zip(before.counts(), after.counts(), strict=True), strict=True):
            if a > b:
                parts.append(f"takes a stage ({_OPENER[side]})")
            elif a < b:
                parts.append(f"gives a stage back ({_CLOSER[side]})")
        return " and ".join(parts) if parts else "leaves it as it was"

    def _pipe_ops(self, nodes: list[Node]) -> list[Op]:
        out = []
        for n in walk_nodes(nodes):
            if isinstance(n, Op):
                eff = self.facts.effects(n)
                if eff.pipe is not None and isinstance(eff.pipe.type, PipelineType) and \
                        eff.pipe.type.name == self.pipe.name:
                    out.append(n)
        return out

    def _last_closer(self, nodes: list[Node], side: str) -> Op | None:
        ops = [o for o in self._pipe_ops(nodes)
               if self.facts.effects(o).pipe_action == _CLOSER[side]]
        return ops[-1] if ops else None

    def report(self, at: Op | ForOp, message: str, *, related: list[Related] | None = None,
               fix_after: Node | None = None, side: str | None = None,
               indent_like: Op | None = None) -> None:
        fixes = []
        if fix_after is not None and side is not None:
            call = f"{self.pipe.name}.{_CLOSER[side]}()"
            edit = self.facts.insert_after(fix_after.span, call,
                                           indent_like=(indent_like or fix_after).span)
            fixes.append(Fix(f"add `{call}`", (edit,), Applicability.UNSAFE))
        self.found = codes.PIPELINE_PROTOCOL.at(at.span, message, related=related or [],
                                                fixes=fixes)
        raise _Stop


def check(facts: KernelFacts) -> list[Diagnostic]:
    out: list[Diagnostic] = []
    k = facts.kernel
    for pname, pipe in facts.pipelines.items():
        silent = set()
        for cons in pipe.consumers:
            d = _never_releases(facts, pname, pipe, cons)
            if d is not None:
                out.append(d)
                silent.add(cons)
        for role in k.roles.values():
            if role.name in silent or role.name not in (pipe.producer, *pipe.consumers):
                continue
            d = _RoleFlow(facts, role, pipe).run()
            if d is not None:
                out.append(d)
    return out


def _never_releases(facts: KernelFacts, pname: str, pipe: PipelineType,
                    cons: str) -> Diagnostic | None:
    role = facts.kernel.roles.get(cons)
    if role is None:
        return None
    waits: list[Op] = []
    releases: list[Op] = []
    loops: dict[int, ForOp] = {}
    for n in walk_nodes(role.body):
        if isinstance(n, ForOp):
            for m in n.body:
                loops[id(m)] = n
        if not isinstance(n, Op):
            continue
        eff = facts.effects(n)
        if eff.pipe is None or not isinstance(eff.pipe.type, PipelineType) or \
                eff.pipe.type.name != pname:
            continue
        (waits if eff.pipe_action == "wait" else releases if eff.pipe_action == "release"
         else []).append(n)
    decl = facts.pipeline_ops[pname]
    if releases:
        return None
    if not waits:
        if cons == pipe.producer:
            return None
        return codes.CONSUMER_NEVER_RELEASES.at(
            decl.arg_spans.get("consumer", decl.span),
            f"role {cons!r} is a consumer of `{pname}` but never waits for or releases a stage; "
            f"each stage is free again only when every consumer has released it, so the "
            f"producer blocks after {pipe.stages} stages",
            related=[Related(role.name_span, f"role {cons!r}")])
    first = waits[0]
    fixes = []
    loop = loops.get(id(first))
    if loop is not None:
        fixes.append(Fix(f"add `{pname}.release()` at the end of the loop body",
                         (facts.insert_after(loop.body[-1].span, f"{pname}.release()",
                                             indent_like=first.span),),
                         Applicability.UNSAFE))
    return codes.CONSUMER_NEVER_RELEASES.at(
        first.span, f"role {cons!r} waits for stages of `{pname}` but never releases one: the "
        f"producer blocks once it has filled all {pipe.stages} stages",
        related=[Related(decl.span, f"`{pname}` declared here")], fixes=fixes)
