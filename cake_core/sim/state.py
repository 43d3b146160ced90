"""The runtime objects of a simulated block: processes, barriers, pipelines, copies, values.

Everything here is plain data with the smallest behaviour that keeps its invariants
(an mbarrier completes its phase itself when arrivals and transaction bytes reach zero);
what the primitives do with these objects lives in the facet modules.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Generator
from dataclasses import dataclass, field

import numpy as np

from cake_core.ir.kernel import Node, Op
from cake_core.ir.types import DType
from cake_core.sim.races import VC, Access, join
from cake_core.source import Span


@dataclass(slots=True)
class Blocked:
    """What a facet returns when its op cannot proceed yet.

    The process yields it to the scheduler, which resumes the process only once `ready()`
    holds; the facet is then called again from the start, so a facet checks readiness
    before it changes anything.
    """

    reason: str
    ready: Callable[[], bool]
    needs: Callable[[], list[AsyncOp]] | None = None
    """The asynchronous operations whose completion would let it go on, where the wait
    knows them: an adversarial schedule completes only those, and the newest first."""


# --- values --------------------------------------------------------------------------------
@dataclass(eq=False, slots=True)
class Fragment:
    """Registers of a process, held as one array of the fragment's logical shape.

    `pending` counts wgmma groups writing this accumulator that no `wgmma_wait` has
    retired yet: reading it meanwhile is undefined.  The groups accumulate into `shadow`
    (the tensor cores' copy) as they complete; `array` -- what other instructions read --
    takes the result only when the last of them is retired.
    """

    array: np.ndarray
    dtype: DType
    pending: int = 0
    shadow: np.ndarray | None = None
    read_pending: int = 0
    """wgmma groups in flight that read this fragment as their A operand from registers:
    re-binding its name meanwhile overwrites registers the tensor cores still read."""
    undefined: bool = False
    """Declared with `fill=None` and not written yet: the registers hold garbage (NaN
    here, so a read that slips past the checks still spoils the result)."""
    base: Fragment | None = None
    """For a column slice (`x[:, a:b]`), the fragment whose registers it renames: a wgmma
    reading the slice reads those registers."""


@dataclass(eq=False, slots=True)
class GlobalTensor:
    """A kernel tensor parameter in storage form (bf16 as uint16 bits, and so on)."""

    name: str
    dtype: DType
    shape: tuple[int, ...]
    data: np.ndarray
    writer: np.ndarray | None = None
    """Per element: index of the op that last wrote it (-1: never), for findings."""
    owner: np.ndarray | None = None
    """Per element: linear id of the block that wrote it (-1: none), for cross-block races."""

    def track_writes(self) -> None:
        if self.writer is None:
            self.writer = np.full(self.shape, -1, dtype=np.int32)
            self.owner = np.full(self.shape, -1, dtype=np.int32)


@dataclass(frozen=True, slots=True)
class TileRef:
    """`T.tile(shape, coords, offset=, limit=)`: a box of a global tensor, resolved when a
    copy uses it.  `offset` is added to the origin in elements; `limit` (exclusive, in the
    tensor's element coordinates) clips the box as the tensor's edge does."""

    tensor: GlobalTensor
    shape: tuple[int, ...]
    coords: tuple[int, ...]
    offset: tuple[int, ...] | None = None
    limit: tuple[int, ...] | None = None

    @property
    def origin(self) -> tuple[int, ...]:
        off = self.offset or (0,) * len(self.shape)
        return tuple(c * s + o for c, s, o in zip(self.coords, self.shape, off, strict=True))

    @property
    def bounds(self) -> tuple[int, ...]:
        """Where the box is clipped along each dimension: the tensor's extent, or the
        limit when it is tighter."""
        ext = self.tensor.shape
        if self.limit is None:
            return tuple(ext)
        return tuple(min(lim, e) for lim, e in zip(self.limit, ext, strict=True))

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape)) * self.tensor.dtype.bytes

    def describe(self) -> str:
        box = ", ".join(f"{o}:{o + s}" for o, s in zip(self.origin, self.shape, strict=True))
        return f"{self.tensor.name}[{box}]"


# --- barriers ------------------------------------------------------------------------------
class MBarrier:
    """An mbarrier: arrival count, transaction bytes, and completed phases.

    `completed` counts finished phases; the current phase's parity is `completed % 2`.
    A `try_wait.parity(p)` succeeds while `completed % 2 != p`.  Each finished phase keeps
    the joined clock of everything that arrived in it, which its waiters acquire.
    """

    __slots__ = (
        "completed",
        "count",
        "cur_vc",
        "init_comp",
        "init_epoch",
        "init_fenced",
        "label",
        "name",
        "pending",
        "phase_vcs",
        "raw",
        "reported",
        "span",
        "tx",
    )

    def __init__(self, name: str, label: str, count: int, span: Span, *, raw: bool) -> None:
        self.name = name
        self.label = label
        self.count = count
        self.span = span
        self.raw = raw
        self.pending = count
        self.tx = 0
        self.completed = 0
        self.cur_vc: VC = {}
        self.phase_vcs: dict[int, VC] = {}
        # who initialised a raw barrier, and whether it fenced the init (pipelines are
        # initialised by the lowering before any role runs)
        self.init_comp: int | None = None if raw else -1
        self.init_epoch = 0
        self.init_fenced = not raw
        self.reported = False

    def arrive(self, vc: VC, n: int = 1) -> bool:
        """Arrive `n` times; False when that is more arrivals than the phase expects."""
        join(self.cur_vc, vc)
        self.pending -= n
        ok = self.pending >= 0
        self._check()
        return ok

    def expect(self, nbytes: int) -> None:
        self.tx += nbytes

    def complete_tx(self, nbytes: int, vc: VC) -> None:
        join(self.cur_vc, vc)
        self.tx -= nbytes
        self._check()

    def _check(self) -> None:
        if self.pending <= 0 and self.tx == 0:
            self.phase_vcs[self.completed] = self.cur_vc
            self.phase_vcs.pop(self.completed - 4, None)
            self.completed += 1
            self.cur_vc = {}
            self.pending = self.count


@dataclass(eq=False, slots=True)
class PipelineRT:
    """A pipeline's barriers: full[s] (producer -> consumers), empty[s] (the way back)."""

    name: str
    stages: int
    full: list[MBarrier]
    empty: list[MBarrier]
    span: Span


@dataclass(eq=False, slots=True)
class PipeCursor:
    """One process's view of a pipeline: the stage and phase it expects next.

    The producer's empty-barrier parity starts at 1 (the first pass over the ring does not
    wait), the consumers' full-barrier parity at 0.  Stages taken by `acquire`/`wait`
    queue up until `commit`/`release` hands them on, in order.
    """

    acq_stage: int = 0
    acq_parity: int = 1
    wait_stage: int = 0
    wait_parity: int = 0
    acquired: deque[int] = field(default_factory=deque)
    waited: deque[int] = field(default_factory=deque)
    tx: dict[int, int] = field(default_factory=dict)


@dataclass(eq=False, slots=True)
class GroupBarrier:
    """`syncthreads` (id 0) or a named barrier: generations that release once `need`
    warps have arrived."""

    bid: int
    need: int
    arrived: int = 0
    exited: int = 0
    """Warps whose process finished: `syncthreads` counts them as arrived."""
    gen: int = 0
    vc: VC = field(default_factory=dict)
    released: dict[int, VC] = field(default_factory=dict)

    def arrive(self, warps: int, vc: VC) -> bool:
        join(self.vc, vc)
        self.arrived += warps
        ok = self.arrived <= self.need
        self.check()
        return ok

    def check(self) -> None:
        if self.arrived > 0 and self.arrived + self.exited >= self.need:
            self.released[self.gen] = self.vc
            self.released.pop(self.gen - 4, None)
            self.gen += 1
            self.arrived = 0
            self.vc = {}


# --- asynchronous work ---------------------------------------------------------------------
@dataclass(eq=False, slots=True)
class AsyncOp:
    """An issued copy or wgmma group that the scheduler completes later.

    `vc` is the issuing process's clock at issue plus this op's own component, so the
    op's memory accesses are ordered after everything the issuer did before, and nothing
    the issuer does afterwards is ordered after the op until a wait joins `vc`.
    """

    kind: str
    channel: tuple[object, ...]
    proc: Proc
    op: Op
    vc: VC
    comp: int
    complete: Callable[[AsyncOp], None]
    who: str
    done: bool = False
    target: Fragment | None = None
    """The accumulator a wgmma group writes (retired by wgmma_wait)."""
    operand: Fragment | None = None
    """The register A operand a wgmma group reads (released by wgmma_wait)."""

    @property
    def epoch(self) -> int:
        return self.vc[self.comp]


# --- processes -----------------------------------------------------------------------------
@dataclass(eq=False, slots=True)
class Proc:
    """One interleaved process: a role, or one warp (or warpgroup) of it when the role's
    code depends on `warp.id`."""

    index: int
    role: str | None
    warps: tuple[int, ...]
    label: str
    comp: int
    nodes: list[Node]
    env: dict[str, object] = field(default_factory=dict)
    vc: VC = field(default_factory=dict)
    synced: VC = field(default_factory=dict)
    """The clock at the last barrier where all of this process's warps met: what one
    elected thread's arrival can vouch for of their own work, since the warps do not run
    in lockstep."""
    touched: Op | None = None
    """The last op by which all of its warps used shared memory since they last met."""
    crew: set[int] = field(default_factory=set)
    """Components of the asynchronous work every warp issues (wgmma, cp.async)."""
    unsynced_arrival: Op | None = None
    leader_knows: list[VC] = field(default_factory=list)
    """Clocks of bulk stores its issuing thread waited for that the process's other warps
    have not learnt of yet: they join at the next barrier of the process's warps."""
    """An elected arrival made with accesses its other warps had not met over."""
    gen: Generator[Blocked | None, None, None] | None = None
    blocked: Blocked | None = None
    blocked_op: Op | None = None
    done: bool = False
    faulted: bool = False
    pipes: dict[str, PipeCursor] = field(default_factory=dict)
    cp_open: list[AsyncOp] = field(default_factory=list)
    cp_groups: list[list[AsyncOp]] = field(default_factory=list)
    wgmma: list[AsyncOp] = field(default_factory=list)
    bulk: list[AsyncOp] = field(default_factory=list)
    unfenced: list[Access] = field(default_factory=list)
    mbar_seen: dict[tuple[str, int], tuple[int, int]] = field(default_factory=dict)
    retry: dict[int, object] = field(default_factory=dict)
    agents: dict[tuple[object, ...], int] = field(default_factory=dict)
    ops: int = 0
    lanes: np.ndarray | None = None
    """The threads running the code at hand, shape (warps, 32); None: all of them
    (`lanes.py`)."""

    @property
    def epoch(self) -> int:
        return self.vc[self.comp]

    def tick(self) -> None:
        """Start a new epoch: called after every release, so later accesses are not
        ordered before whoever acquires what was just released."""
        self.vc[self.comp] += 1

    def cursor(self, pipe: str) -> PipeCursor:
        c = self.pipes.get(pipe)
        if c is None:
            c = self.pipes[pipe] = PipeCursor()
        return c
