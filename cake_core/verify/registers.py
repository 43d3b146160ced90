"""The register budget of a block and how many blocks fit on one SM.

Model (the lowering emits `__launch_bounds__(threads, 1)`):
- At launch every thread gets the launch-bound ceiling R = min(255, 65536 / threads
  rounded down to a multiple of 8): with `setmaxnreg` in the kernel, ptxas compiles the
  kernel to exactly that ceiling, and the hardware reserves R x threads registers for the
  block.  That reservation is the block's register pool.
- `role(..., regs=n)` lowers to `setmaxnreg.dec/inc n` at the top of the role: a role
  below R gives registers back to the pool, a role above R takes them from it, and
  `setmaxnreg.inc` blocks until the pool has them.  Warps in a role without `regs=` and
  warps in no role keep R.
- So after every role has run its setmaxnreg the block holds
  sum(warps x 32 x regs) registers; more than the pool and the inc never returns (the
  kernel hangs; ptxas accepts it silently).  The pool times the resident blocks never
  exceeds the 64K register file, so a split that fits the pool fits the SM.
Allocation is per warp in units of 256 registers, i.e. per thread in multiples of 8.
"""

from __future__ import annotations

from dataclasses import dataclass

from cake_core.hardware import ArchSpec
from cake_core.ir.kernel import Kernel
from cake_core.verify.register_estimate import (
    RegisterEstimate,
    kernel_estimate,
    role_estimates,
)

REGS_STEP = 8
SETMAXNREG_MIN = 24
SETMAXNREG_MAX = 256


def round_up(x: int, step: int) -> int:
    return -(-x // step) * step


def launch_registers(threads: int, arch: ArchSpec) -> int:
    """The per-thread register ceiling under `__launch_bounds__(threads, 1)`."""
    per_thread = arch.regs_per_sm // max(threads, 1) // REGS_STEP * REGS_STEP
    return min(arch.max_regs_per_thread, per_thread)


def allocated(regs: int, arch: ArchSpec) -> int:
    """Registers per thread the hardware actually reserves for a per-thread count."""
    per_warp = round_up(regs * 32, arch.reg_alloc_granularity)
    return per_warp // 32


def legal_regs(n: int) -> bool:
    return n % REGS_STEP == 0 and SETMAXNREG_MIN <= n <= SETMAXNREG_MAX


def nearest_legal_regs(n: int) -> int:
    """The closest count setmaxnreg accepts (ties round down: fewer registers is safer)."""
    legal = range(SETMAXNREG_MIN, SETMAXNREG_MAX + 1, REGS_STEP)
    return min(legal, key=lambda c: (abs(c - n), c))


@dataclass(frozen=True, slots=True)
class RoleRegisters:
    name: str
    warp_start: int
    warp_stop: int
    regs: int
    """Per-thread registers after the role's setmaxnreg (the launch ceiling without one)."""
    declared: bool

    @property
    def warps(self) -> int:
        return self.warp_stop - self.warp_start

    @property
    def registers(self) -> int:
        return self.warps * 32 * self.regs


@dataclass(frozen=True, slots=True)
class RegisterBudget:
    launch_regs: int
    threads: int
    roles: tuple[RoleRegisters, ...]
    idle_warps: int
    launch_alloc: int

    @property
    def pool(self) -> int:
        """Registers reserved for the block at launch."""
        return self.launch_alloc * self.threads

    @property
    def demand(self) -> int:
        """Registers the block holds once every role has run its setmaxnreg."""
        return sum(r.registers for r in self.roles) + self.idle_warps * 32 * self.launch_alloc

    @property
    def uses_setmaxnreg(self) -> bool:
        return any(r.declared for r in self.roles)

    @property
    def fits(self) -> bool:
        return self.demand <= self.pool


def register_budget(kernel: Kernel, arch: ArchSpec) -> RegisterBudget:
    launch = launch_registers(kernel.threads, arch)
    alloc = allocated(launch, arch)
    roles = tuple(
        RoleRegisters(r.name, r.warp_start, r.warp_stop,
                      r.regs if r.regs is not None else alloc, r.regs is not None)
        for r in sorted(kernel.roles.values(), key=lambda r: r.warp_start))
    idle = kernel.warps - sum(r.warps for r in roles)
    return RegisterBudget(launch, kernel.threads, roles, max(idle, 0), alloc)


@dataclass(frozen=True, slots=True)
class Occupancy:
    """Resident blocks per SM allowed by each resource; the smallest one wins.

    The one occupancy of the project: the resource table, the cost model and the build
    report all read it.  With setmaxnreg the register limit is exact (the launch pool);
    without it, it rests on the register estimate (`register_estimate`), since ptxas's
    count is known only after compiling.
    """

    by_smem: int
    by_registers: int
    by_warps: int
    by_blocks: int
    smem_per_block: int
    """Shared memory the SM sets aside per block (granular, with the driver's reserve)."""
    regs_per_thread: int
    """Registers per thread at launch, as allocated."""
    regs_per_block: int

    @property
    def limits(self) -> dict[str, int]:
        return {"smem": self.by_smem, "registers": self.by_registers,
                "warps": self.by_warps, "blocks": self.by_blocks}

    @property
    def blocks(self) -> int:
        return min(self.limits.values())

    @property
    def limited_by(self) -> str:
        """The key of the binding limit (the first one on a tie)."""
        limits = self.limits
        return min(limits, key=lambda k: limits[k])

    @property
    def limiter(self) -> str:
        return LIMIT_NAMES[self.limited_by]

    def as_data(self) -> dict[str, object]:
        return {"blocks_per_sm": self.blocks, "by_smem": self.by_smem,
                "by_registers": self.by_registers, "by_warps": self.by_warps,
                "by_blocks": self.by_blocks, "limiter": self.limiter}


LIMIT_NAMES = {"smem": "shared memory", "registers": "registers", "warps": "warps",
               "blocks": "block slots"}


def occupancy(kernel: Kernel, arch: ArchSpec, smem_bytes: int,
              budget: RegisterBudget | None = None,
              estimates: dict[str, RegisterEstimate] | None = None) -> Occupancy:
    """Blocks per SM as the CUDA occupancy calculator counts them.  The register pool is
    the launch reservation with setmaxnreg, else the estimate for every thread."""
    budget = budget or register_budget(kernel, arch)
    per_block_smem = round_up(smem_bytes, arch.smem_alloc_granularity) + \
        arch.smem_reserved_per_block
    fits = smem_bytes <= arch.smem_per_block_optin
    by_smem = arch.smem_per_sm // per_block_smem if fits else 0
    if budget.uses_setmaxnreg:
        per_thread, pool = budget.launch_alloc, budget.pool
    else:
        need = kernel_estimate(estimates or role_estimates(kernel, arch))
        per_thread = allocated(min(arch.max_regs_per_thread, need), arch)
        pool = per_thread * 32 * kernel.warps
    by_regs = arch.regs_per_sm // pool if pool else arch.max_blocks_per_sm
    by_warps = arch.max_warps_per_sm // max(kernel.warps, 1)
    return Occupancy(by_smem, by_regs, by_warps, arch.max_blocks_per_sm, per_block_smem,
                     per_thread, pool)
