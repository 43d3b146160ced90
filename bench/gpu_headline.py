"""The headline comparisons of `scripts/gpu_check.sh`, and the parts of it that need no GPU.

Headlines: the sm_90a GEMMs (gemm_sm90 and its variants, where present) against cuBLAS
bf16 through torch at 4096^3 and 8192^3, and the k-means assignment kernels against the
torch reference and the flash-kmeans Triton kernel at B=32, N=65536, K=1024, D=128.  The
CAKE kernels are timed by the runner (cake_core/run/protocol.py) paired with the task's
torch baseline; flash-kmeans is timed by `bench/flash_kmeans_time.py` in its own process,
paired with the same torch reference, by `time_sides` below: the same protocol (warmup,
an L2 flush that reads a buffer of 2x the L2 before every call, CUDA events around each
call, rounds alternating the two sides, median of round medians), minus the defences
against a cheating candidate, which a published library does not need.

Everything here runs on the CPU too (FakeDevice for `time_sides`), so tests/run covers it.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cake_core.hardware import get_arch
from cake_core.run.build import cannot_run
from cake_core.run.device import Device
from cake_core.run.protocol import TimingConfig

GEMM_TASK = "gemm_bf16"
KMEANS_TASK = "kmeans_assign"
GEMM_EXAMPLES = ("examples/gemm_sm90.cake", "examples/gemm_sm90_tma_epilogue.cake",
                 "examples/gemm_sm90_cluster.cake", "examples/gemm_sm90_persistent.cake",
                 "examples/gemm_sm90_expert.cake")
KMEANS_EXAMPLES = ("examples/kmeans_assign_sm90.cake", "examples/kmeans_assign_sm90_dbuf.cake",
                   "examples/kmeans_assign_sm90_pingpong.cake",
                   "examples/kmeans_assign_sm90_pingpong128.cake")
GEMM_SHAPES: tuple[dict[str, int], ...] = ({"M": 4096, "N": 4096, "K": 4096},
                                           {"M": 8192, "N": 8192, "K": 8192})
KMEANS_SHAPE = {"B": 32, "N": 65536, "K": 1024}
KMEANS_D = 128
"""The kmeans_assign task fixes D at 128."""

BASELINE_NAMES = {GEMM_TASK: "cuBLAS bf16 (torch.matmul)",
                  KMEANS_TASK: "torch reference (bmm + argmin)"}
FLASH_NAME = "flash-kmeans (Triton)"
HEADERS = ["kernel", "shape", "median us", "TFLOP/s", "x baseline", "status"]


@dataclass(frozen=True)
class Highlight:
    task: str
    example: str
    dims: Mapping[str, int]

    @property
    def kernel(self) -> str:
        return Path(self.example).stem


def headline_examples() -> list[tuple[str, str]]:
    """Every (task name, example path) a headline may name."""
    return [(GEMM_TASK, ex) for ex in GEMM_EXAMPLES] + [(KMEANS_TASK, ex)
                                                       for ex in KMEANS_EXAMPLES]


def highlights(present: Iterable[tuple[str, str]]) -> list[Highlight]:
    """The headline (task, example, shape)s whose example is present: `present` is every
    (task name, example path) that will run (a task's entry, or a variant gpu_check.py
    adds to the task because its file exists)."""
    have = set(present)
    out = [Highlight(GEMM_TASK, ex, dims) for dims in GEMM_SHAPES for ex in GEMM_EXAMPLES
           if (GEMM_TASK, ex) in have]
    out += [Highlight(KMEANS_TASK, ex, KMEANS_SHAPE) for ex in KMEANS_EXAMPLES
            if (KMEANS_TASK, ex) in have]
    return out


def flops(task: str, dims: Mapping[str, int]) -> float | None:
    """The useful floating-point work of one call (multiply-add = 2)."""
    if task == GEMM_TASK:
        return 2.0 * dims["M"] * dims["N"] * dims["K"]
    if task == KMEANS_TASK:
        return 2.0 * dims["B"] * dims["N"] * dims["K"] * KMEANS_D
    return None


def shape_text(task: str, dims: Mapping[str, int]) -> str:
    if task == GEMM_TASK and dims["M"] == dims["N"] == dims["K"]:
        return f"{dims['M']}^3"
    extra = f",D={KMEANS_D}" if task == KMEANS_TASK else ""
    return ",".join(f"{k}={v}" for k, v in dims.items()) + extra


def arch_skip(kernel_arch: str, device_cc: tuple[int, int]) -> str | None:
    """`needs sm_90a, GPU is sm_80` when this GPU cannot run the kernel, else None: a
    kernel for another GPU is skipped, never failed."""
    if get_arch(kernel_arch) is None or cannot_run(kernel_arch, device_cc) is None:
        return None  # an unknown architecture is an error the build reports, not a skip
    return f"needs {kernel_arch}, GPU is sm_{device_cc[0]}{device_cc[1]}"


def status_text(row: Mapping[str, Any] | None) -> str:
    """A runner row's status for the table: `ok`, `skipped (why)`, `wrong`, `error: ...`."""
    if row is None:
        return "not run"
    status = str(row.get("status") or "?")
    why = str(row.get("error") or "")
    flags = [f for f in row.get("flags") or [] if f != "fake_device"]
    if status == "ok":
        return "ok" + (f" [{', '.join(flags)}]" if flags else "")
    if status == "skipped":
        return f"skipped ({why})" if why else "skipped"
    return f"{status}: {why[:80]}" if why else status


