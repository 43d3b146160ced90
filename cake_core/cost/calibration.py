"""The cost model's coefficients, their defaults per architecture, and calibrations.

A coefficient is a number the hardware table cannot give: what fraction of a peak a real
kernel reaches, how long a barrier hand-off takes, what a launch costs.  The defaults
below come from public measurements where one exists (docs/hardware.md, key [S] for the
tensor efficiencies, [T] for HBM) and are otherwise stated assumptions, listed in
docs/cost.md.  A `Calibration` replaces some of them with values fitted to measured runs
(`cake calibrate`) and carries where they came from, so a prediction can always say which
numbers it used.  Calibrations are plugin-shaped: plain data, loadable from JSON.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cake_core.cost.coefficients import (
    COEFFICIENT_DOCS,
    Coefficients,
    SyncLatency,
    TensorEfficiency,
    check_names,
)
from cake_core.hardware import GpuSpec, get_arch
from cake_core.primitives.registry import Provenance

__all__ = ["COEFFICIENT_DOCS", "DEFAULT_FIT", "SCHEMA", "UNCALIBRATED", "Calibration",
           "CalibrationProvenance", "Coefficients", "default_coefficients", "from_plugin_item",
           "load_calibrations", "pick_calibration", "save_calibrations", "to_plugin_item"]

UNCALIBRATED = "uncalibrated defaults"
SCHEMA = "cake.calibration/1"

#: Coefficients `cake calibrate` fits unless told otherwise (the ones the runs constrain).
DEFAULT_FIT = ("hbm_efficiency", "tensor_efficiency.wgmma", "tensor_efficiency.mma_sync",
               "tensor_efficiency.tcgen05", "sync_scale", "dram_latency_ns", "launch_us")

#: Native tensor-core instruction family per architecture (defaults to its achievable
#: fraction); other families get the legacy-path assumption below.
_NATIVE = {"sm_80": "mma_sync", "sm_86": "mma_sync", "sm_89": "mma_sync", "sm_90": "mma_sync",
           "sm_90a": "wgmma", "sm_100a": "tcgen05"}
#: mma.sync on Hopper/Blackwell runs on the legacy path, well below the wgmma/tcgen05 peak.
_LEGACY_MMA_SYNC = 0.62
_DEFAULT_TENSOR = 0.80
#: How much of a warpgroup role's smaller pipe time (tensor or CUDA-core) still adds to the
#: larger one when two or more warpgroups interleave (docs/cost.md, *Overlap*): an assumption,
#: halfway between a perfect overlap (0) and none (1), until a calibration fits it.
_PIPE_CONTENTION = 0.5
_DEFAULT_HBM = 0.90


def default_coefficients(gpu: GpuSpec) -> Coefficients:
    """The uncalibrated coefficients for a GPU (its arch decides the tensor families)."""
    arch = get_arch(gpu.arch)
    name = arch.name if arch else gpu.arch
    native = _NATIVE.get(name, "mma_sync")
    bf16 = gpu.achievable.get("bf16", _DEFAULT_TENSOR)
    tensor = {"wgmma": _LEGACY_MMA_SYNC, "mma_sync": _LEGACY_MMA_SYNC,
              "tcgen05": _LEGACY_MMA_SYNC}
    tensor[native] = bf16
    return Coefficients(
        hbm_efficiency=gpu.achievable.get("hbm", _DEFAULT_HBM),
        l2_efficiency=1.0,
        smem_bytes_per_clk_sm=128.0,
        tensor_efficiency=TensorEfficiency(**tensor),
        tensor_n_half=8.0,
        cuda_efficiency=0.7,
        pipe_contention=_PIPE_CONTENTION,
        dram_latency_ns=600.0,
        l2_latency_ns=200.0,
        sync_scale=1.0,
        sync_ns=SyncLatency(mbarrier_wait=10.0, mbarrier_arrive=5.0, block_barrier=25.0,
                            named_barrier=20.0, wgmma_wait0=30.0, async_wait=5.0, fence=10.0),
        issue_ns=0.5,
        launch_us=3.0,
        l2_resident_fraction=0.5,
    )


@dataclass(frozen=True, slots=True)
class CalibrationProvenance:
    """Where a calibration came from: tool, date, the runs it was fitted on, its error."""

    origin: str = "cake calibrate"
    date: str = ""
    runs: tuple[dict[str, Any], ...] = ()
    fit_error: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Calibration:
    """Fitted coefficients for one architecture, by flat name (`"hbm_efficiency"`,
    `"tensor_efficiency.wgmma"`): a calibration names only what it fitted, and `apply`
    lays those over the defaults.  An unknown name is refused at construction."""

    name: str
    arch: str
    coefficients: dict[str, float]
    provenance: CalibrationProvenance = field(default_factory=CalibrationProvenance)
    gpu: str | None = None

    def __post_init__(self) -> None:
        check_names(self.coefficients)

    def apply(self, defaults: Coefficients) -> Coefficients:
        """`defaults` with the coefficients this calibration names replaced."""
        return defaults.overridden(self.coefficients)

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "name": self.name,
            "arch": self.arch,
            "gpu": self.gpu,
            "coefficients": dict(sorted(self.coefficients.items())),
            "provenance": {
                "origin": self.provenance.origin,
                "date": self.provenance.date,
                "runs": list(self.provenance.runs),
                "fit_error": dict(self.provenance.fit_error),
            },
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Calibration:
        if not isinstance(data, dict) or "coefficients" not in data or "arch" not in data:
            raise ValueError("a calibration is an object with `arch` and `coefficients`")
        arch = get_arch(str(data["arch"]))
        if arch is None:
            raise ValueError(f"unknown arch {data['arch']!r} in calibration")
        coeffs = data["coefficients"]
        if not isinstance(coeffs, dict) or not all(
                isinstance(v, int | float) for v in coeffs.values()):
            raise ValueError("calibration coefficients must map names to numbers")
        check_names(coeffs)
        prov = data.get("provenance") or {}
        return cls(
            name=str(data.get("name") or "calibration"),
            arch=arch.name,
            coefficients={str(k): float(v) for k, v in coeffs.items()},
            provenance=CalibrationProvenance(
                origin=str(prov.get("origin", "unknown")),
                date=str(prov.get("date", "")),
                runs=tuple(prov.get("runs", ())),
                fit_error={str(k): float(v) for k, v in (prov.get("fit_error") or {}).items()},
            ),
            gpu=data.get("gpu"),
        )


def to_plugin_item(cal: Calibration) -> Any:
    """The plugin system's `CalibrationItem` for a calibration (runs become examples)."""
    # an upward import the layers contract lists (pyproject.toml): the plugin API's type
    from cake_core.plugins.api import CalibrationItem

    examples = tuple(f"{r.get('kernel')} {r.get('dims')} on {r.get('gpu')}: "
                     f"{r.get('measured_ms')} ms" for r in cal.provenance.runs)
    return CalibrationItem(cal.name, cal.arch, dict(cal.coefficients),
                           Provenance(cal.provenance.origin, cal.provenance.date, examples))


