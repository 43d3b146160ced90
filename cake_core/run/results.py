"""What a GPU run reports, per shape, and the JSON it is written as.

One `ShapeResult` per shape: whether every check passed, the worst errors, the candidate's
and the baseline's times (median of round medians), the spread, the throughput, the
roofline floor and the flags that say why a number is not to be trusted.  `to_run` gives
the record `cake calibrate` reads (kernel, name, dims, gpu, measured_ms) with the rest of
the fields beside it; a shape without a trusted time (wrong, failed, or suspicious) has
no `measured_ms` and is left out of a calibration file.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

SCHEMA = "cake.bench/1"

#: A measured time below the fastest the GPU's peaks allow for the shape's work.
FLAG_BELOW_FLOOR = "below_roofline_floor"
#: Faster than the baseline by more than MAX_SPEEDUP: more likely a measurement or a
#: correctness hole than a kernel.
FLAG_TOO_FAST = "speedup_beyond_10x"
#: Per-call times spread more than NOISY_CV (coefficient of variation).
FLAG_NOISY = "noisy"
#: The baseline's own output disagrees with the task's reference (its time still stands).
FLAG_BASELINE_MISMATCH = "baseline_mismatch"
#: Two correct launches on the same inputs wrote different bits (atomics, a race).
FLAG_NONDETERMINISTIC = "nondeterministic"
#: Timings come from FakeDevice's virtual clock, not from a GPU.
FLAG_FAKE = "fake_device"
#: The kernel ran on the CPU under emulation (docs/emulation.md): correctness only.
FLAG_EMULATED = "emulated"

SUSPICIOUS = frozenset({FLAG_BELOW_FLOOR, FLAG_TOO_FAST})
MAX_SPEEDUP = 10.0
NOISY_CV = 0.10


@dataclass
class Finding:
    """A CK7xx finding before it has a source range (the parent attaches the kernel's, or
    the line `file:line` names when the finding knows one, as emulated launches do)."""

    code: str
    message: str
    notes: list[str] = field(default_factory=list)
    data: dict[str, Any] = field(default_factory=dict)
    file: str | None = None
    line: int | None = None
    """1-based line in `file` (the .cake source) of the statement at fault."""

    def to_json(self) -> dict[str, Any]:
        out = {"code": self.code, "message": self.message, "notes": list(self.notes),
               "data": _clean(self.data)}
        if self.line is not None:
            out.update(file=self.file, line=self.line)
        return out

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Finding:
        line = d.get("line")
        return cls(str(d["code"]), str(d["message"]), list(d.get("notes") or []),
                   dict(d.get("data") or {}), d.get("file"),
                   None if line is None else int(line))


@dataclass
class Workload:
    """The work of one shape and the fastest the GPU could possibly do it."""

    flops: float
    bytes: float
    peak_flops: float
    peak_bytes_per_s: float
    gpu: str = ""

    @property
    def floor_ms(self) -> float:
        t = 0.0
        if self.peak_flops > 0:
            t = max(t, self.flops / self.peak_flops)
        if self.peak_bytes_per_s > 0:
            t = max(t, self.bytes / self.peak_bytes_per_s)
        return t * 1e3

    def to_json(self) -> dict[str, Any]:
        return {"flops": self.flops, "bytes": self.bytes, "peak_flops": self.peak_flops,
                "peak_bytes_per_s": self.peak_bytes_per_s, "gpu": self.gpu}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Workload:
        return cls(float(d["flops"]), float(d["bytes"]), float(d["peak_flops"]),
                   float(d["peak_bytes_per_s"]), str(d.get("gpu", "")))


@dataclass
class ShapeResult:
    dims: dict[str, int]
    label: str = ""
    status: str = "pending"
    """ok | wrong | error (setup or runtime) | timeout | crash | skipped."""
    correct: bool | None = None
    error: str | None = None
    max_abs: float = 0.0
    max_rel: float = 0.0
    seeds: list[int] = field(default_factory=list)
    candidate_ms: float | None = None
    cv: float | None = None
    rounds_ms: list[float] = field(default_factory=list)
    overhead_ms: float | None = None
    baseline: str = ""
    baseline_ms: float | None = None
    baseline_cv: float | None = None
    baseline_correct: bool | None = None
    workload: Workload | None = None
    flags: list[str] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    device_lost: bool = False
    """A fault left the GPU context unusable: the caller must not run more in this process."""

    # --- derived ---------------------------------------------------------------------------
    @property
    def floor_ms(self) -> float | None:
        return self.workload.floor_ms if self.workload is not None else None

    @property
    def tflops(self) -> float | None:
        if self.workload is None or not self.candidate_ms:
            return None
        return self.workload.flops / (self.candidate_ms * 1e-3) / 1e12

    @property
    def speedup(self) -> float | None:
        if not self.candidate_ms or not self.baseline_ms:
            return None
        return self.baseline_ms / self.candidate_ms

    @property
    def pct_of_baseline(self) -> float | None:
        """The candidate's speed as a percentage of the baseline's (100 = parity, more is
        faster): 100 * baseline time / candidate time."""
        s = self.speedup
        return None if s is None else 100.0 * s

    @property
    def suspicious(self) -> bool:
        return bool(SUSPICIOUS & set(self.flags))

    @property
    def trusted_ms(self) -> float | None:
        """The time a calibration may use: correct, measured on a GPU, not suspicious."""
        if self.correct and self.candidate_ms and not self.suspicious \
                and FLAG_FAKE not in self.flags and FLAG_EMULATED not in self.flags:
            return self.candidate_ms
        return None

    @property
    def dims_text(self) -> str:
        return ",".join(f"{k}={v}" for k, v in self.dims.items())

    def assess(self) -> None:
        """Add the flags that follow from the numbers (idempotent)."""
        flags = set(self.flags)
        if self.candidate_ms is not None:
            floor = self.floor_ms
            if floor is not None and floor > 0 and self.candidate_ms < floor:
                flags.add(FLAG_BELOW_FLOOR)
            s = self.speedup
            if s is not None and s > MAX_SPEEDUP:
                flags.add(FLAG_TOO_FAST)
            if self.cv is not None and self.cv > NOISY_CV:
                flags.add(FLAG_NOISY)
        self.flags = sorted(flags)

    # --- JSON ------------------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        return _clean({
            "dims": dict(self.dims), "label": self.label, "status": self.status,
            "correct": self.correct, "error": self.error,
            "max_abs_err": self.max_abs, "max_rel_err": self.max_rel, "seeds": self.seeds,
            "candidate_ms": self.candidate_ms, "cv": self.cv, "rounds_ms": self.rounds_ms,
            "overhead_ms": self.overhead_ms,
            "baseline": self.baseline, "baseline_ms": self.baseline_ms,
            "baseline_cv": self.baseline_cv, "baseline_correct": self.baseline_correct,
            "pct_of_baseline": self.pct_of_baseline, "speedup": self.speedup,
            "tflops": self.tflops, "floor_ms": self.floor_ms,
            "workload": self.workload.to_json() if self.workload else None,
            "flags": list(self.flags), "suspicious": self.suspicious,
            "findings": [f.to_json() for f in self.findings],
            "device_lost": self.device_lost,
        })

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> ShapeResult:
        def num(key: str) -> float | None:
            v = d.get(key)
            return None if v is None else float(v)

        wl = d.get("workload")
        return cls(
            dims={str(k): int(v) for k, v in d["dims"].items()}, label=str(d.get("label", "")),
            status=str(d.get("status", "pending")), correct=d.get("correct"),
            error=d.get("error"), max_abs=_err(d.get("max_abs_err")),
            max_rel=_err(d.get("max_rel_err")), seeds=list(d.get("seeds") or []),
            candidate_ms=num("candidate_ms"), cv=num("cv"),
            rounds_ms=[float(x) for x in d.get("rounds_ms") or []],
            overhead_ms=num("overhead_ms"), baseline=str(d.get("baseline", "")),
            baseline_ms=num("baseline_ms"), baseline_cv=num("baseline_cv"),
            baseline_correct=d.get("baseline_correct"),
            workload=Workload.from_json(wl) if wl else None, flags=list(d.get("flags") or []),
            findings=[Finding.from_json(f) for f in d.get("findings") or []],
            device_lost=bool(d.get("device_lost", False)))


def _err(v: Any) -> float:
    """An error written as null was not finite (a NaN or infinite element)."""
    return float("inf") if v is None else float(v)


def _clean(obj: Any) -> Any:
    """JSON has no NaN or infinity: they become null."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {str(k): _clean(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_clean(v) for v in obj]
    if hasattr(obj, "item") and callable(obj.item):  # numpy scalars
        return _clean(obj.item())
    return obj


