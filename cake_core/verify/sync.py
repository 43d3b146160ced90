"""The synchronization rules (CK3xx), cheapest first.

1. Structure: raw mbarrier initialisation (CK310) and the pipeline protocol on every
   path of every role (CK301, CK305), read from the IR without running anything.
2. Each agent's unrolled program on its own (`local.py`): stage spans, async groups,
   proxy fences, parity alternation, and the protocol where it depends on the iteration.
3. Raw mbarrier phase accounting: arrival counts and transaction bytes (`phases.py`).
4. All agents together (`deadlock.py`): deadlocks, parity drift, and races between roles.

A later stage runs only on a kernel the earlier ones found clean, so one bug gives one
finding: a missing `release()` is reported as such, not also as the deadlock it causes.
"""

from __future__ import annotations

from cake_core.diagnostics import codes
from cake_core.diagnostics.model import Diagnostic
from cake_core.ir.kernel import Kernel, Program
from cake_core.source import SourceFile
from cake_core.verify import cluster, deadlock, init_fence, phases, protocol
from cake_core.verify.facts import KernelFacts
from cake_core.verify.local import run_agents

#: Every code this pass may emit (tests/test_rule_codes.py holds it to that).
CODES = (codes.PIPELINE_PROTOCOL, codes.EXPECT_TX_MISMATCH, codes.ARRIVAL_COUNT_MISMATCH,
         codes.STAGE_ACCESS_OUTSIDE_SPAN, codes.CONSUMER_NEVER_RELEASES,
         codes.WGMMA_NOT_WAITED, codes.CP_ASYNC_NOT_WAITED, codes.SMEM_RACE,
         codes.MISSING_PROXY_FENCE, codes.BARRIER_INIT_NOT_VISIBLE, codes.DEADLOCK,
         codes.NAMED_BARRIER_COUNT, codes.NAMED_ARRIVE_ALONE,
         codes.PARITY_DRIFT, codes.BULK_SOURCE_OVERWRITTEN)


def check(program: Program, source: SourceFile) -> list[Diagnostic]:
    constants = {name: v.sym.const for name, v in program.constants.items()
                 if v.sym is not None and v.sym.const is not None}
    out: list[Diagnostic] = []
    for kernel in program.kernels:
        out.extend(check_kernel(kernel, source, constants))
    return out


def check_kernel(kernel: Kernel, source: SourceFile,
                 constants: dict[str, int] | None = None) -> list[Diagnostic]:
    facts = KernelFacts(kernel, source, constants or {})
    found = init_fence.check(facts) + cluster.check(facts)
    structural = protocol.check(facts)
    if structural:
        return found + structural
    runs = run_agents(facts)
    local = [d for r in runs for d in r.diagnostics]
    if local:
        return found + local
    if any(r.truncated for r in runs):
        return found
    counted = phases.check(facts, runs)
    if counted:
        return found + counted
    return found + deadlock.run(facts, runs)