def row_passes(row: Mapping[str, Any]) -> bool:
    """Correct, or skipped because this GPU cannot run the kernel at all."""
    return bool(row.get("correct")) or bool(row.get("arch_skip"))


@dataclass
class HeadlineRow:
    kernel: str
    shape: str
    us: float | None
    tflops: float | None
    ratio: float | None
    """Baseline time / this time: above 1 is faster than the baseline."""
    status: str

    def cells(self) -> list[str]:
        return [self.kernel, self.shape,
                "-" if self.us is None else f"{self.us:.1f}",
                "-" if self.tflops is None else f"{self.tflops:.1f}",
                "-" if self.ratio is None else f"{self.ratio:.2f}x", self.status]

    def to_json(self) -> dict[str, Any]:
        return {"kernel": self.kernel, "shape": self.shape, "median_us": self.us,
                "tflops": self.tflops, "ratio_vs_baseline": self.ratio, "status": self.status}


def _timed(name: str, task: str, dims: Mapping[str, int], ms: float | None,
           base_ms: float | None, status: str) -> HeadlineRow:
    work = flops(task, dims)
    tf = work / (ms * 1e-3) / 1e12 if work and ms else None
    ratio = base_ms / ms if ms and base_ms else None
    return HeadlineRow(name, shape_text(task, dims), ms * 1e3 if ms else None, tf, ratio,
                       status)


def headline_rows(wanted: Sequence[Highlight], rows: Sequence[Mapping[str, Any]],
                  flash: Mapping[str, Any] | None) -> list[HeadlineRow]:
    """One row per headline kernel and shape, then the baseline of that shape (the median of
    the times it was paired with), then, at the k-means shape, flash-kmeans.

    Each CAKE kernel's ratio is against the baseline timed beside it (the runner alternates
    the two round by round); flash-kmeans's, against the torch reference timed beside it."""
    out: list[HeadlineRow] = []
    groups: list[tuple[str, dict[str, int]]] = []
    for h in wanted:
        key = (h.task, dict(h.dims))
        if key not in groups:
            groups.append(key)
    for task, dims in groups:
        base_times = []
        for h in (h for h in wanted if h.task == task and dict(h.dims) == dims):
            row = next((r for r in rows if r.get("example") == h.example
                        and r.get("task") == task and r.get("dims") == dims), None)
            ms = row.get("ms") if row else None
            base = row.get("baseline_ms") if row else None
            if base:
                base_times.append(float(base))
            out.append(_timed(h.kernel, task, dims, ms if row and row.get("correct") else None,
                              base, status_text(row)))
        base_ms = statistics.median(base_times) if base_times else None
        note = (f"ok (paired with {len(base_times)} kernel(s))" if base_times
                else "not timed (no CAKE kernel of this shape was timed)")
        out.append(_timed(BASELINE_NAMES.get(task, "baseline"), task, dims, base_ms, base_ms,
                          note))
        if task == KMEANS_TASK:
            out.append(flash_row(dims, flash))
    return out


def flash_row(dims: Mapping[str, int], flash: Mapping[str, Any] | None) -> HeadlineRow:
    """flash-kmeans's row from `bench/flash_kmeans_time.py`'s JSON (None: it never ran)."""
    if flash is None:
        return _timed(FLASH_NAME, KMEANS_TASK, dims, None, None, "not run")
    status = str(flash.get("status") or "?")
    why = str(flash.get("reason") or "")
    if status != "ok":
        return _timed(FLASH_NAME, KMEANS_TASK, dims, None, None,
                      f"{status} ({why})" if why else status)
    text = "ok" + (f" ({flash['note']})" if flash.get("note") else "")
    return _timed(FLASH_NAME, KMEANS_TASK, dims, flash.get("flash_ms"), flash.get("torch_ms"),
                  text)


# --- timing an external kernel ---------------------------------------------------------------
@dataclass
class SideTimes:
    rounds_ms: list[float] = field(default_factory=list)
    samples_ms: list[float] = field(default_factory=list)

    @property
    def median_ms(self) -> float:
        return statistics.median(self.rounds_ms)

    @property
    def cv(self) -> float | None:
        if len(self.samples_ms) < 2:
            return None
        mean = statistics.fmean(self.samples_ms)
        return statistics.pstdev(self.samples_ms) / mean if mean > 0 else None


def time_sides(device: Device, stream: Any, flush: Any, nflush: int,
               sides: Sequence[tuple[str, Callable[[], None]]], cfg: TimingConfig
               ) -> dict[str, SideTimes]:
    """Warmup, then rounds alternating the sides (ABAB.., BABA.. on odd rounds); before each
    call a read of `nflush` bytes of `flush` (>= 2x L2) outside the events; events around
    each call.  Each side's callable must enqueue its work on `stream`."""
    n = max(1, cfg.calls)
    starts = [device.new_event() for _ in range(n)]
    ends = [device.new_event() for _ in range(n)]
    for _ in range(cfg.warmup):
        for _name, fn in sides:
            device.read_through(flush, nflush, stream)
            fn()
    device.synchronize()
    out = {name: SideTimes() for name, _ in sides}
    for r in range(max(1, cfg.rounds)):
        for name, fn in (sides if r % 2 == 0 else list(reversed(sides))):
            for c in range(n):
                device.read_through(flush, nflush, stream)
                device.record(starts[c], stream)
                fn()
                device.record(ends[c], stream)
            device.synchronize()
            times = [device.elapsed_ms(starts[c], ends[c]) for c in range(n)]
            out[name].samples_ms += times
            out[name].rounds_ms.append(statistics.median(times))
    return out
