"""Each shape's inputs and reference computed once and shared by the candidates on it."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np
from run_support import QUICK, SMALL

from cake_core.run.fake import FakeBaseline, FakeDevice, fake_kernel
from cake_core.run.protocol import TimingConfig, run_shape
from cake_core.run.refcache import ReferenceCache
from cake_core.run.results import ShapeResult
from cake_core.run.tensors import TensorSpec
from cake_core.tasks import Task


def counting(task: Task) -> tuple[Task, dict[str, int]]:
    """`task` with its inputs and reference counted."""
    calls = {"inputs": 0, "reference": 0}

    def inputs(dims: Any, rng: Any) -> Any:
        calls["inputs"] += 1
        return task.inputs(dims, rng)

    def reference(host: Any, dims: Any) -> Any:
        calls["reference"] += 1
        return task.reference(host, dims)

    return dataclasses.replace(task, inputs=inputs, reference=reference), calls


def _run(task: Task, specs: list[TensorSpec], cache: Path | None,
         timing: TimingConfig = QUICK, behaviour: str = "correct",
         kernel_task: Task | None = None) -> ShapeResult:
    """`kernel_task`: the task the fake kernel computes its answer with (an uncounted one,
    so only the protocol's own calls are counted)."""
    kernel = fake_kernel(kernel_task or task, specs, behaviour)
    return run_shape(FakeDevice(), kernel, task, SMALL,
                     baseline=FakeBaseline(kernel_task or task, 1.0),
                     timing=timing, reference_cache=cache)


def test_the_second_candidate_on_a_shape_computes_nothing_again(
        gemm_task: Task, gemm_specs: list[TensorSpec], tmp_path: Path) -> None:
    task, calls = counting(gemm_task)
    first = _run(task, gemm_specs, tmp_path, kernel_task=gemm_task)
    assert first.correct and calls == {"inputs": 2, "reference": 2 + 1}  # + the perturbed
    second = _run(task, gemm_specs, tmp_path, kernel_task=gemm_task)
    assert second.correct
    assert calls == {"inputs": 2, "reference": 3 + 1}, \
        "only the perturbed round's reference (random inputs) is computed again"


def test_a_cached_reference_still_catches_a_wrong_kernel(
        gemm_task: Task, gemm_specs: list[TensorSpec], tmp_path: Path) -> None:
    assert _run(gemm_task, gemm_specs, tmp_path).correct
    res = _run(gemm_task, gemm_specs, tmp_path, behaviour="wrong")
    assert not res.correct and res.findings[0].code == "CK701"


def test_without_a_directory_nothing_is_cached(gemm_task: Task, gemm_specs: list[TensorSpec]
                                               ) -> None:
    task, calls = counting(gemm_task)
    _run(task, gemm_specs, None, TimingConfig(enabled=False), kernel_task=gemm_task)
    _run(task, gemm_specs, None, TimingConfig(enabled=False), kernel_task=gemm_task)
    assert calls == {"inputs": 4, "reference": 4}


def test_an_edited_task_file_misses_the_cache(gemm_task: Task, tmp_path: Path) -> None:
    copy = tmp_path / "gemm_copy.py"
    copy.write_bytes(Path(gemm_task.path).read_bytes())
    task = dataclasses.replace(gemm_task, path=str(copy))
    cache = ReferenceCache(tmp_path / "refs")
    host = task.inputs(SMALL, np.random.default_rng(0))
    cache.store(task, SMALL, 0, host, task.reference(host, SMALL))
    assert cache.load(task, SMALL, 0) is not None
    assert cache.load(task, SMALL, 1) is None and cache.load(task, {**SMALL, "K": 64}, 0) is None
    copy.write_bytes(copy.read_bytes() + b"\n# edited\n")
    assert cache.load(task, SMALL, 0) is None


def test_arrays_and_scalars_round_trip_and_damage_means_a_miss(gemm_task: Task,
                                                               tmp_path: Path) -> None:
    cache = ReferenceCache(tmp_path)
    host = {"A": np.arange(6, dtype=np.float32).reshape(2, 3), "alpha": np.float32(0.5),
            "n": np.int32(7)}
    want = {"C": np.ones((2, 2), dtype=np.int32)}
    cache.store(gemm_task, SMALL, 3, host, want)
    got = cache.load(gemm_task, SMALL, 3)
    assert got is not None
    h, w = got
    np.testing.assert_array_equal(h["A"], host["A"])
    assert h["A"].dtype == np.float32 and np.ndim(h["alpha"]) == 0
    assert h["alpha"] == np.float32(0.5) and h["n"].dtype == np.int32
    np.testing.assert_array_equal(w["C"], want["C"])
    (entry,) = tmp_path.glob("*.npz")
    entry.write_bytes(b"not a zip")
    assert cache.load(gemm_task, SMALL, 3) is None
