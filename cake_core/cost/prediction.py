"""A prediction and how its seconds are told: per category, per source line, the bottleneck.

The time model (`timing.py`) credits every second to the ops that caused it and to a
category; this module holds the result and turns those credits into what a user reads:
the share of each source line, and a phrase naming the bottleneck's unit, instruction
family or role.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from cake_core.cost.record import PIPELINED, SERIAL
from cake_core.cost.resources import ResourceReport
from cake_core.cost.work import STEADY, KernelProfile

CATEGORIES = ("compute", "memory", "latency", "sync", "launch")


@dataclass(slots=True)
class LineShare:
    line: int
    """1-based source line."""
    share: float
    seconds: float
    category: str
    ops: list[str]


@dataclass(slots=True, kw_only=True)
class Prediction:
    kernel: str
    target: str
    """The arch the kernel was compiled for (`arch` is the GPU's)."""
    arch: str
    gpu: str
    dims: dict[str, int]
    calibration: str
    seconds: float
    tensor_flops: float
    cuda_ops: float
    roofline_seconds: float
    """The shape's floor: the largest of the tensor, CUDA-core and compulsory-DRAM times at
    the datasheet peaks (what any kernel of the shape needs)."""
    roofline_bound: str
    """Which of those binds: "tensor", "cuda" or "dram"."""
    floors: dict[str, float]
    """This kernel's least time per resource at the peaks: tensor, cuda, dram, l2, smem
    (l2 and smem count its own tiles' traffic)."""
    bottleneck: str
    bottleneck_detail: str
    categories: dict[str, float]
    terms: dict[str, float]
    work: dict[str, float]
    grid: tuple[int, ...]
    blocks: int
    blocks_per_sm: int
    waves: float
    resources: ResourceReport
    lines: list[LineShare]
    warnings: list[str]

    @property
    def tflops(self) -> float:
        return self.tensor_flops / self.seconds / 1e12 if self.seconds > 0 else 0.0

    @property
    def roofline_fraction(self) -> float:
        return self.roofline_seconds / self.seconds if self.seconds > 0 else 0.0

    @property
    def kernel_floor(self) -> tuple[str, float]:
        """The resource that bounds this kernel from below, and its time."""
        key = max(self.floors, key=lambda k: self.floors[k])
        return key, self.floors[key]

    @property
    def dram_bytes_per_s(self) -> float:
        """DRAM traffic over the predicted time: the throughput of a memory-bound kernel."""
        return self.work.get("dram_bytes", 0.0) / self.seconds if self.seconds > 0 else 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "kernel": self.kernel,
            "target": self.target,
            "arch": self.arch,
            "gpu": self.gpu,
            "dims": dict(self.dims),
            "calibration": self.calibration,
            "time_s": self.seconds,
            "tflops": self.tflops,
            "roofline_fraction": self.roofline_fraction,
            "roofline_s": self.roofline_seconds,
            "roofline_bound": self.roofline_bound,
            "floors": dict(self.floors),
            "dram_bytes_per_s": self.dram_bytes_per_s,
            "bottleneck": self.bottleneck,
            "bottleneck_detail": self.bottleneck_detail,
            "categories": dict(self.categories),
            "terms": dict(self.terms),
            "work": dict(self.work),
            "grid": list(self.grid),
            "blocks": self.blocks,
            "blocks_per_sm": self.blocks_per_sm,
            "waves": self.waves,
            "resources": self.resources.to_json(),
            "lines": [{"line": ln.line, "share": ln.share, "time_s": ln.seconds,
                       "category": ln.category, "ops": list(ln.ops)} for ln in self.lines],
            "warnings": list(self.warnings),
        }


_TERM_NAMES = {"tensor": "tensor cores", "cuda": "CUDA cores", "smem": "shared-memory bandwidth",
               "l2": "L2 bandwidth", "dram": "DRAM bandwidth", "latency": "pipeline latency",
               "fill": "pipeline fill", "waited": "loads waited for", "serial": "prologue/epilogue",
               "launch": "launch overhead"}


def bottleneck_detail(p: KernelProfile, category: str, contrib: list[dict[str, float]],
            memory: dict[str, float]) -> str:
    """A short phrase for the bottleneck: which unit, which instruction family, which role."""
    if category == "launch":
        return "launch overhead (the kernel is too small to hide it)"
    owners = [(c.get(category, 0.0), i) for i, c in enumerate(contrib)]
    top = max(owners, default=(0.0, -1))[1]
    w = p.ops[top] if top >= 0 else None
    if category == "compute":
        if w is not None and w.record.tensor is not None:
            t = w.record.tensor
            return f"tensor cores ({t.family} {t.dtype}, m{t.shape[0]}n{t.shape[1]}k{t.shape[2]})"
        return "CUDA cores"
    if category == "memory":
        # the memory that bound the seconds credited to memory (steady or serial)
        best = max(memory, key=lambda k: memory[k]) if any(memory.values()) else "dram"
        if best == "smem" and w is not None and w.record.smem_conflict > 1.0:
            return (f"{_TERM_NAMES[best]} ({w.op.prim.key} at line {w.line + 1}: bank "
                    f"conflicts, {w.record.smem_conflict:.3g}x the conflict-free wavefronts)")
        return _TERM_NAMES[best]
    if category == "latency":
        if w is not None and any(a.latency == SERIAL and w.phase == STEADY
                                 for a in w.record.reads):
            return "memory latency (a load waited for in every iteration)"
        stages = {a.depth + 1 for w in p.ops for a in w.record.reads if a.latency == PIPELINED}
        if stages:
            return f"memory latency (pipeline of {min(stages)} stages)"
        return "memory latency (loads without a pipeline)"
    if category == "sync" and w is not None:
        return f"synchronization in role {w.role!r} ({w.op.prim.key})"
    return category


def line_shares(p: KernelProfile, contrib: list[dict[str, float]], launch: float,
           total: float) -> list[LineShare]:
    per_line: dict[int, dict[str, float]] = {}
    names: dict[int, list[str]] = {}
    for w, c in zip(p.ops, contrib, strict=True):
        if not c:
            continue
        d = per_line.setdefault(w.line, {})
        for k, v in c.items():
            d[k] = d.get(k, 0.0) + v
        lst = names.setdefault(w.line, [])
        if w.op.prim.key not in lst:
            lst.append(w.op.prim.key)
    deco = p.kernel.decorator_span.start.line
    per_line.setdefault(deco, {})["launch"] = per_line.get(deco, {}).get("launch", 0.0) + launch
    names.setdefault(deco, []).append("launch")
    out = []
    for line in sorted(per_line):
        d = per_line[line]
        secs = sum(d.values())
        out.append(LineShare(line + 1, secs / total if total else 0.0, secs,
                             max(d, key=lambda k: d[k]), names.get(line, [])))
    return out
