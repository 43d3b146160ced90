"""examples/attention_fwd_sm90_varlen.cake: attention over sequences of different lengths in
one launch, against examples/tasks/attention_fwd_varlen.py.

The task's lengths are ragged (none but the longest a multiple of the tile, one query tile
past a short sequence's end) and the padding rows of Q, K and Vt hold noise, so a kernel
that attends past a sequence's end, writes its padding through, or takes every sequence at
the longest length fails the reference in the simulator.
"""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest
from kernel_support import assert_builds_clean, assert_emulates

from cake_core.check import check_text
from cake_core.cost.model import predict
from cake_core.emulate.build import host_compiler_present
from cake_core.hardware import get_gpu
from cake_core.sim import SimKernel
from cake_core.sim.tasks_run import run_task
from cake_core.tasks import load_task

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "attention_fwd_sm90_varlen.cake"
TASK = ROOT / "examples" / "tasks" / "attention_fwd_varlen.py"
PLAIN = ROOT / "examples" / "attention_fwd_sm90.cake"
TEXT = EXAMPLE.read_text(encoding="utf-8")
NAME = "attention_fwd_sm90_varlen"
KEY_MASK = "s = where(lt(col_index(s) + j * BN, n), s, -inf)"
ROW_MASK = "            o = where(lt(row_index(o) + block.x * BM, n), o, 0.0)\n"
HEADLINE = {"B": 16, "H": 16, "T": 40960, "SMAX": 4096}


def _sim(text: str) -> bool:
    res = check_text(text, "examples/attention_fwd_sm90_varlen.cake")
    assert res.errors == [], [d.message for d in res.errors]
    sk = SimKernel.from_text(text, "examples/attention_fwd_sm90_varlen.cake", NAME)
    return run_task(load_task(str(TASK)), sk, n_schedules=2).passed


def _task_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("attention_fwd_varlen_task", TASK)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_lengths_are_ragged_and_the_padded_sequences_fill_the_rows() -> None:
    module = _task_module()
    task = load_task(str(TASK))
    for shape in (*task.sim_shapes, *task.shapes):
        d = dict(shape.dims)
        for seed in range(5):
            lens = module.lengths_for(d["B"], d["T"], d["SMAX"], np.random.default_rng(seed))
            offsets = module.offsets_for(lens)
            assert lens.max() == d["SMAX"] and lens.min() >= 1
            assert lens[-1] % 64 != 0                        # a ragged last key tile
            assert offsets[0] == 0 and offsets[-1] == d["T"]
            assert (np.diff(offsets) == -(-lens // 128) * 128).all()
    small = task.sim_shapes[0].dims
    x = task.inputs(small, np.random.default_rng(0))
    # a short sequence leaves a query tile of the grid idle
    assert (x["Lens"] <= 128).any() and small["SMAX"] > 128


def test_the_reference_is_attention_within_each_sequence() -> None:
    """The float64 reference, read back one sequence and head at a time."""
    task = load_task(str(TASK))
    dims = dict(task.sim_shapes[1].dims)
    x = task.inputs(dims, np.random.default_rng(3))
    o = task.reference(x, dims)["O"].astype(np.float64)
    d = 128
    for b, (lo, n) in enumerate(zip(x["Offsets"][:-1], x["Lens"], strict=True)):
        hi = x["Offsets"][b + 1]
        assert not o[lo + n:hi].any()                         # padding rows are 0
        q = x["Q"].astype(np.float64)[lo:lo + n, :d]
        k = x["K"].astype(np.float64)[lo:lo + n, :d]
        v = x["Vt"].astype(np.float64)[:d, lo:lo + n].T
        s = q @ k.T / np.sqrt(d)
        p = np.exp(s - s.max(axis=1, keepdims=True))
        want = (p @ v) / p.sum(axis=1, keepdims=True)
        assert np.allclose(o[lo:lo + n, :d], want, atol=1e-2)


def test_the_varlen_kernel_matches_the_reference_in_the_simulator() -> None:
    assert _sim(TEXT)


@pytest.mark.parametrize(("old", "new"), [
    (KEY_MASK, "s = s * 1.0"),                                   # attends to the padding
    (ROW_MASK, ""),                                              # padding written through
    ("cdiv(n, BN)", "cdiv(SMAX, BN)"),                           # every sequence at SMAX
], ids=["no-key-mask", "no-padding-mask", "longest-length-for-all"])
def test_a_kernel_that_ignores_the_lengths_fails(old: str, new: str) -> None:
    assert old in TEXT
    assert not _sim(TEXT.replace(old, new))


def test_the_cost_model_prices_the_expected_length_and_skips_idle_query_tiles() -> None:
    """`expect=T // B` prices every sequence at the mean padded length, and the query tiles
    past it (`if block.x * BM < n`) at the share of the grid that runs: the same work, and
    about the same time, as the plain kernel over (B * H) problems of that length."""
    res = check_text(TEXT, "examples/attention_fwd_sm90_varlen.cake")
    assert res.program is not None
    varlen = predict(res.program.kernels[0], HEADLINE, gpu=get_gpu("h200"))
    plain_res = check_text(PLAIN.read_text(encoding="utf-8"), str(PLAIN))
    assert plain_res.program is not None
    n = HEADLINE["T"] // HEADLINE["B"]
    plain = predict(plain_res.program.kernels[0], {"BH": 16 * 16, "S": n}, gpu=get_gpu("h200"))
    flops = 4 * 16 * 16 * n * n * 128
    assert varlen.work["tensor_flops"] == pytest.approx(flops, rel=0.01)
    assert varlen.seconds == pytest.approx(plain.seconds, rel=0.05)


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
def test_the_varlen_kernel_compiles_with_no_spills() -> None:
    assert_builds_clean(EXAMPLE)


@pytest.mark.slow
@pytest.mark.skipif(not host_compiler_present(), reason="needs a host C++ compiler")
def test_the_lowered_kernel_matches_under_emulation() -> None:
    assert_emulates(EXAMPLE, load_task(str(TASK)), {"B": 3, "H": 2, "T": 512, "SMAX": 200},
                    seeds=(0,))
