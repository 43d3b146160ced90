"""The CPU simulator: runs a kernel's IR semantics in numpy and checks it dynamically.

Without a GPU this is how a person or an agent learns whether a kernel computes the
right thing; it is also the reference the CUDA lowering is tested against.  It executes
the IR, never generated CUDA.

Model
-----
- Each block is simulated on its own.  Its roles run as interleaved *processes*: one per
  role, or one per warp (warpgroup) when the role's code reads `warp.id` (`warpgroup.id`).
  A condition on `lane.id` or `thread.id` splits no process: it is evaluated thread by
  thread and each branch runs with the threads that took it (`lanes.py`).
  Fragments belong to a process and are whole numpy arrays of their logical shape (a
  wgmma accumulator of a two-warpgroup role is one (BM, BN) array).
- Shared memory is one byte array per block; buffers sit where the smem plan puts them
  and every element is addressed through its buffer's layout, swizzle included
  (`layout.py`).  Global tensors are numpy arrays in storage form; tiles are zero-filled
  on loads and clipped on stores.
- TMA copies, cp.async copies, wgmma groups and bulk stores are asynchronous: issued by
  a process, completed when the schedule decides (`schedule.py`).  mbarriers have real
  phases, arrival counts and transaction bytes; pipelines own full/empty barrier pairs.
- Dynamic checks become `Diagnostic`s with CK5xx codes: data races by happens-before
  (vector clocks, `races.py`), deadlocks, parity drift on raw mbarriers, out-of-bounds
  accesses, reads of uninitialised smem, reads of unfinished wgmma accumulators,
  barrier misuse and work left in flight at exit.

Facet calling convention
------------------------
Every primitive names its simulate facet, `Primitive.facet("simulate")`; built-ins live in
`cake_core.ops.<family>.sim` (e.g. `Lazy("cake_core.ops.sync.sim:pipeline_acquire")`),
and a primitive the simulator cannot run says so with `Unsupported(why)`.  A facet is

    fn(op: Op, ctx: SimContext) -> None | value | tuple[value, ...] | Blocked

- `ctx` (`context.py`) is bound to the running process: `ctx.arg/int/view/tile/frag/
  operand/barrier/pipeline(op, name)` read arguments; `ctx.smem_read/smem_write/
  global_read/global_write` move bits with the checks; `ctx.issue(kind, channel, op,
  complete)` starts asynchronous work; `ctx.leader(op)` says whether this process is the
  op's elected issuer; `ctx.report(rule, span, message)` adds a finding.
- The return value binds the op's result (a tuple for several results): a `Fragment`,
  an `SmemView`, a `TileRef`, an int (a pipeline stage), a barrier or pipeline object.
- `Blocked(reason, ready)` means "cannot proceed yet": the process yields it and the
  facet is called again, from the start, once `ready()` holds.  So a facet checks
  readiness before changing anything, or keeps its progress in `ctx.proc.retry`.

Entry points
------------
    sk = SimKernel.from_file("examples/gemm_sm90.cake")
    result = simulate(sk, {"M": 256, "N": 256, "K": 128}, {"A": a, "B": b})
    result.outputs["C"], result.diagnostics

`run_schedules` runs several schedules; `cake_core.sim.tasks_run` compares with a task's
reference (what `cake run --sim` does).
"""

from __future__ import annotations

from cake_core.sim.context import SimContext
from cake_core.sim.engine import SimResult, simulate
from cake_core.sim.program import SimKernel, SimSetupError
from cake_core.sim.schedule import Adversarial, RoundRobin, Schedule, Seeded, schedules
from cake_core.sim.state import Blocked, Fragment


def run_schedules(sk: SimKernel, dims: dict[str, int], inputs: dict, n: int = 1,
                  seed: int = 0, blocks: list[tuple[int, ...]] | None = None
                  ) -> list[SimResult]:
    """One launch under each of the first `n` schedules (see `schedule.schedules`)."""
    roles = list(sk.kernel.roles)
    return [simulate(sk, dims, inputs, schedule=s, blocks=blocks)
            for s in schedules(n, seed, roles)]


__all__ = ["Adversarial", "Blocked", "Fragment", "RoundRobin", "Schedule", "Seeded",
           "SimContext", "SimKernel", "SimResult", "SimSetupError", "run_schedules",
           "schedules", "simulate"]
