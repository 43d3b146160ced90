"""The table of diagnostic codes: one `Rule` per code, like ruff's code table.

Every code has a stable identifier, a kebab-case name, a default severity, whether a fix
is always / sometimes / never offered, and a docs page `docs/rules/<CODE>.md` with a
failing and a passing example (a test checks that each page exists and has both).

Ranges:  CK0xx syntax, the accepted subset and suppression comments, CK1xx names and types,
CK2xx resources, CK3xx synchronization, CK4xx layouts and memory access,
CK5xx simulation findings, CK6xx compile findings, CK7xx GPU execution findings,
CK9xx faults inside the compiler or a plugin.
Plugins register their own codes with a prefix of their own (e.g. `KM101`).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from cake_core.diagnostics.model import (
    Diagnostic,
    Fix,
    Related,
    Severity,
)
from cake_core.source import Span


class FixAvailability(StrEnum):
    ALWAYS = "always"
    SOMETIMES = "sometimes"
    NONE = "none"


@dataclass(frozen=True, slots=True)
class Rule:
    code: str
    name: str
    summary: str
    severity: Severity = Severity.ERROR
    fix: FixAvailability = FixAvailability.NONE
    origin: str = "cake"

    def at(
        self,
        span: Span,
        message: str,
        *,
        related: tuple[Related, ...] | list[Related] = (),
        notes: tuple[str, ...] | list[str] = (),
        fixes: tuple[Fix, ...] | list[Fix] = (),
        severity: Severity | None = None,
        data: dict[str, object] | None = None,
    ) -> Diagnostic:
        """A diagnostic of this rule at `span`."""
        return Diagnostic(
            code=self.code,
            severity=severity or self.severity,
            message=message,
            span=span,
            related=tuple(related),
            notes=tuple(notes),
            fixes=tuple(fixes),
            source=self.origin,
            data=dict(data or {}),
        )


class DuplicateCodeError(ValueError):
    pass


_RULES: dict[str, Rule] = {}


def register(rule: Rule) -> Rule:
    """Add a code to the table; a code registered twice is an error, not a shadow."""
    if rule.code in _RULES and _RULES[rule.code] != rule:
        raise DuplicateCodeError(f"diagnostic code {rule.code} is already registered")
    _RULES[rule.code] = rule
    return rule


def lookup(code: str) -> Rule | None:
    return _RULES.get(code.upper())


def all_rules() -> list[Rule]:
    return sorted(_RULES.values(), key=lambda r: r.code)


def _builtin(code: str, name: str, summary: str, severity: Severity = Severity.ERROR,
             fix: FixAvailability = FixAvailability.NONE) -> Rule:
    return register(Rule(code, name, summary, severity, fix))


# --- CK0xx: syntax and the accepted subset ------------------------------------------
SYNTAX_ERROR = _builtin("CK001", "syntax-error", "The text is not valid CAKE IR syntax.",
                        fix=FixAvailability.SOMETIMES)
UNSUPPORTED_SYNTAX = _builtin(
    "CK002", "unsupported-construct",
    "A Python construct outside the CAKE IR subset (while, lambda, import, class, ...).",
    fix=FixAvailability.SOMETIMES)
INVALID_ENCODING = _builtin("CK003", "invalid-encoding",
                            "The file is not valid UTF-8 or contains NUL characters.")
NO_KERNEL = _builtin("CK004", "no-kernel", "The file defines no @kernel function.",
                     severity=Severity.WARNING)
INVALID_TOPLEVEL = _builtin(
    "CK005", "invalid-top-level",
    "Only constants, dim() declarations and @kernel functions may appear at top level.")
UNUSED_SUPPRESSION = _builtin(
    "CK006", "unused-suppression",
    "A `# cake: ignore` comment, or a code in one, that suppresses no finding.",
    severity=Severity.WARNING, fix=FixAvailability.ALWAYS)

# --- CK1xx: names and types ---------------------------------------------------------
UNKNOWN_NAME = _builtin("CK101", "unknown-name", "A name that is not defined in scope.",
                        fix=FixAvailability.SOMETIMES)
UNKNOWN_PRIMITIVE = _builtin("CK102", "unknown-primitive",
                             "A call to something that is not a CAKE primitive.",
                             fix=FixAvailability.SOMETIMES)
BAD_ARGUMENTS = _builtin("CK103", "bad-arguments",
                         "Missing, extra or unknown arguments to a primitive.",
                         fix=FixAvailability.SOMETIMES)
TYPE_MISMATCH = _builtin("CK104", "type-mismatch",
                         "An argument or operand has the wrong kind of value.",
                         fix=FixAvailability.SOMETIMES)
SHAPE_MISMATCH = _builtin("CK105", "shape-mismatch",
                          "Operand shapes do not agree (tile, copy or MMA shapes).")
DTYPE_MISMATCH = _builtin("CK106", "dtype-mismatch",
                          "Operand element types do not agree or are not accepted.",
                          fix=FixAvailability.SOMETIMES)
NOT_CONSTANT = _builtin("CK107", "not-constant",
                        "A value that must be known at compile time is not.")
ARCH_UNSUPPORTED = _builtin("CK108", "arch-unsupported",
                            "A primitive or dtype that the kernel's arch does not have.",
                            fix=FixAvailability.SOMETIMES)
BAD_KERNEL_SIGNATURE = _builtin("CK109", "bad-kernel-signature",
                                "An invalid @kernel decorator, parameter or annotation.",
                                fix=FixAvailability.SOMETIMES)
REDEFINITION = _builtin("CK110", "redefinition",
                        "A name bound twice where CAKE IR needs a single definition.")
BAD_INDEX = _builtin("CK111", "bad-index",
                     "Indexing with the wrong number of indices or out of constant bounds.")
BAD_ROLE = _builtin("CK112", "bad-role",
                    "A role that is malformed, overlapping or outside the kernel's warps.",
                    fix=FixAvailability.SOMETIMES)
DIVISION_BY_ZERO = _builtin("CK113", "division-by-zero", "A constant expression divides by zero.")
CONSTANT_OUT_OF_RANGE = _builtin(
    "CK115", "constant-out-of-range",
    "A compile-time integer needs more than 64 bits (or a shift count is negative).")
EXPRESSION_TOO_COMPLEX = _builtin(
    "CK116", "expression-too-complex",
    "An integer expression too large for the analyses (over 4096 terms once names are "
    "expanded, or nested over 100 deep).")
TOO_MANY_KERNELS = _builtin(
    "CK117", "too-many-kernels",
    "A file with more than 256 @kernel functions; the ones past the limit are not checked.")
UNUSED_VALUE = _builtin("CK114", "unused-value",
                        "A buffer, fragment or pipeline that is declared and never used.",
                        severity=Severity.WARNING, fix=FixAvailability.ALWAYS)

# --- CK2xx: resources (cake_core/verify/resources.py) ----------------------------------
SMEM_OVERFLOW = _builtin(
    "CK201", "smem-overflow",
    "The shared-memory plan (buffers, barriers, alignment) exceeds what a block may use.",
    fix=FixAvailability.SOMETIMES)
REGISTER_OVERSUBSCRIPTION = _builtin(
    "CK202", "register-oversubscription",
    "setmaxnreg counts ask for more registers than the block holds: setmaxnreg.inc hangs.",
    fix=FixAvailability.SOMETIMES)
INVALID_REGISTER_COUNT = _builtin(
    "CK203", "invalid-register-count",
    "A role's `regs=` is not a multiple of 8 in 24..256, which setmaxnreg requires.",
    fix=FixAvailability.SOMETIMES)
PARTIAL_WARPGROUP_REGS = _builtin(
    "CK204", "partial-warpgroup-regs",
    "A role with `regs=` does not cover whole warpgroups; setmaxnreg is warpgroup-wide.")
SETMAXNREG_UNAVAILABLE = _builtin(
    "CK205", "setmaxnreg-unavailable",
    "A role sets `regs=` on an arch without setmaxnreg.",
    fix=FixAvailability.ALWAYS)
LAUNCH_LIMITS = _builtin(
    "CK206", "launch-limits",
    "The block or cluster shape exceeds what the arch can launch.")
TMA_BOX_TOO_LARGE = _builtin(
    "CK207", "tma-box-too-large",
    "A TMA box dimension exceeds 256 elements.")
TMA_BOX_MISALIGNED = _builtin(
    "CK208", "tma-box-misaligned",
    "A TMA box's inner dimension is not a multiple of 16 bytes.")
TMA_STRIDE_ALIGNMENT = _builtin(
    "CK209", "tma-stride-alignment",
    "A tensor copied with TMA has global row strides that are not (provably) 16-byte aligned.",
    fix=FixAvailability.SOMETIMES)
WGMMA_OPERAND_MAJOR = _builtin(
    "CK210", "wgmma-operand-major",
    "A wgmma shared-memory operand is not K-major, which only 16-bit types allow.")
WGMMA_WARPGROUP_MISMATCH = _builtin(
    "CK211", "wgmma-warpgroup-mismatch",
    "A wgmma accumulator's rows are not 64 per warpgroup of the role that runs it.")
DTYPE_UNSUPPORTED = _builtin(
    "CK212", "dtype-unsupported",
    "An element type the kernel's arch cannot convert or multiply (fp8 before sm_89).")
NARROW_VECTOR_ACCESS = _builtin(
    "CK213", "narrow-vector-access",
    "A global tile whose rows are not a multiple of 16 bytes cannot use 128-bit accesses.",
    severity=Severity.WARNING)


# --- CK3xx: synchronization (cake_core/verify/sync.py) ----------------------------------
PIPELINE_PROTOCOL = _builtin(
    "CK301", "pipeline-protocol",
    "A role's acquire/commit or wait/release calls do not balance on some path.",
    fix=FixAvailability.SOMETIMES)
EXPECT_TX_MISMATCH = _builtin(
    "CK302", "expect-tx-mismatch",
    "expect_tx arms an mbarrier phase with other bytes than its TMA copies deliver.",
    fix=FixAvailability.SOMETIMES)
ARRIVAL_COUNT_MISMATCH = _builtin(
    "CK303", "arrival-count-mismatch",
    "An mbarrier's arrival count differs from the arrivals each of its phases gets.",
    fix=FixAvailability.SOMETIMES)
STAGE_ACCESS_OUTSIDE_SPAN = _builtin(
    "CK304", "stage-access-outside-span",
    "A pipelined buffer is accessed outside the acquire..commit or wait..release of its stage.")
CONSUMER_NEVER_RELEASES = _builtin(
    "CK305", "consumer-never-releases",
    "A consumer role of a pipeline never releases the stages it reads.",
    fix=FixAvailability.SOMETIMES)
WGMMA_NOT_WAITED = _builtin(
    "CK306", "wgmma-not-waited",
    "A wgmma's accumulator or operands are used before a wgmma_wait covers it.",
    fix=FixAvailability.ALWAYS)
CP_ASYNC_NOT_WAITED = _builtin(
    "CK307", "cp-async-not-waited",
    "cp.async data is read before cp_async_wait and a barrier make it visible.",
    fix=FixAvailability.SOMETIMES)
SMEM_RACE = _builtin(
    "CK308", "smem-race",
    "Two accesses to shared memory, one a write, with nothing ordering them.",
    fix=FixAvailability.SOMETIMES)
MISSING_PROXY_FENCE = _builtin(
    "CK309", "missing-proxy-fence",
    "Generic-proxy smem writes are read by TMA or wgmma without fence_proxy_async().",
    fix=FixAvailability.ALWAYS)
BARRIER_INIT_NOT_VISIBLE = _builtin(
    "CK310", "barrier-init-not-visible",
    "Raw mbarriers are used before fence_barrier_init() and syncthreads() publish them.",
    fix=FixAvailability.ALWAYS)
DEADLOCK = _builtin(
    "CK311", "deadlock",
    "Every live role waits for another: the kernel hangs.")
PARITY_DRIFT = _builtin(
    "CK312", "parity-drift",
    "A hand-written mbarrier wait parity does not follow the barrier's phases.",
    fix=FixAvailability.SOMETIMES)
LEADER_RELEASE_RACE = _builtin(
    "CK313", "leader-release-race",
    "One elected thread arrives for a role whose other warps may still use what it hands over.",
    fix=FixAvailability.ALWAYS)
# CK314, CK315: ops only some threads run (cake_core/verify/divergence.py)
COLLECTIVE_UNDER_DIVERGENCE = _builtin(
    "CK314", "collective-under-divergence",
    "A warp or warpgroup collective runs under a condition its lanes or warps disagree on.")
PARTIAL_PROXY_FENCE = _builtin(
    "CK315", "partial-proxy-fence",
    "fence_proxy_async() runs on some threads only, but all of them wrote what TMA reads.",
    fix=FixAvailability.SOMETIMES)
BULK_SOURCE_OVERWRITTEN = _builtin(
    "CK316", "bulk-store-source-overwritten",
    "Threads overwrite a TMA store's source that only the issuing thread waited for, with "
    "no barrier after that wait.",
    fix=FixAvailability.SOMETIMES)
# CK317, CK318: buffers placed by hand with smem(..., offset=) (cake_core/verify/placement.py)
SMEM_OVERLAP = _builtin(
    "CK317", "smem-overlap",
    "Two buffers placed by hand share bytes while both are live.")
SMEM_OFFSET_MISALIGNED = _builtin(
    "CK318", "smem-offset-misaligned",
    "A buffer placed by hand is not aligned as its layout and TMA need.")
# CK319, CK320: named barriers between roles (cake_core/verify/deadlock.py)
NAMED_BARRIER_COUNT = _builtin(
    "CK319", "named-barrier-count-mismatch",
    "Roles meeting at one named barrier name different warp counts.")
NAMED_ARRIVE_ALONE = _builtin(
    "CK320", "named-arrive-alone",
    "A barrier_arrive completes its named barrier by itself, so it orders nothing.")
# CK323-CK325: TMA multicast across a cluster (cake_core/verify/cluster.py)
MULTICAST_BEFORE_CLUSTER_SYNC = _builtin(
    "CK323", "multicast-before-cluster-sync",
    "A TMA multicast may reach a peer block before a cluster_sync() published its barriers.",
    fix=FixAvailability.ALWAYS)
CLUSTER_EXIT_BEFORE_PEERS = _builtin(
    "CK324", "cluster-exit-before-peers",
    "A block that peers multicast into may exit before they are done: no trailing "
    "cluster_sync().",
    fix=FixAvailability.ALWAYS)

MULTICAST_PEER_REUSE = _builtin(
    "CK325", "multicast-peer-reuse",
    "A multicast in a loop overwrites the peers' buffer with no cluster-wide handshake "
    "after their last read of it.")
# CK326: persistent tile loops (cake_core/verify/tile_loops.py)
TILE_LOOP_STRIDE = _builtin(
    "CK326", "tile-loop-stride",
    "A persistent tile loop `range(block.x, tiles, S)` whose step is not the launched grid "
    "extent, so some tiles are skipped or computed twice.",
    fix=FixAvailability.SOMETIMES)
# CK328: register A operand of a wgmma in flight (cake_core/verify/local.py)
WGMMA_REGISTER_OPERAND_OVERWRITTEN = _builtin(
    "CK328", "wgmma-register-operand-overwritten",
    "The A operand of a wgmma that reads it from registers is re-bound (its registers "
    "overwritten) before a `wgmma_wait` covers that wgmma.",
    fix=FixAvailability.ALWAYS)
# CK329: an int read from a tensor the kernel writes (cake_core/verify/scalar_source.py)
SCALAR_READ_OF_WRITTEN = _builtin(
    "CK329", "scalar-read-of-written-tensor",
    "`load_scalar` reads a tensor the kernel also writes: blocks run in any order, so the "
    "int read depends on which block ran first.")
# CK330: a global tile with `limit=` given to TMA or cp.async (cake_core/ops/copy/__init__.py)
LIMITED_TILE_ASYNC_COPY = _builtin(
    "CK330", "limited-tile-async-copy",
    "A global tile with `limit=` is given to `tma_load`, `tma_store` or `cp_async`, which "
    "clip at the tensor's edges only and cannot honour the limit.")
# CK335: fragments declared without a fill (cake_core/verify/uninitialized.py)
UNINITIALIZED_FRAGMENT = _builtin(
    "CK335", "uninitialized-fragment",
    "A fragment declared with `fill=None` is read before a wgmma with `accumulate=False` "
    "writes it.", fix=FixAvailability.ALWAYS)
# CK332: loop-carried fragments (cake_core/elab/kernel_builder.py)
CARRIED_ALIAS = _builtin(
    "CK332", "carried-alias",
    "A loop-carried fragment is rebound to another value by name inside the loop, so the "
    "update is not carried to the next iteration.")

# --- CK4xx: layouts and memory access (cake_core/verify/layout.py, bounds.py) --------------
SWIZZLE_ROW_MISMATCH = _builtin(
    "CK401", "swizzle-row-mismatch",
    "A swizzled buffer's rows are not a multiple of the swizzle span.",
    fix=FixAvailability.SOMETIMES)
TMA_LAYOUT = _builtin(
    "CK402", "tma-layout",
    "The shared-memory side of a TMA copy has a layout or placement TMA cannot encode.",
    fix=FixAvailability.SOMETIMES)
MMA_LAYOUT = _builtin(
    "CK403", "mma-layout",
    "A wgmma operand's shared-memory layout is not one a wgmma descriptor can describe.",
    fix=FixAvailability.SOMETIMES)
BANK_CONFLICT = _builtin(
    "CK404", "bank-conflict",
    "A shared-memory access whose lanes collide on banks, costing extra wavefronts.",
    severity=Severity.WARNING, fix=FixAvailability.SOMETIMES)
SMEM_VIEW_OUT_OF_BOUNDS = _builtin(
    "CK405", "smem-view-out-of-bounds",
    "A shared-memory view's buffer index or tile coordinate can fall outside the buffer.")


# --- CK5xx: simulation findings (cake_core/sim/) ------------------------------------------
SIM_DATA_RACE = _builtin(
    "CK501", "sim-data-race",
    "A simulated run made two unordered accesses to the same smem bytes, one a write.")
SIM_DEADLOCK = _builtin(
    "CK502", "sim-deadlock",
    "In a simulated schedule every live role blocked with nothing in flight to wake it.")
SIM_PARITY_DRIFT = _builtin(
    "CK503", "sim-parity-drift",
    "A raw mbarrier wait saw a phase other than the one after the last it waited for.")
SIM_OUT_OF_BOUNDS = _builtin(
    "CK504", "sim-out-of-bounds",
    "A simulated access left its shared-memory buffer or used a negative global tile.")
SIM_UNINITIALIZED_READ = _builtin(
    "CK505", "sim-uninitialized-read",
    "A simulated read of shared-memory bytes that nothing had written.")
SIM_ASYNC_RESULT_READ = _builtin(
    "CK506", "sim-async-result-read",
    "A wgmma accumulator was read before wgmma_wait retired the groups writing it.")
SIM_UNFILLED_READ = _builtin(
    "CK511", "sim-unfilled-fragment-read",
    "A fragment declared with `fill=None` was read before anything wrote it.")
SIM_WRONG_RESULT = _builtin(
    "CK507", "sim-wrong-result",
    "The simulated output differs from the task's reference beyond its tolerance.")
SIM_BARRIER_MISUSE = _builtin(
    "CK508", "sim-barrier-misuse",
    "Extra arrivals, pipeline calls out of order, or transaction bytes left on a barrier.")
SIM_PENDING_AT_EXIT = _builtin(
    "CK509", "sim-pending-at-exit",
    "Copies or wgmma groups were still in flight when every role of the block finished.",
    severity=Severity.WARNING)
SIM_UNSUPPORTED = _builtin(
    "CK510", "sim-unsupported",
    "A construct the simulator cannot execute; the simulated run stopped short.",
    severity=Severity.WARNING)


# --- CK6xx: compile findings (cake_core/lower/) -----------------------------------------
LOWER_UNSUPPORTED = _builtin(
    "CK601", "lower-unsupported",
    "A construct that verifies but that the CUDA lowering does not translate yet.")
CUDA_COMPILE_ERROR = _builtin(
    "CK602", "cuda-compile-error",
    "nvcc or ptxas rejected the generated CUDA; the message points at the .cake line.")
REGISTER_SPILL = _builtin(
    "CK603", "register-spill",
    "ptxas spilled registers to local memory.",
    severity=Severity.WARNING)
WGMMA_SERIALIZED = _builtin(
    "CK604", "wgmma-serialized",
    "ptxas serialized wgmma instructions or inserted waits between them.",
    severity=Severity.WARNING)
REGISTER_SHORTAGE = _builtin(
    "CK605", "register-shortage",
    "ptxas could not fit the code in the registers it was allowed.",
    severity=Severity.WARNING)
LOCAL_MEMORY = _builtin(
    "CK606", "local-memory",
    "The compiled kernel keeps a stack frame: register arrays ended up in local memory.",
    severity=Severity.WARNING)
RESOURCE_MISMATCH = _builtin(
    "CK607", "resource-model-mismatch",
    "ptxas's shared memory or register count disagrees with the resource model.",
    severity=Severity.WARNING)
PTXAS_WARNING = _builtin(
    "CK608", "compiler-warning",
    "Another warning nvcc or ptxas gave about the generated code.",
    severity=Severity.WARNING)


# --- CK7xx: GPU execution findings (cake_core/run/) ----------------------------------------
GPU_WRONG_RESULT = _builtin(
    "CK701", "gpu-wrong-result",
    "On the GPU, an output differs from the task's reference beyond its tolerance.")
GPU_UNWRITTEN_OUTPUT = _builtin(
    "CK702", "gpu-unwritten-output",
    "On the GPU, output elements still hold the poison the runner filled them with.")
GPU_INPUT_MODIFIED = _builtin(
    "CK703", "gpu-input-modified",
    "The kernel changed an input tensor on the GPU.")
GPU_RECHECK_FAILED = _builtin(
    "CK704", "gpu-recheck-failed",
    "The output was right before the timing loop and wrong when checked again after it.")
GPU_RUNTIME_ERROR = _builtin(
    "CK705", "gpu-runtime-error",
    "The launch failed, or the kernel faulted or crashed its process on the GPU.")
GPU_TIMEOUT = _builtin(
    "CK706", "gpu-timeout",
    "The kernel made no progress within the runner's timeout and was killed.")
GPU_SUSPICIOUS_TIMING = _builtin(
    "CK707", "gpu-suspicious-timing",
    "A time below the shape's roofline floor, or over 10x faster than the baseline.",
    severity=Severity.WARNING)


# --- CK9xx: faults ---------------------------------------------------------------------
INTERNAL_ERROR = _builtin("CK901", "internal-error",
                          "The compiler failed on this input; please report it.")
PLUGIN_FAILURE = _builtin("CK902", "plugin-failure",
                          "A plugin raised, overran its time or failed to load; it was disabled.",
                          severity=Severity.WARNING)
