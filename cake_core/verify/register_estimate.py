"""The register estimate: how many 32-bit registers per thread a role needs, before ptxas.

One estimate serves the resource table (`cake check --resources`), the cost model's
occupancy (`cake cost`) and the check of ptxas's report (`cake compile`): it is the sum of
the live accumulator fragments, the operand staging fragments (ldmatrix / load results),
the largest temporary and an addressing overhead, given with a range.  Against ptxas on
every example and every tactic output it is within 0.98x..1.27x (docs/cost.md), which is
why the occupancy uses it rather than waiting for ptxas.  A role's `regs=` (setmaxnreg) is
its ceiling; nothing is allowed above.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from cake_core.hardware import ArchSpec
from cake_core.ir.kernel import Kernel, Op, Role, walk_nodes
from cake_core.ir.types import FragLayout, FragmentType, Type
from cake_core.primitives.traits import Trait

#: Fragment layouts owned by one warp: an op on them runs once per warp of its role.
PER_WARP_LAYOUTS = frozenset({FragLayout.MMA_A, FragLayout.MMA_B, FragLayout.MMA_ACC})

#: Registers a role spends on addresses, loop counters, pipeline state and predicates.
OVERHEAD_LOW, OVERHEAD_MID, OVERHEAD_HIGH = 16, 24, 40
ALL_WARPS = "(all warps)"


@dataclass(frozen=True, slots=True)
class RegisterEstimate:
    """Registers per thread of one role: an estimate inside [low, high]."""

    role: str
    warps: int
    estimate: int
    low: int
    high: int
    ceiling: int | None
    """The role's `regs=` (setmaxnreg) when given."""
    accumulators: int
    staging: int
    temporaries: int

    @property
    def allocated(self) -> int:
        """What the role holds at run time: its setmaxnreg value, else the estimate
        rounded up to the allocation unit of 8 registers per thread."""
        if self.ceiling is not None:
            return self.ceiling
        return min(255, -(-self.estimate // 8) * 8)

    @property
    def spill_risk(self) -> bool:
        return self.ceiling is not None and self.low > self.ceiling


def fragment_regs(t: Type, threads: int) -> int:
    """32-bit registers per thread that a fragment takes in a group of `threads`."""
    if not isinstance(t, FragmentType):
        return 0
    n = 1
    for d in t.shape:
        c = d.const
        if c is None:
            return 0
        n *= c
    sharers = 32 if t.layout in PER_WARP_LAYOUTS else max(1, threads)
    return max(1, math.ceil(n * t.dtype.bits / 32 / sharers))


def _role_ops(kernel: Kernel, role: Role | None) -> list[Op]:
    nodes = role.body if role is not None else kernel.body
    return [n for n in walk_nodes(nodes) if isinstance(n, Op)]


def estimate_registers(kernel: Kernel, role: Role | None, arch: ArchSpec) -> RegisterEstimate:
    """Accumulators + operand staging + the largest temporary + addressing overhead."""
    warps = role.warps if role is not None else kernel.warps
    threads = warps * 32
    acc = staging_sum = staging_max = temp_max = 0
    for op in _role_ops(kernel, role):
        regs = sum(fragment_regs(r.type, threads) for r in op.results)
        if not regs:
            continue
        if Trait.ALLOCATES_FRAGMENT in op.prim.traits:
            acc += regs
        elif Trait.REGISTER_STAGING in op.prim.traits:
            staging_sum += regs
            staging_max = max(staging_max, regs)
        else:
            temp_max = max(temp_max, regs)
    cap = min(arch.max_regs_per_thread, role.regs if role and role.regs else 255)
    low = min(cap, acc + staging_max + OVERHEAD_LOW)
    est = acc + staging_sum + temp_max + OVERHEAD_MID
    high = acc + staging_sum + 2 * temp_max + OVERHEAD_HIGH
    ceiling = role.regs if role is not None else None
    return RegisterEstimate(role.name if role is not None else ALL_WARPS, warps,
                            min(est, cap), low, min(high, max(cap, low)), ceiling, acc,
                            staging_sum, temp_max)


def role_estimates(kernel: Kernel, arch: ArchSpec) -> dict[str, RegisterEstimate]:
    """The estimate of every role, or of the whole kernel under ALL_WARPS without roles."""
    roles: list[Role | None] = list(kernel.roles.values()) or [None]
    return {e.role: e for e in (estimate_registers(kernel, r, arch) for r in roles)}


def kernel_estimate(estimates: dict[str, RegisterEstimate]) -> int:
    """Registers per thread ptxas gives every thread without setmaxnreg: one count for the
    whole kernel, so the largest role's."""
    return max((e.estimate for e in estimates.values()), default=OVERHEAD_MID)
