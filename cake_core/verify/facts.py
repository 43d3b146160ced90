"""What the synchronization rules share about one kernel, computed once.

The pipelines and raw barriers it declares, which pipeline fills each staged buffer,
its agents, the concrete sizes its loops are unrolled with, and the effects of every op.
Also the small text-edit helpers the rules' fixes are built from.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from cake_core.diagnostics.model import TextEdit
from cake_core.ir.kernel import Kernel, Op
from cake_core.ir.types import BarrierType, PipelineType, StageType
from cake_core.primitives.traits import Trait
from cake_core.source import SourceFile, Span
from cake_core.verify.effects import Effects, Views, effects_of
from cake_core.verify.unroll import Agent, Env, agents_of, concrete_sizes, loop_vars_of


@dataclass
class KernelFacts:
    kernel: Kernel
    source: SourceFile
    constants: dict[str, int] = field(default_factory=dict)
    """The file's top-level int constants, to write fixes with their names."""
    agents: list[Agent] = field(init=False)
    sizes: Env = field(init=False)
    views: Views = field(init=False)
    pipelines: dict[str, PipelineType] = field(init=False)
    pipeline_ops: dict[str, Op] = field(init=False)
    barriers: dict[str, tuple[BarrierType, Op]] = field(init=False)
    loop_vars: set[str] = field(init=False)
    owner: dict[str, str] = field(init=False)
    """Staged buffer -> the pipeline whose stages index it (where its producer writes)."""
    _effects: dict[int, Effects] = field(init=False, default_factory=dict)

    def __post_init__(self) -> None:
        k = self.kernel
        self.agents = agents_of(k)
        self.sizes = concrete_sizes(k)
        self.views = Views(k)
        self.pipelines, self.pipeline_ops, self.barriers = {}, {}, {}
        for op in k.ops():
            for r in op.results:
                if isinstance(r.type, PipelineType):
                    self.pipelines[r.type.name] = r.type
                    self.pipeline_ops[r.type.name] = op
                elif isinstance(r.type, BarrierType) and \
                        Trait.ALLOCATES_BARRIER in op.prim.traits:
                    self.barriers[r.type.name] = (r.type, op)
        self.owner = self._owners()
        self.loop_vars = loop_vars_of(k.body)

    def effects(self, op: Op) -> Effects:
        e = self._effects.get(id(op))
        if e is None:
            e = self._effects[id(op)] = effects_of(op)
        return e

    def agent(self, role: str | None) -> Agent | None:
        return next((a for a in self.agents if a.role is not None and a.name == role), None)

    def _owners(self) -> dict[str, str]:
        votes: Counter[tuple[str, str]] = Counter()
        for op in self.kernel.ops():
            eff = self.effects(op)
            weighted = [*((w, 3) for w in eff.smem_writes), *((r, 1) for r in eff.smem_reads)]
            for v, weight in weighted:
                for s in self.views.ref(v).stage:
                    st = s.type
                    if not isinstance(st, StageType):
                        continue
                    bonus = 2 if st.side == "producer" else 0
                    votes[(self.views.ref(v).buffer, st.pipeline)] += weight + bonus
        best: dict[str, tuple[int, str]] = {}
        for (buf, pipe), n in votes.items():
            if buf not in best or n > best[buf][0]:
                best[buf] = (n, pipe)
        return {buf: pipe for buf, (_, pipe) in best.items()}

    # -- text edits ------------------------------------------------------------------------
    def indent_of(self, span: Span) -> str:
        line = self.source.line_text(span.start.line)
        return line[: len(line) - len(line.lstrip())]

    def insert_before(self, span: Span, text: str) -> TextEdit:
        """A new line with `text` just above the statement at `span`, indented like it."""
        start = span.start.offset - span.start.col_byte
        return TextEdit(self.source.span(start, start), f"{self.indent_of(span)}{text}\n")

    def insert_after(self, span: Span, text: str, indent_like: Span | None = None) -> TextEdit:
        """A new line with `text` just below the statement at `span`."""
        line = span.end.line
        start = span.end.offset - span.end.col_byte
        end = start + len(self.source.line_text(line).encode("utf-8"))
        if self.source.data[end:end + 2] == b"\r\n":
            end += 2
        elif self.source.data[end:end + 1] == b"\n":
            end += 1
        else:
            return TextEdit(self.source.span(end, end),
                            f"\n{self.indent_of(indent_like or span)}{text}")
        return TextEdit(self.source.span(end, end),
                        f"{self.indent_of(indent_like or span)}{text}\n")

    def text(self, span: Span) -> str:
        return self.source.snippet(span)

    def spell(self, value: int) -> str:
        """`value` as the one top-level constant that holds it, else as a number."""
        names = [n for n, v in self.constants.items() if v == value]
        return names[0] if len(names) == 1 else str(value)

    def free_named_barrier(self) -> int | None:
        """A named barrier id (1-15; 0 is `__syncthreads`'s) no op of the kernel uses: what
        a fix that makes a role's warps meet can take without colliding with the kernel's
        own barriers; None when all are taken."""
        used = {b[1] for o in self.kernel.ops() if (b := effects_of(o).barrier) is not None}
        return next((i for i in range(1, 16) if i not in used), None)
