"""How long a TMA load keeps the kernel waiting: read off where its completion is waited.

A pipeline declares its depth, but the depth is only used if the loads run ahead of the
waits; a raw mbarrier declares nothing.  The overlap is in the kernel's structure,
namely where the issuing role waits relative to the load:

- a wait later in the same loop iteration for the copy just issued (the same raw
  barrier, or the same pipeline with no stages filled before the loop): every iteration
  waits for its own copy and the round trip is exposed each time (`SERIAL`).  This is
  the single-buffered load -> wait -> compute loop, and the one-role pipeline whose
  role acquires, loads, commits and waits for the same stage;
- a pipeline whose copies run ahead of their waits (another role waits, or the role
  filled stages before the loop): `stages - 1` copies in flight (`PIPELINED`);
- a raw barrier waited inside the loop for an earlier copy (another element of a
  barrier array, or a wait before the load), or waited inside a loop by another role:
  the copy overlaps the work up to its wait, one barrier of the array per copy in flight
  (`PIPELINED`, depth `n - 1` for an array of `n`, at least 1);
- a raw barrier never waited inside the loop that issues it (a tile loaded up front,
  possibly in chunks by a short loop, and waited once): one round trip per block
  (`ONCE`).
"""

from __future__ import annotations

from dataclasses import dataclass

from cake_core.cost.record import ONCE, PIPELINED, SERIAL
from cake_core.ir.kernel import ForOp, IfOp, Kernel, Node, Op, Role
from cake_core.ir.types import BarrierType, PipelineType
from cake_core.ir.values import ViewOrigin
from cake_core.primitives.traits import Trait

Exposure = tuple[str, int]
"""(latency class, loads in flight) as in `GlobalAccess.latency` / `GlobalAccess.depth`."""


@dataclass(frozen=True, slots=True)
class _Event:
    op: Op
    loops: tuple[int, ...]
    """id() of the enclosing loops, outermost first."""
    order: int
    role: str | None
    key: tuple[str, str]
    n: int
    """Barriers in the array, or stages of the pipeline."""
    pipeline: bool


def barrier_key(value: object) -> tuple[str, str] | None:
    """(barrier or pipeline name, index text) of a synchronisation value, else None.

    Elements of a raw-barrier array indexed by the same expression are the same barrier;
    the text of the index stands for the expression (two spellings of one index count as
    two).  A pipeline is one key: its stages rotate on their own.
    """
    t = getattr(value, "type", None)
    if isinstance(t, PipelineType):
        return t.name, ""
    if not isinstance(t, BarrierType):
        return None
    origin = getattr(value, "const", None)
    if not isinstance(origin, ViewOrigin):
        return t.name, ""
    parts = [str(i.sym) if i.sym is not None else i.name for i in origin.index]
    return t.name, ",".join(parts)


def load_exposure(kernel: Kernel) -> dict[int, Exposure]:
    """id(tma_load op) -> how its latency is exposed."""
    loads: list[_Event] = []
    waits: list[_Event] = []
    counter = 0

    def visit(nodes: list[Node], loops: tuple[int, ...], role: str | None) -> None:
        nonlocal counter
        for n in nodes:
            if isinstance(n, Role):
                visit(n.body, loops, n.name)
            elif isinstance(n, ForOp):
                visit(n.body, (*loops, id(n)), role)
            elif isinstance(n, IfOp):
                visit(n.then, loops, role)
                visit(n.orelse, loops, role)
            elif isinstance(n, Op):
                counter += 1
                arg, is_load = _signal_arg(n)
                v = n.args.get(arg) if arg else None
                key = barrier_key(v)
                if v is None or key is None:
                    continue
                t = v.type
                pipe = isinstance(t, PipelineType)
                count = t.stages if isinstance(t, PipelineType) else \
                    t.n if isinstance(t, BarrierType) else 1
                ev = _Event(n, loops, counter, n.role or role, key, count, pipe)
                (loads if is_load else waits).append(ev)

    visit(kernel.body, (), None)
    return {id(ld.op): _exposure(ld, loads, waits) for ld in loads}


def _signal_arg(op: Op) -> tuple[str | None, bool]:
    """The barrier argument a TMA copy signals its bytes on (True), or the one an op
    waits on for data (False): a consumer's pipeline wait or a raw barrier wait, not a
    producer's wait for an empty stage."""
    spec = op.prim.effects
    if Trait.TMA_COPY in op.prim.traits and spec.arrives is not None:
        return spec.arrives, True
    consumer = spec.pipe_action is None or spec.pipe_action.side == "consumer"
    if spec.waits is not None and spec.waits in op.args and consumer:
        return spec.waits, False
    return None, False


def _exposure(load: _Event, loads: list[_Event], waits: list[_Event]) -> Exposure:
    name = load.key[0]
    same = [w for w in waits if w.key[0] == name]
    loop = load.loops[-1] if load.loops else None
    in_loop = [w for w in same if loop is not None and w.role == load.role and loop in w.loops]
    waited_next = [w for w in in_loop if w.key == load.key and w.order > load.order]
    if load.pipeline:
        ahead = any(ld.key[0] == name and ld.role == load.role and ld.order < load.order
                    and loop not in ld.loops for ld in loads)
        if load.n > 1 and (not waited_next or ahead):
            return PIPELINED, load.n - 1
        return SERIAL, 0
    if loop is None:
        return ONCE, 0
    if waited_next:
        return SERIAL, 0
    depth = max(1, load.n - 1)
    if in_loop or any(w.role != load.role and w.loops for w in same):
        return PIPELINED, depth
    return ONCE, 0
