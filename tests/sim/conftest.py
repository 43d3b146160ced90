"""Fixtures of the simulator tests: quick launches of kernels from files or IR."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from cake_core.sim import SimKernel, SimResult, run_schedules
from cake_core.sim.inputs import default_dims, random_inputs

DATA = Path(__file__).resolve().parent / "data"

Launch = Callable[..., list[SimResult]]


def _launch(sk: SimKernel, dims: dict[str, int] | None = None, *, schedules: int = 2,
            skip: tuple[str, ...] = ("C", "out"), seed: int = 0) -> list[SimResult]:
    d = dims or default_dims(sk)
    return run_schedules(sk, d, random_inputs(sk, d, seed=seed, skip=skip), n=schedules,
                         seed=seed)


@pytest.fixture
def launch() -> Launch:
    """Simulate a SimKernel with random inputs under the first n schedules."""
    return _launch


@pytest.fixture
def run_data() -> Launch:
    """Simulate a kernel from tests/sim/data by file name."""

    def run(name: str, dims: dict[str, int] | None = None, **kw: object) -> list[SimResult]:
        return _launch(SimKernel.from_file(DATA / name), dims, **kw)  # type: ignore[arg-type]

    return run


@pytest.fixture
def codes() -> Callable[[list[SimResult]], set[str]]:
    return lambda results: {d.code for r in results for d in r.diagnostics}