def from_plugin_item(item: Any) -> Calibration:
    """A calibration from a plugin's `CalibrationItem` (name, arch, coefficients,
    provenance), checked like one read from JSON."""
    prov = getattr(item, "provenance", None)
    return Calibration.from_json({
        "name": item.name, "arch": item.arch, "coefficients": dict(item.coefficients),
        "provenance": {"origin": getattr(prov, "origin", "plugin"),
                       "date": getattr(prov, "date", ""),
                       "runs": [{"example": e} for e in getattr(prov, "examples", ())]},
    })


def load_calibrations(path: str | Path) -> list[Calibration]:
    """Calibrations from a JSON file holding one calibration object or a list of them."""
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    items = data if isinstance(data, list) else [data]
    return [Calibration.from_json(d) for d in items]


def pick_calibration(calibrations: list[Calibration], arch: str) -> Calibration | None:
    """The calibration for `arch` (the GPU's architecture), if the list has one."""
    spec = get_arch(arch)
    key = spec.name if spec else arch
    return next((c for c in calibrations if c.arch == key), None)


def save_calibrations(path: str | Path, calibrations: list[Calibration]) -> None:
    data: Any = [c.to_json() for c in calibrations]
    if len(calibrations) == 1:
        data = data[0]
    Path(path).write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
