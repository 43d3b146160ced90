"""The analytical cost model: cost facets + hardware peaks + coefficients -> seconds.

Two steps, so that calibration can refit coefficients without re-walking kernels:
`profile(kernel, dims, gpu)` (`work.py`) walks the kernel once and records what each op
does and how often, and `estimate(profile, coefficients)` (`timing.py`) turns that into
time, credited to ops, source lines and categories (`prediction.py`).  This module is
the public entry point: `predict` does both steps.
"""

from __future__ import annotations

from collections.abc import Mapping

from cake_core.cost.calibration import Calibration
from cake_core.cost.coefficients import Coefficients
from cake_core.cost.prediction import CATEGORIES, LineShare, Prediction
from cake_core.cost.timing import estimate
from cake_core.cost.work import (
    EPILOGUE,
    PROLOGUE,
    STEADY,
    CostError,
    KernelProfile,
    OpWork,
    WaveShape,
    cost_context,
    profile,
    required_dims,
    resolve_gpu,
)
from cake_core.hardware import GpuSpec
from cake_core.ir.kernel import Kernel

__all__ = [
    "CATEGORIES", "EPILOGUE", "PROLOGUE", "STEADY", "CostError", "KernelProfile", "LineShare",
    "OpWork", "Prediction", "WaveShape", "cost_context", "estimate", "predict", "profile",
    "required_dims", "resolve_gpu",
]


def predict(kernel: Kernel, dims: Mapping[str, int], gpu: GpuSpec | None = None, *,
            calibration: Calibration | None = None,
            coefficients: Coefficients | None = None) -> Prediction:
    """profile + estimate in one call."""
    return estimate(profile(kernel, dims, gpu), coefficients, calibration)