@dataclass
class BenchReport:
    """Every shape of one candidate on one task, with where it ran."""

    task: str
    kernel: str
    path: str
    backend: str
    device: str
    gpu: str | None
    """The hardware table's name for the device (None when the table does not know it)."""
    shapes: list[ShapeResult]
    timing: bool = True
    notes: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return bool(self.shapes) and all(s.correct for s in self.shapes)

    def to_json(self, diagnostics: Any = None) -> dict[str, Any]:
        return {
            "schema": SCHEMA, "task": self.task, "kernel": self.kernel, "file": self.path,
            "backend": self.backend, "device": self.device, "gpu": self.gpu,
            "timing": self.timing, "passed": self.passed, "notes": list(self.notes),
            "shapes": [s.to_json() for s in self.shapes],
            "runs": self.calibration_runs(),
            **({"report": diagnostics} if diagnostics is not None else {}),
        }

    def calibration_runs(self, kernel_path: str | None = None) -> list[dict[str, Any]]:
        """Records for `cake calibrate` (only shapes with a trusted time), each with the
        whole shape result beside the fields calibrate reads."""
        out = []
        for s in self.shapes:
            ms = s.trusted_ms
            if ms is None:
                continue
            rec = {"kernel": kernel_path or self.path, "name": self.kernel, "dims": dict(s.dims),
                   "measured_ms": ms, "task": self.task, "device": self.device,
                   "backend": self.backend}
            if self.gpu:
                rec["gpu"] = self.gpu
            rec.update({k: v for k, v in s.to_json().items() if k not in rec})
            out.append(rec)
        return out
