"""examples/grouped_gemm_sm90_routed.cake: a grouped GEMM that follows per-expert counts and
offsets read from memory (`load_scalar`), against examples/tasks/grouped_gemm_routed.py.

The task's routing has an empty expert and ragged counts, and the padding rows of A hold
noise, so a kernel that ignores the counts (no mask of the padding rows, or every
expert at a fixed capacity) fails the reference in the simulator.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest
from kernel_support import assert_emulates

from cake_core.check import check_text
from cake_core.cost.model import predict
from cake_core.emulate.build import host_compiler_present
from cake_core.sim import SimKernel
from cake_core.sim.tasks_run import run_task
from cake_core.tasks import load_task

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "grouped_gemm_sm90_routed.cake"
TASK = ROOT / "examples" / "tasks" / "grouped_gemm_routed.py"
TEXT = EXAMPLE.read_text(encoding="utf-8")
MASK = "            acc = where(lt(row_index(acc) + t * BM, rows), acc, 0.0)\n"
TRIPS = "    mtiles = cdiv(rows, BM)"


def _sim(text: str) -> bool:
    res = check_text(text, "examples/grouped_gemm_sm90_routed.cake")
    assert res.errors == [], [d.message for d in res.errors]
    sk = SimKernel.from_text(text, "examples/grouped_gemm_sm90_routed.cake",
                             "grouped_gemm_sm90_routed")
    return run_task(load_task(str(TASK)), sk, n_schedules=2).passed


def _routing(dims: dict[str, int]) -> tuple[np.ndarray, np.ndarray]:
    """The routing arrays of a shape, without the (multi-GB at the headline) matrices."""
    spec = importlib.util.spec_from_file_location("grouped_gemm_routed_task", TASK)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    counts = module.counts_for(dims["G"], dims["MT"], np.random.default_rng(0))
    return counts, module.offsets_for(counts)


def test_the_routing_has_an_empty_expert_ragged_counts_and_fills_the_rows() -> None:
    task = load_task(str(TASK))
    small = task.sim_shapes[0].dims
    x = task.inputs(small, np.random.default_rng(0))
    counts, offsets = _routing(small)  # what the task's inputs hold
    assert np.array_equal(x["Counts"], counts) and np.array_equal(x["Offsets"], offsets)
    for shape in (*task.sim_shapes, *task.shapes):
        counts, offsets = _routing(dict(shape.dims))
        assert counts[1] == 0 and (counts % 128 != 0).any()
        assert offsets[0] == 0 and offsets[-1] == shape.dims["MT"]
        assert (np.diff(offsets) == -(-counts // 128) * 128).all()


def test_the_routed_kernel_matches_the_reference_in_the_simulator() -> None:
    assert _sim(TEXT)


@pytest.mark.parametrize(("old", "new"), [
    (MASK, ""),                                           # padding rows written through
    (TRIPS, "    mtiles = cdiv(MT, BM * G)"),             # a fixed capacity per expert
], ids=["no-padding-mask", "ignores-the-counts"])
def test_a_kernel_that_ignores_the_counts_fails(old: str, new: str) -> None:
    assert old in TEXT
    assert not _sim(TEXT.replace(old, new))


def test_the_cost_model_prices_the_expected_rows_per_expert() -> None:
    res = check_text(TEXT, "examples/grouped_gemm_sm90_routed.cake")
    assert res.program is not None
    kernel = res.program.kernels[0]
    p = predict(kernel, {"G": 8, "MT": 8192, "N": 4096, "K": 7168})
    # expect=MT // G: 8 tiles of 128 rows per expert, 2 * 8192 * 4096 * 7168 flops in all
    assert p.work["tensor_flops"] == pytest.approx(2 * 8192 * 4096 * 7168, rel=0.01)


@pytest.mark.slow
@pytest.mark.skipif(not host_compiler_present(), reason="needs a host C++ compiler")
def test_the_lowered_kernel_matches_under_emulation() -> None:
    assert_emulates(EXAMPLE, load_task(str(TASK)), {"G": 3, "MT": 512, "N": 256, "K": 128},
                    seeds=(0,))
