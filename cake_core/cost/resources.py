"""What one block occupies: shared memory (exact), registers per role (estimated), occupancy.

Shared memory is exact: it is the verifier's plan (`cake_core.verify.smem_plan`), the one
the lowering follows — every buffer aligned to its swizzle atom (1024 B for swizzle(128),
512 for 64, 256 for 32), plain buffers to 128 B for TMA, buffers by decreasing alignment,
then 8 bytes per mbarrier.  `smem_bytes(kernel)` is the one number to compare with ptxas's
report once kernels are lowered.

Registers and occupancy are the verifier's (`cake_core.verify.register_estimate` and
`cake_core.verify.registers`), the ones `cake check --resources` prints and `cake compile`
checks against ptxas, so the three commands never disagree; this module adds the per-role
budgets and the warnings the cost report shows.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from cake_core.hardware import ArchSpec, get_arch
from cake_core.ir.kernel import Kernel, SmemAlloc
from cake_core.verify.register_estimate import RegisterEstimate, role_estimates
from cake_core.verify.registers import Occupancy, occupancy
from cake_core.verify.smem_plan import smem_plan as verifier_plan

#: Alignment by swizzle span (the swizzle atom); plain buffers are 128-byte aligned for TMA.
SWIZZLE_ALIGN = {0: 128, 32: 256, 64: 512, 128: 1024}
BARRIER_BYTES = 8



# --- shared memory ----------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class SmemSlot:
    name: str
    kind: str  # "buffer" | "barrier"
    offset: int
    nbytes: int
    align: int
    padding: int
    """Bytes skipped before this slot to reach its alignment."""


@dataclass(frozen=True, slots=True)
class SmemPlan:
    slots: tuple[SmemSlot, ...]
    total: int
    source: str  # which module laid it out

    @property
    def padding(self) -> int:
        return sum(s.padding for s in self.slots)


def _align(alloc: SmemAlloc) -> int:
    if alloc.kind == "barrier":
        return BARRIER_BYTES
    swizzle = alloc.layout.swizzle if alloc.layout is not None else 0
    return max(SWIZZLE_ALIGN.get(swizzle, 128), alloc.align)


def own_smem_plan(kernel: Kernel) -> SmemPlan:
    """The fallback when the verifier's plan is not importable: buffers by decreasing
    alignment (declaration order among equals), then the barriers, each at the next
    multiple of its alignment."""
    order = sorted(enumerate(kernel.smem),
                   key=lambda ia: (ia[1].kind == "barrier", -_align(ia[1]), ia[0]))
    slots: list[SmemSlot] = []
    cursor = 0
    for _, a in order:
        align = _align(a)
        offset = -(-cursor // align) * align
        slots.append(SmemSlot(a.name, a.kind, offset, a.nbytes, align, offset - cursor))
        cursor = offset + a.nbytes
    return SmemPlan(tuple(slots), cursor, "cake_core.cost.resources")


def smem_plan(kernel: Kernel, arch: ArchSpec | None = None) -> SmemPlan:
    """The exact plan: the verifier's (`cake_core.verify.smem_plan`), which the lowering
    follows, or the local fallback for an arch the hardware table does not know."""
    spec = arch or get_arch(kernel.arch)
    if spec is None:
        return own_smem_plan(kernel)
    plan = verifier_plan(kernel, spec)
    slots = tuple(SmemSlot(p.name, p.kind, p.offset, p.nbytes, p.align, p.padding)
                  for p in plan.placements)
    return SmemPlan(slots, plan.total, "cake_core.verify.smem_plan")


def smem_bytes(kernel: Kernel) -> int:
    """Dynamic shared memory of one block, exact: compare with ptxas's `smem` figure."""
    return smem_plan(kernel).total


@dataclass(frozen=True, slots=True)
class RoleBudget:
    """One role's share of the block: warps, registers per thread and in total."""

    role: str
    warps: int
    regs_per_thread: int
    regs_total: int
    setmaxnreg: bool


@dataclass(slots=True)
class ResourceReport:
    kernel: str
    arch: str
    smem: SmemPlan
    registers: dict[str, RegisterEstimate]
    budgets: list[RoleBudget]
    occupancy: Occupancy
    warnings: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, object]:
        return {
            "smem_bytes": self.smem.total,
            "smem_padding": self.smem.padding,
            "smem_source": self.smem.source,
            "smem_slots": [{"name": s.name, "kind": s.kind, "offset": s.offset,
                            "bytes": s.nbytes, "align": s.align} for s in self.smem.slots],
            "registers": {name: {"warps": r.warps, "estimate": r.estimate, "low": r.low,
                                 "high": r.high, "ceiling": r.ceiling,
                                 "allocated": r.allocated}
                          for name, r in self.registers.items()},
            "occupancy": {"blocks_per_sm": self.occupancy.blocks,
                          "limited_by": self.occupancy.limited_by,
                          "limits": self.occupancy.limits,
                          "smem_per_block": self.occupancy.smem_per_block,
                          "regs_per_thread_launch": self.occupancy.regs_per_thread,
                          "regs_per_block": self.occupancy.regs_per_block},
            "warnings": list(self.warnings),
        }


def resource_report(kernel: Kernel, arch: ArchSpec) -> ResourceReport:
    """Shared memory, registers per role, per-role budgets and occupancy of one kernel."""
    plan = smem_plan(kernel, arch)
    regs = role_estimates(kernel, arch)
    occ = occupancy(kernel, arch, plan.total, estimates=regs)
    budgets = [RoleBudget(r.role, r.warps, r.allocated, r.warps * 32 * r.allocated,
                          r.ceiling is not None) for r in regs.values()]
    warnings: list[str] = []
    if plan.total > arch.smem_per_block_optin:
        warnings.append(f"{plan.total} B of shared memory exceeds the {arch.name} limit of "
                        f"{arch.smem_per_block_optin} B per block")
    for r in regs.values():
        if r.spill_risk:
            warnings.append(f"role {r.role!r}: at least ~{r.low} registers per thread are "
                            f"live but regs={r.ceiling}; expect spills")
    pool = sum(b.regs_total for b in budgets)
    if pool > arch.regs_per_sm:
        warnings.append(f"the roles ask for {pool} registers, more than the "
                        f"{arch.regs_per_sm} of an SM")
    if occ.blocks == 0:
        warnings.append(f"no block fits on an SM (limited by {occ.limited_by})")
    return ResourceReport(kernel.name, arch.name, plan, regs, budgets, occ, warnings)


def waves(grid_blocks: int, sms: int, blocks_per_sm: int) -> float:
    """Grid blocks over the blocks resident at once on the whole GPU."""
    slots = sms * blocks_per_sm
    return grid_blocks / slots if slots else math.inf
