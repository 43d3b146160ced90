"""Shared constants and helpers of the runner tests (imported as `run_support`)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from cake_core.check import check_text
from cake_core.run.fake import FakeDevice
from cake_core.run.protocol import TimingConfig
from cake_core.run.results import ShapeResult
from cake_core.run.tensors import TensorSpec, specs_from_kernel

ROOT = Path(__file__).resolve().parent.parent.parent
GEMM = ROOT / "examples" / "gemm_sm90.cake"
KMEANS = ROOT / "examples" / "kmeans_assign_sm90.cake"
SMALL = {"M": 64, "N": 48, "K": 32}
QUICK = TimingConfig(warmup=1, rounds=3, calls=4)

Run = Callable[..., tuple[ShapeResult, FakeDevice]]


def kernel_specs(path: Path, name: str | None = None) -> list[TensorSpec]:
    res = check_text(path.read_text(encoding="utf-8"), str(path), passes=[])
    assert res.program is not None
    k = next(k for k in res.program.kernels if name is None or k.name == name)
    return specs_from_kernel(k)
