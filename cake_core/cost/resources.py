"""What one block occupies: shared memory (exact), registers per role (estimated), occupancy.

Shared memory is exact: it is the verifier's plan (`cake_core.verify.smem_plan`), the one
the lowering follows — every buffer aligned to its swizzle atom (1024 B for swizzle(128),
512 for 64, 256 for 32), plain buffers to 128 B for TMA, buffers by decreasing alignment,
then 8 bytes per mbarrier.  `smem_bytes(kernel)` is the one number to compare with ptxas's
report once kernels are lowered.

Registers are an estimate, always given with a range: the live accumulator fragments, the
operand staging fragments (ldmatrix / load results), the largest temporary, and an
addressing overhead.  A role's `regs=` (setmaxnreg) is its ceiling; nothing is allowed above.

Occupancy follows the CUDA occupancy calculator: blocks per SM limited by shared memory
(with the 1 KB the driver reserves per block and 128 B granularity), by registers (256 per
warp granularity), by warps and by the resident-block limit.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from cake_core.cost.record import PER_WARP_LAYOUTS
from cake_core.hardware import ArchSpec, get_arch
from cake_core.ir.kernel import Kernel, Op, Role, SmemAlloc, walk_nodes
from cake_core.ir.types import FragmentType, Type
from cake_core.primitives.traits import Trait
from cake_core.verify.smem_plan import smem_plan as verifier_plan

#: Alignment by swizzle span (the swizzle atom); plain buffers are 128-byte aligned for TMA.
SWIZZLE_ALIGN = {0: 128, 32: 256, 64: 512, 128: 1024}
BARRIER_BYTES = 8

#: Registers a role spends on addresses, loop counters, pipeline state and predicates.
OVERHEAD_LOW, OVERHEAD_MID, OVERHEAD_HIGH = 16, 24, 40
ALL_WARPS = "(all warps)"


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


# --- registers ----------------------------------------------------------------------------
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


# --- occupancy ------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Occupancy:
    blocks_per_sm: int
    limits: dict[str, int]
    """Blocks per SM allowed by each resource: smem, registers, warps, blocks."""
    limited_by: str
    smem_per_block: int
    """Shared memory the SM sets aside per block (with the reserved 1 KB, granular)."""
    regs_per_thread_launch: int
    regs_per_block: int


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
            "occupancy": {"blocks_per_sm": self.occupancy.blocks_per_sm,
                          "limited_by": self.occupancy.limited_by,
                          "limits": dict(self.occupancy.limits),
                          "smem_per_block": self.occupancy.smem_per_block,
                          "regs_per_thread_launch": self.occupancy.regs_per_thread_launch,
                          "regs_per_block": self.occupancy.regs_per_block},
            "warnings": list(self.warnings),
        }


def _launch_regs(kernel: Kernel, regs: dict[str, RegisterEstimate]) -> int:
    """Registers per thread at launch.  With setmaxnreg on every role the pool is split
    as the roles ask (the launch count is their warp-weighted mean, rounded down to 8);
    otherwise every thread gets the largest role's allocation."""
    covered = sum(r.warps for r in regs.values())
    if regs and all(r.ceiling is not None for r in regs.values()) and covered:
        total = sum(r.warps * r.allocated for r in regs.values())
        rest = kernel.warps - covered
        mean = (total + rest * max(r.allocated for r in regs.values())) / kernel.warps
        return max(24, int(mean) // 8 * 8)
    return max((r.allocated for r in regs.values()), default=OVERHEAD_MID)


def occupancy(kernel: Kernel, arch: ArchSpec, smem_total: int,
              regs: dict[str, RegisterEstimate]) -> Occupancy:
    gran = arch.smem_alloc_granularity
    smem_block = -(-(smem_total + arch.smem_reserved_per_block) // gran) * gran
    by_smem = 0 if smem_total > arch.smem_per_block_optin else arch.smem_per_sm // smem_block
    r_launch = min(arch.max_regs_per_thread, _launch_regs(kernel, regs))
    per_warp = -(-(r_launch * 32) // arch.reg_alloc_granularity) * arch.reg_alloc_granularity
    regs_block = per_warp * kernel.warps
    setmax = [(r.warps, r.ceiling) for r in regs.values() if r.ceiling is not None]
    if setmax:
        regs_block = max(regs_block, sum(warps * 32 * ceiling for warps, ceiling in setmax)
                         + sum(r.warps * 32 * r.allocated for r in regs.values()
                               if r.ceiling is None))
    by_regs = arch.regs_per_sm // regs_block if regs_block else arch.max_blocks_per_sm
    limits = {
        "smem": by_smem,
        "registers": by_regs,
        "warps": arch.max_warps_per_sm // max(1, kernel.warps),
        "blocks": arch.max_blocks_per_sm,
    }
    blocks = min(limits.values())
    limited_by = min(limits, key=lambda k: (limits[k], list(limits).index(k)))
    return Occupancy(blocks, limits, limited_by, smem_block, r_launch, regs_block)


def resource_report(kernel: Kernel, arch: ArchSpec) -> ResourceReport:
    """Shared memory, registers per role, per-role budgets and occupancy of one kernel."""
    plan = smem_plan(kernel, arch)
    roles: list[Role | None] = list(kernel.roles.values()) or [None]
    regs = {}
    for role in roles:
        est = estimate_registers(kernel, role, arch)
        regs[est.role] = est
    occ = occupancy(kernel, arch, plan.total, regs)
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
    if occ.blocks_per_sm == 0:
        warnings.append(f"no block fits on an SM (limited by {occ.limited_by})")
    return ResourceReport(kernel.name, arch.name, plan, regs, budgets, occ, warnings)


def waves(grid_blocks: int, sms: int, blocks_per_sm: int) -> float:
    """Grid blocks over the blocks resident at once on the whole GPU."""
    slots = sms * blocks_per_sm
    return grid_blocks / slots if slots else math.inf
