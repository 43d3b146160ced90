"""One agent's unrolled program, checked on its own (CK301, CK304, CK306, CK307, CK308,
CK309, CK312) and turned into the events the multi-agent run consumes.

Everything here depends only on the agent's own program order: which pipeline stages
it holds, which of its async groups (wgmma, cp.async, bulk stores) are still pending,
which of its generic writes no proxy fence has covered yet, which parities it waits
with.  Hazards between agents need the schedule and are found in `deadlock.py`.

The ops of a role run on all of its warps: two ordinary ops of one role are ordered by
program order (the lowering keeps each op's threads in step).  Async copies are not:
each thread issues and waits for its own cp.async copies, and a TMA copy is issued by
one elected thread, so between such a copy and the role's other accesses to the same
data there must be a barrier over the role's warps (`syncthreads()` or a named barrier).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from cake_core.diagnostics import codes
from cake_core.diagnostics.model import Applicability, Diagnostic, Fix, Related, TextEdit
from cake_core.ir.kernel import IfOp, Op, Value
from cake_core.ir.symbolic import Dim, SymExpr
from cake_core.ir.types import BarrierType, FragmentType, PipelineType, StageType
from cake_core.primitives.traits import Trait
from cake_core.verify.arrivers import Arrivers, unknown_arrivals
from cake_core.verify.bulk_source import by_one_thread, overwritten_finding, wait_fix
from cake_core.verify.drift import parity_finding
from cake_core.verify.effects import ASYNC_PROXY, Effects, Region, barrier_parts
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
from cake_core.verify.leader_release import leader_release_finding, partial_release_finding
from cake_core.verify.unroll import Agent, Truncated, Walker, condition_leaves, evaluate

Token = tuple[str, str, int]
"""A stage as one side of a pipeline holds it: (pipeline, side, sequence number)."""


def _all_warps_access(eff: Effects, warps: int) -> bool:
    """Whether the warps of the agent access memory each on their own, so that one elected
    thread's arrival does not order them: an elected thread's TMA copy and bulk store are
    its own; a wgmma is one operation of its warpgroup, which a `wgmma_wait` in any of its
    warps sees complete, so only several warpgroups are unordered."""
    if eff.async_group in ("tma", "bulk_store"):
        return False
    return eff.async_group != "wgmma" or warps > 4


@dataclass(slots=True)
class _Pending:
    """An async group still in flight: a wgmma or a bulk tma_store."""

    seq: int
    op: Op
    regions: list[Region]
    frags: set[str] = field(default_factory=set)
    """The accumulators it writes, by name: a name is one set of registers, whichever
    definition of it a use refers to (see `AgentRun.stage_of`)."""
    tokens: set[Token] = field(default_factory=set)
    operands: set[str] = field(default_factory=set)
    """The fragments it reads as A from registers, by name (CK328): the tensor cores read
    those registers until a wait covers it, so they must keep their values."""


@dataclass(slots=True)
class _CpWrite:
    region: Region
    group: int
    op: Op
    done_epoch: int | None = None
    done_by: Op | None = None
    """The cp_async_wait that completed the copy."""


@dataclass
class AgentRun:
    facts: KernelFacts
    agent: Agent
    events: list[Event] = field(default_factory=list)
    diagnostics: list[Diagnostic] = field(default_factory=list)
    truncated: bool = False
    sizes: dict[str, int] | None = None
    """Dim sizes to walk with instead of `facts.sizes` (see `run_agents`)."""

    def __post_init__(self) -> None:
        self.env = dict(self.facts.sizes if self.sizes is None else self.sizes)
        self.loop_names = sorted(self.facts.loop_vars)
        self._seen: set[object] = set()
        self._reported_pipes: set[str] = set()
        self._stage_findings: list[tuple[str, Diagnostic]] = []
        self.seq: dict[tuple[str, str], int] = {}
        self.held: dict[tuple[str, str], list[tuple[Token, Op]]] = {}
        self.ended: dict[Token, Op] = {}
        self.stage_of: dict[str, Token] = {}
        """Stage name -> the stage it holds now.  By name, not by Value: the IR binds a use
        to the definition before it in the text, so a use at the top of a loop body means the
        definition before the loop on the first iteration but the one at the bottom of the
        body on the next (a loop-carried stage or accumulator, as in double buffering).  The
        walk is unrolled, so the latest definition executed is the one a use means."""
        self.wgmma: list[_Pending] = []
        self.wgmma_n = 0
        self.renames: dict[str, str] = {}
        """Column slice (`x[:, a:b]`) name -> the fragment whose registers it names: a
        wgmma reading the slice reads those registers (CK328 on re-binding the base)."""
        self.wgmma_waited: tuple[Op, int, tuple[tuple[str, int], ...]] | None = None
        """The last `wgmma_wait`, how many wgmma groups had been issued before it, and the
        loop iteration it ran in."""
        self.wgmma_last: Op | None = None
        """The last wgmma or `wgmma_wait`: late accesses after the same one, on any
        iteration, miss the same wait (one finding)."""
        self.bulk: list[_Pending] = []
        self.bulk_n = 0
        self.bulk_met: dict[int, Op] = {}
        """Pending bulk store (by op id) -> the first barrier of the agent's warps since it."""
        self.bulk_waited: list[tuple[_Pending, Op]] = []
        """Stores the issuing thread waited for, with its wait, and no barrier since: the
        role's other threads may not overwrite their sources yet (CK316)."""
        self.cp_writes: list[_CpWrite] = []
        self.cp_committed = 0
        self.cp_done = 0
        self.cp_wait: tuple[Op, int, int] | None = None
        self.epoch = 0
        self.last_barrier: int | None = None
        """The last barrier this agent passed (by op): accesses between the same two
        barriers that race stem from one missing barrier, reported once."""
        self.reads: list[tuple[Region, Op]] = []
        self.unfenced: list[tuple[Region, Op]] = []
        self.fenced_unmet: list[tuple[Region, Op, Op, Op | None]] = []
        """Generic writes by many threads, fenced (region, write, fence) but with no barrier
        of the agent's warps since the fence: each thread's fence orders only its own
        writes, so another thread's async-proxy read is ordered after them only by a
        barrier that follows every writer's fence.  The last item is the barrier of the
        agent's warps that came between the write and the fence, if any."""
        self.barrier_op: Op | None = None
        """The last barrier over all of the agent's warps."""
        self.barriers_met = 0
        self.write_barriers: dict[int, int] = {}
        """Unfenced generic write (by op id) -> `barriers_met` when it was made."""
        self.waits: dict[BarKey, list[int]] = {}
        self.offset: dict[BarKey, int] = {}
        self.walker: Walker | None = None
        self.arrivers = Arrivers(self.facts.kernel, self.agent)
        """Counts each arrival under the lane, warp and thread guards around it."""
        self.unsynced: list[Op] = []
        """Ops by which every warp of the agent touched shared memory since the agent's
        warps last met at a barrier: an elected arrival orders only its own warp's."""

    # -- driving --
    def run(self) -> AgentRun:
        walker = Walker(self.facts.kernel, self.agent, self.env)
        self.walker = walker
        try:
            for op in walker.run():
                self.step(op)
        except Truncated:
            self.truncated = True
            return self
        self.finish()
        return self

    def step(self, op: Op) -> None:
        eff = self.facts.effects(op)
        ev = Event(op, where=tuple((n, self.env[n]) for n in self.loop_names if n in self.env))
        if eff.pipe_action is not None and eff.pipe is not None:
            self.pipe(op, eff, ev)
        seq = {"wgmma": self.wgmma_n + 1, "bulk_store": self.bulk_n + 1,
               "cp_async": self.cp_committed + 1}.get(eff.async_group or "", 0)
        for v in eff.smem_reads:
            self.access(op, eff, v, False, seq, ev)
        for v in eff.smem_writes:
            self.access(op, eff, v, True, seq, ev)
        if ev.accesses and _all_warps_access(eff, self.agent.warps):
            self.unsynced.append(op)
        self.fragments(op, eff, ev)
        self.sync(op, eff, ev)
        self.events.append(ev)

    # -- pipelines --
    def pipe(self, op: Op, eff: Effects, ev: Event) -> None:
        pt = eff.pipe.type  # type: ignore[union-attr]
        assert isinstance(pt, PipelineType)
        action = eff.pipe_action or ""
        side = "producer" if action in ("acquire", "commit") else "consumer"
        key = (pt.name, side)
        held = self.held.setdefault(key, [])
        if action in ("acquire", "wait"):
            if action == "acquire" and held:
                self.protocol(pt.name, op, f"`{pt.name}.acquire()` while the stage acquired on "
                              f"line {held[-1][1].span.start.line + 1} is not committed yet",
                              [Related(held[-1][1].span, "this stage is still open")])
            n = self.seq.get(key, 0)
            self.seq[key] = n + 1
            token = (pt.name, side, n)
            held.append((token, op))
            stage, rnd = n % pt.stages, n // pt.stages
            if op.results:
                r = op.results[0]
                self.stage_of[r.name] = token
                self.env[r.name] = stage
                self.env[f"{r.name}.phase"] = rnd % 2
            ev.sync = PipeSync(pt.name, action, stage, rnd)
            return
        closer = "commit" if side == "producer" else "release"
        if not held:
            opener = "acquire" if side == "producer" else "wait"
            self.protocol(pt.name, op, f"`{pt.name}.{closer}()` with no stage to {closer}: no "
                          f"`{pt.name}.{opener}()` precedes it here ({self.where(ev)})")
            return
        token, _ = held.pop(0)
        self.ended[token] = op
        if side == "consumer":
            for p in reversed(self.wgmma):  # the newest group reading it sets the count
                if token in p.tokens:
                    self.wgmma_late(p, op, f"`{pt.name}.release()` hands the stage back while "
                                    f"the wgmma on line {p.op.span.start.line + 1} may still be "
                                    "reading it (the producer can then overwrite its operands)")
        ev.sync = PipeSync(pt.name, action, token[2] % pt.stages, token[2] // pt.stages)

    def protocol(self, pipe: str, op: Op, message: str,
                 related: list[Related] | None = None) -> None:
        if pipe not in self._reported_pipes:
            self._reported_pipes.add(pipe)
            self.diagnostics.append(codes.PIPELINE_PROTOCOL.at(op.span, message,
                                                               related=related or []))

    # -- memory --
    def region(self, v: Value) -> tuple[Region, list[Token]]:
        ref = self.facts.views.ref(v)
        stage: list[int | None] = []
        tokens: list[Token] = []
        for idx in ref.stage:
            tok = self.stage_of.get(idx.name) if isinstance(idx.type, StageType) else None
            if tok is not None:
                stage.append(tok[2] % self.facts.pipelines[tok[0]].stages)
                tokens.append(tok)
            elif isinstance(idx.type, StageType):
                stage.append(None)
            else:
                stage.append(evaluate(idx.sym, self.env) if idx.sym is not None else None)
        box = None
        if ref.box is not None:
            parts: list[tuple[int, int] | None] = []
            for lo, hi in ref.box:
                a, b = evaluate(lo, self.env), evaluate(hi, self.env)
                parts.append(None if a is None or b is None else (a, b))
            box = tuple(parts)
        return Region(ref.buffer, tuple(stage), box), tokens

    def access(self, op: Op, eff: Effects, v: Value, write: bool, seq: int, ev: Event) -> None:
        region, tokens = self.region(v)
        span = op.arg_spans.get(_param_of(op, v), op.span)
        self.stage_span(op, region, tokens, self.facts.text(span))
        group = eff.async_group
        ev.accesses.append(Access(region, write, span, group, seq))
        if write:
            self.write(op, region, group)
        else:
            self.read(op, region, group)

    def stage_span(self, op: Op, region: Region, tokens: list[Token], text: str) -> None:
        """CK304: a pipelined buffer touched outside a stage this role holds."""
        owner = self.facts.owner.get(region.buffer)
        role = self.agent.role
        if owner is None or role is None:
            return
        pipe = self.facts.pipelines[owner]
        sides = [s for s, r in (("producer", pipe.producer), *(("consumer", c)
                                for c in pipe.consumers)) if r == role.name]
        if not sides:
            return
        name = region.buffer
        if tokens:
            tok = tokens[0]
            if tok[0] != owner:
                self.stage_finding(owner, ("304", id(op)), codes.STAGE_ACCESS_OUTSIDE_SPAN.at(
                    op.span, f"`{name}` is filled through pipeline `{owner}`, but this access "
                    f"indexes it with a stage of `{tok[0]}`: the two rings are not in step",
                    related=[Related(self.facts.pipeline_ops[owner].span,
                                     f"`{owner}` declared here")]))
                return
            if any(t == tok for t, _ in self.held.get((tok[0], tok[1]), ())):
                return
            closer = self.ended.get(tok)
            related = [] if closer is None else [
                Related(closer.span, f"the stage was handed back here "
                        f"(`{owner}.{closer.prim.name}()`)")]
            self.stage_finding(owner, ("304", id(closer) if closer else id(op)),
                               codes.STAGE_ACCESS_OUTSIDE_SPAN.at(
                          op.span, f"accesses `{text}` after its stage of `{owner}` was handed "
                          f"back: the {_other(tok[1])} may already be reusing it",
                          related=related))
            return
        stage = region.stage[0] if region.stage else None
        if region.stage and stage is None:
            return
        for side in sides:
            if any(stage is not None and t[2] % pipe.stages == stage
                   for t, _ in self.held.get((owner, side), ())):
                return
        what = f"stage {stage} of `{name}`" if stage is not None else f"all of `{name}`"
        self.stage_finding(owner, ("304", id(op)), codes.STAGE_ACCESS_OUTSIDE_SPAN.at(
            op.span, f"accesses {what} outside any `{owner}` stage this role holds: index "
            f"`{name}` with the stage `{owner}.{'acquire' if sides[0] == 'producer' else 'wait'}"
            "()` returned",
            related=[Related(self.facts.pipeline_ops[owner].span, f"`{owner}` declared here")]))

    def stage_finding(self, pipe: str, key: object, diag: Diagnostic) -> None:
        """A CK304, held back until the end: a protocol error of the same pipeline explains it."""
        if key not in self._seen:
            self._seen.add(key)
            self._stage_findings.append((pipe, diag))

    def read(self, op: Op, region: Region, group: str | None) -> None:
        for w in reversed(self.cp_writes):
            if not w.region.overlaps(region):
                continue
            if w.group >= self.cp_done:
                self.cp_unwaited(op, w)
            elif self.agent.warps > 1 and w.done_epoch == self.epoch:
                self.cp_unsynced(op, w)
            break
        if group in ASYNC_PROXY:
            for r, wop in self.unfenced:
                if r.overlaps(region):
                    self.unfenced_read(op, wop, region)
                    break
            else:
                for r, wop, fop, bop in self.fenced_unmet:
                    if r.overlaps(region):
                        self.fence_unmet_read(op, wop, fop, bop, region)
                        break
        self.reads.append((region, op))

    def write(self, op: Op, region: Region, group: str | None) -> None:
        if group in ("cp_async", "tma") and self.agent.warps > 1:
            for r, rop in self.reads:
                if r.overlaps(region) and rop is not op:
                    self.once(("gap", self.last_barrier), codes.SMEM_RACE.at(
                        op.span, f"this copy overwrites {region.describe()} while other warps of "
                        f"{self.agent.label} may still be reading it (line "
                        f"{rop.span.start.line + 1}): no barrier since that read",
                        related=[Related(rop.span, "the read it races with")],
                        fixes=self.barrier_fix(op)), ("war", id(op)))
                    break
        for p in self.wgmma:
            if any(r.overlaps(region) for r in p.regions):
                self.wgmma_late(p, op, f"writes {region.describe()} while the wgmma on line "
                                f"{p.op.span.start.line + 1} may still be reading it")
        for p in self.bulk:
            if any(r.overlaps(region) for r in p.regions):
                self.once(("308", id(op), id(p.op)), codes.SMEM_RACE.at(
                    op.span, f"writes {region.describe()} while the tma_store on line "
                    f"{p.op.span.start.line + 1} may still be reading it",
                    related=[Related(p.op.span, "the store still in flight")],
                    fixes=wait_fix(self.facts, self.agent, op, self.bulk_met.get(id(p)))))
        if not by_one_thread(op):
            for p, wait in self.bulk_waited:
                if any(r.overlaps(region) for r in p.regions):
                    self.once(("316", id(op), id(p.op)), overwritten_finding(
                        self.facts, self.agent, op, region, p.op, wait))
                    break
        if group is None or group == "cp_async":
            self.unfenced.append((region, op))
            self.write_barriers.setdefault(id(op), self.barriers_met)
        if group == "cp_async":
            self.cp_writes.append(_CpWrite(region, self.cp_committed, op))

    # -- fragments and async groups --
    def fragments(self, op: Op, eff: Effects, ev: Event) -> None:
        if eff.async_group == "wgmma":
            regions = [a.region for a in ev.accesses if not a.write]
            tokens = set()
            for v in eff.smem_reads:
                tokens.update(self.region(v)[1])
            self.wgmma_n += 1
            self.wgmma_last = op
            writes = {f.name for f in eff.frag_writes}
            operands = {self.renames.get(f.name, f.name) for f in eff.frag_reads} - writes
            self.wgmma.append(_Pending(self.wgmma_n, op, regions, writes, tokens, operands))
            return
        if eff.async_group == "bulk_store":
            self.bulk_n += 1
            self.bulk.append(_Pending(self.bulk_n, op, [a.region for a in ev.accesses]))
        results = {id(r) for r in op.results}
        if Trait.REGISTER_ALIAS in op.prim.traits and op.results:
            base = op.args["x"].name
            self.renames[op.results[0].name] = self.renames.get(base, base)
        for f in (*eff.frag_reads, *eff.frag_writes,
                  *(r for r in op.results if isinstance(r.type, FragmentType))):
            for p in reversed(self.wgmma):
                if f.name in p.frags:
                    verb = "re-binds" if id(f) in results else "reads"
                    self.wgmma_late(p, op, f"{verb} `{f.name}` while the wgmma on line "
                                    f"{p.op.span.start.line + 1} may still be writing it")
                    break
                if f.name in p.operands and (id(f) in results or f in eff.frag_writes):
                    self.operand_late(p, op, f.name)
                    break

    def operand_late(self, p: _Pending, op: Op, name: str) -> None:
        """CK328: `name`, the register A operand of the wgmma `p`, is overwritten early."""
        pending = len(self.wgmma) - self.wgmma.index(p) - 1
        fix = Fix(f"wait for the wgmma first: `wgmma_wait({pending})`",
                  (self.facts.insert_before(op.span, f"wgmma_wait({pending})"),))
        self.once(("328", id(p.op), id(op)), codes.WGMMA_REGISTER_OPERAND_OVERWRITTEN.at(
            op.span, f"overwrites `{name}` while the wgmma on line {p.op.span.start.line + 1} "
            f"may still be reading it as its A operand from registers; the registers must "
            f"keep their values until a `wgmma_wait` covers that wgmma",
            related=[Related(p.op.span, "the wgmma still reading it")], fixes=[fix]))

    def wgmma_late(self, p: _Pending, op: Op, message: str) -> None:
        pending = len(self.wgmma) - self.wgmma.index(p) - 1
        shallow = self.shallow_wait(p)
        related = [Related(p.op.span, "the wgmma still in flight")]
        if shallow is not None:
            # a wait after the wgmma let it through: deepen that wait, which also keeps the
            # groups issued after it in flight (double buffering), rather than add a second
            wop, need = shallow
            related.append(Related(wop.span, "this wait leaves it in flight"))
            fix = Fix(f"wait until at most {need} group{'s' if need != 1 else ''} "
                      f"{'are' if need != 1 else 'is'} pending: `wgmma_wait({need})`",
                      (TextEdit(wop.arg_spans["n"], str(need)),))
        else:
            fix = Fix(f"wait for the wgmma first: `wgmma_wait({pending})`",
                      (self.facts.insert_before(op.span, f"wgmma_wait({pending})"),))
        self.once(("306", id(p.op)), codes.WGMMA_NOT_WAITED.at(
            op.span, f"{message}; a wgmma runs asynchronously until "
            + ("a `wgmma_wait(0)`" if pending == 0 else f"a `wgmma_wait(n)` with n <= {pending}")
            + " covers it", related=related, fixes=[fix]),
                  ("306 at", id(op)), ("306 after", id(self.wgmma_last)))

    def shallow_wait(self, p: _Pending) -> tuple[Op, int] | None:
        """The last `wgmma_wait`, when it came after `p` and left it pending, with the count
        that would have covered `p` there.  That wait is the bug, whichever late access it
        lets through on any iteration of a loop, and the fix deepens it."""
        w = self.wgmma_waited
        if w is None or w[1] < p.seq or w[1] < self.wgmma_n or "n" not in w[0].arg_spans:
            return None  # no wait since `p`, or wgmmas issued after it: one is missing here
        if w[2] != self.iteration():
            return None  # e.g. a loop's wait(1), then the epilogue: it needs a wait of its own
        return w[0], w[1] - p.seq

    def iteration(self) -> tuple[tuple[str, int], ...]:
        """The values of the loop variables in scope: which iteration of which loop runs."""
        return tuple((n, self.env[n]) for n in self.loop_names if n in self.env)

    def sync(self, op: Op, eff: Effects, ev: Event) -> None:
        if eff.group_commit == "cp_async":
            self.cp_committed += 1
        elif eff.group_wait is not None:
            group, n = eff.group_wait
            if group == "wgmma":
                self.wgmma = self.wgmma[len(self.wgmma) - n:] if n else []
                self.wgmma_waited = (op, self.wgmma_n, self.iteration())
                self.wgmma_last = op
                ev.sync = GroupWait(group, self.wgmma_n - len(self.wgmma))
            elif group == "bulk_store":
                keep = self.bulk[len(self.bulk) - n:] if n else []
                self.bulk_waited += [(p, op) for p in self.bulk[:len(self.bulk) - len(keep)]]
                self.bulk = keep
                ev.sync = GroupWait(group, self.bulk_n - len(self.bulk))
            elif group == "cp_async":
                self.cp_wait = (op, n, self.cp_committed)
                self.cp_done = max(self.cp_done, self.cp_committed - n)
                for w in self.cp_writes:
                    if w.group < self.cp_done and w.done_epoch is None:
                        w.done_epoch, w.done_by = self.epoch, op
                ev.sync = GroupWait(group, self.cp_done)
        elif eff.barrier is not None:
            kind, bid, warps = eff.barrier
            ev.sync = BarrierSync(bid, warps or self.facts.kernel.warps, kind == "sync")
            if kind == "sync" and ev.sync.warps >= self.agent.warps:
                self.unsynced.clear()
                self.fenced_unmet.clear()
                self.barrier_op = op
                self.barriers_met += 1
                self.bulk_waited.clear()
                for p in self.bulk:
                    self.bulk_met.setdefault(id(p), op)
            if kind == "sync":
                self.epoch += 1
                self.last_barrier = id(op)
                self.reads.clear()
                self.cp_writes = [w for w in self.cp_writes if w.done_epoch is None]
        elif eff.fence == "proxy_async":
            ev.fence_proxy = True
            self.fenced_unmet += [
                (r, wop, op, self.barrier_op
                 if self.write_barriers.get(id(wop), self.barriers_met) < self.barriers_met
                 else None)
                for r, wop in self.unfenced if not by_one_thread(wop)]
            self.unfenced.clear()
            self.write_barriers.clear()
        elif eff.copy_bar is not None:
            ct = eff.copy_bar.type
            if isinstance(ct, PipelineType):
                held = self.held.get((ct.name, "producer")) or [((ct.name, "", -1), op)]
                n = held[-1][0][2]
                ev.sync = Copy(None, eff.copy_bytes or 0, ct.name, n % ct.stages if n >= 0
                               else -1, n // ct.stages if n >= 0 else -1)
            elif isinstance(ct, BarrierType):
                ev.sync = Copy(self.bar_key(eff.copy_bar), eff.copy_bytes or 0)
        elif eff.arrive is not None:
            nbytes = None
            if eff.expect_bytes is not None and eff.expect_bytes.sym is not None:
                nbytes = evaluate(eff.expect_bytes.sym, self.env)
            counted = self.arrivers.count(eff.arrive_scope, eff.arrive_count or 1,
                                          self.walker.guards if self.walker else [],
                                          self.walker.thread_loops if self.walker else [],
                                          self.env)
            if counted.n is None:
                self.once(("303?", id(op)), unknown_arrivals(op, counted))
                return
            if eff.arrive_scope == "role" and self.agent.warps > 1 and self.unsynced \
                    and counted.n:
                self.once(("313", id(op)), leader_release_finding(
                    self.facts, self.agent, op, eff, self.unsynced))
                self.unsynced = []
            elif counted.warps_out and counted.n and self.unsynced:
                self.once(("313", id(op)), partial_release_finding(
                    self.agent, op, eff, counted, self.unsynced))
                self.unsynced = []
            if counted.n == 0 and nbytes is not None:
                nbytes = 0  # the elected thread never arms the phase either
            ev.sync = Arrive(self.bar_key(eff.arrive), counted.n, nbytes,
                             counted.guard, counted.who)
        elif eff.wait is not None:
            self.bar_wait(op, eff, ev)

    def bar_key(self, v: Value) -> BarKey:
        name, idx = barrier_parts(v)
        if idx is None:
            return name, 0
        return name, evaluate(idx.sym, self.env) if idx.sym is not None else None

    def bar_wait(self, op: Op, eff: Effects, ev: Event) -> None:
        key = self.bar_key(eff.wait)  # type: ignore[arg-type]
        par = eff.parity
        p = evaluate(par.sym, self.env) if par is not None and par.sym is not None else None
        if p is None or key[1] is None:
            return
        p %= 2
        seen = self.waits.setdefault(key, [])
        if not seen:
            self.offset[key] = 0 if p == 0 else -1
        phase = len(seen) + self.offset[key]
        if p != phase % 2:
            self.once(("312", key[0]), parity_finding(self.facts, op, key, seen, p, ev.where))
        seen.append(p)
        ev.sync = Wait(key, p, phase)

    # -- cp.async findings --
    def cp_unwaited(self, op: Op, w: _CpWrite) -> None:
        fixes = []
        if w.group >= self.cp_committed:
            why = "its group is not even committed (`cp_async_commit()`)"
        elif self.cp_wait is None:
            why = "no `cp_async_wait` covers it"
        else:
            wop, n, committed = self.cp_wait
            need = committed - w.group - 1
            why = (f"`cp_async_wait({n})` on line {wop.span.start.line + 1} leaves the newest {n} "
                   f"group{'s' if n != 1 else ''} in flight, and this copy's group is one of them")
            if need >= 0 and "n" in wop.arg_spans:
                fixes.append(Fix(f"leave at most {need} group{'s' if need != 1 else ''} pending",
                                 (TextEdit(wop.arg_spans["n"], str(need)),)))
        key = ("307", id(self.cp_wait[0]) if self.cp_wait else None)
        self.once(key, codes.CP_ASYNC_NOT_WAITED.at(
            op.span, f"reads {w.region.describe()} before the cp.async copy filling it has "
            f"completed: {why}", related=[Related(w.op.span, "the copy")], fixes=fixes))

    def cp_unsynced(self, op: Op, w: _CpWrite) -> None:
        self.once(("gap", self.last_barrier), codes.CP_ASYNC_NOT_WAITED.at(
            op.span, f"reads {w.region.describe()} with no barrier after the `cp_async_wait` "
            "that completed its copy: each thread waits only for its own copies, so the "
            "other warps' parts may not be there yet",
            related=[Related(w.op.span, "the copy")],
            fixes=self.barrier_fix(w.done_by or op, after=w.done_by is not None)),
            ("raw", id(op)))

    def unfenced_read(self, op: Op, wop: Op, region: Region) -> None:
        self.once(("309", id(op)), codes.MISSING_PROXY_FENCE.at(
            op.span, f"`{op.prim.name}` reads {region.describe()} through the async proxy, but "
            f"the generic-proxy write on line {wop.span.start.line + 1} was not fenced: call "
            "`fence_proxy_async()` between them",
            related=[Related(wop.span, "the generic write")],
            fixes=[Fix("fence the write: `fence_proxy_async()`", (self.facts.insert_after(
                wop.span, "fence_proxy_async()"),))]))

    def fence_unmet_read(self, op: Op, wop: Op, fop: Op, bop: Op | None,
                         region: Region) -> None:
        self.once(("309", id(op)), codes.MISSING_PROXY_FENCE.at(
            op.span, f"`{op.prim.name}` reads {region.describe()} through the async proxy, but "
            f"the threads that wrote it (line {wop.span.start.line + 1}) fence their writes "
            f"only on line {fop.span.start.line + 1}, after the last barrier of "
            f"{self.agent.label}: a thread's fence orders its own writes, so the fences must "
            "come before the barrier that hands the data over",
            related=[Related(fop.span, "the fence, after the barrier"),
                     Related(wop.span, "the generic write")],
            notes=["order: write, `fence_proxy_async()`, barrier, then the async-proxy read"],
            fixes=self.fence_above(fop, bop)))

    def fence_above(self, fop: Op, bop: Op | None) -> list[Fix]:
        """Move the fence just above the barrier it follows: safe when it is the very next
        line at the same indentation, so no write sits between them."""
        if bop is None or fop.span.start.line != bop.span.end.line + 1 or \
                self.facts.indent_of(fop.span) != self.facts.indent_of(bop.span):
            return []
        src = self.facts.source
        start = fop.span.start.offset - fop.span.start.col_byte
        end = start + len(src.line_text(fop.span.start.line).encode("utf-8"))
        end += 2 if src.data[end:end + 2] == b"\r\n" else 1 if src.data[end:end + 1] == b"\n" \
            else 0
        return [Fix("move the fence above the barrier",
                    (self.facts.insert_before(bop.span, src.snippet(fop.span)),
                     TextEdit(src.span(start, end), "")), Applicability.SAFE)]

    # -- helpers --
    def barrier_fix(self, op: Op, after: bool = False) -> list[Fix]:
        """`syncthreads()` before (or after) `op`, in kernels whose block is one agent."""
        if self.agent.role is not None:
            return []
        place = self.facts.insert_after if after else self.facts.insert_before
        return [Fix("add `syncthreads()`", (place(op.span, "syncthreads()"),))]

    def where(self, ev: Event) -> str:
        return ", ".join(f"{k} = {v}" for k, v in ev.where) or "at the start"

    def once(self, key: object, diag: Diagnostic, *more: object) -> None:
        """Report unless one of the keys (the causes it stands for) was reported already."""
        keys = (key, *more)
        if not any(k in self._seen for k in keys):
            self._seen.update(keys)
            self.diagnostics.append(diag)

    def finish(self) -> None:
        self.diagnostics.extend(d for pipe, d in self._stage_findings
                                if pipe not in self._reported_pipes)
        by_place: dict[int, Diagnostic] = {}
        for d in self.diagnostics:  # one finding per op: the first rule that saw it
            by_place.setdefault(d.span.start.offset, d)
        self.diagnostics = list(by_place.values())
        for (pipe, side), held in self.held.items():
            if held:
                closer = "commit" if side == "producer" else "release"
                op = held[0][1]
                self.protocol(pipe, op, f"the stage taken here is never given back with "
                              f"`{pipe}.{closer}()` by the end of {self.agent.label}")


def _param_of(op: Op, v: Value) -> str:
    return next((k for k, x in op.args.items() if x is v), "")


def _other(side: str) -> str:
    return "consumer" if side == "producer" else "producer"


def run_agents(facts: KernelFacts) -> list[AgentRun]:
    """Each agent's walk under the verifier's sizes.  An `if` on dims takes one side only
    under one set of sizes (a tail peeled by the parity of a trip count), so the agents are
    walked again with those dims one multiple larger, and what only that walk finds is
    reported too; the events that the multi-agent checks consume stay the first walk's."""
    runs = [AgentRun(facts, a).run() for a in facts.agents]
    alt = _other_side_sizes(facts)
    if alt is None:
        return runs
    seen = {(d.code, d.span.start.offset) for r in runs for d in r.diagnostics}
    for agent, r in zip(facts.agents, runs, strict=True):
        for d in AgentRun(facts, agent, sizes=alt).run().diagnostics:
            if (d.code, d.span.start.offset) not in seen:
                seen.add((d.code, d.span.start.offset))
                r.diagnostics.append(d)
    return runs


def _other_side_sizes(facts: KernelFacts) -> dict[str, int] | None:
    """`facts.sizes` with the dims that runtime `if`s test grown by one multiple (which
    flips a parity and keeps every loop at least as long), or None when no `if` tests one."""
    dims: dict[str, int] = {}
    for n in facts.kernel.walk():
        if isinstance(n, IfOp) and not n.elected:
            for leaf in condition_leaves(n.cond):
                if isinstance(leaf, SymExpr):
                    dims.update((a.name, a.multiple_of) for a in leaf.atoms()
                                if isinstance(a, Dim))
    grown = {f"${d}": facts.sizes[f"${d}"] + m for d, m in dims.items()
             if f"${d}" in facts.sizes}
    return {**facts.sizes, **grown} if grown else None


__all__ = ["AgentRun", "run_agents"]
