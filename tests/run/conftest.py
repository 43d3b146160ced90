"""Fixtures of the runner tests: tasks, kernel interfaces and a quick FakeDevice run."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

_HERE = str(Path(__file__).resolve().parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)

from run_support import GEMM, KMEANS, QUICK, SMALL, Run, kernel_specs  # noqa: E402

from cake_core.run.fake import FakeBaseline, FakeDevice, fake_kernel  # noqa: E402
from cake_core.run.protocol import TimingConfig, run_shape  # noqa: E402
from cake_core.run.results import ShapeResult  # noqa: E402
from cake_core.run.tensors import TensorSpec  # noqa: E402
from cake_core.tasks import Task, load_task  # noqa: E402


@pytest.fixture(scope="session")
def gemm_task() -> Task:
    return load_task("gemm_bf16")


@pytest.fixture(scope="session")
def kmeans_task() -> Task:
    return load_task("kmeans_assign")


@pytest.fixture(scope="session")
def gemm_specs() -> list[TensorSpec]:
    return kernel_specs(GEMM)


@pytest.fixture(scope="session")
def kmeans_specs() -> list[TensorSpec]:
    return kernel_specs(KMEANS)


@pytest.fixture
def run_fake(gemm_task: Task, gemm_specs: list[TensorSpec]) -> Run:
    """Run a named fake behaviour through the protocol on the GEMM task, in process."""

    def run(behaviour: str, *, dims: dict[str, int] | None = None, baseline_ms: float = 1.0,
            timing: TimingConfig = QUICK, task: Task | None = None,
            specs: list[TensorSpec] | None = None, **kw: Any) -> tuple[ShapeResult, FakeDevice]:
        t = task or gemm_task
        dev = FakeDevice()
        params = {k: kw.pop(k) for k in ("calls", "seconds") if k in kw}
        kernel = fake_kernel(t, specs or gemm_specs, behaviour, cost_ms=kw.pop("cost_ms", None),
                             **params)
        res = run_shape(dev, kernel, t, dims or SMALL, baseline=FakeBaseline(t, baseline_ms),
                        timing=timing, **kw)
        return res, dev

    return run
