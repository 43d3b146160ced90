"""The fp8 GEMM with fine-grained scaling: it matches an exact reference on a ragged shape,
the test would catch a kernel without the per-block promotion, and it lowers to the
fp8 wgmma and compiles without spills."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from cake_core.check import check_text
from cake_core.lower import lower_source
from cake_core.lower.toolchain import find_nvcc
from cake_core.sim import SimKernel
from cake_core.sim.tasks_run import run_task
from cake_core.source import SourceFile
from cake_core.tasks import load_task

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "gemm_fp8_sm90.cake"
TASK = ROOT / "examples" / "tasks" / "gemm_fp8.py"
RAGGED = {"M": 196, "N": 144, "K": 336}
"""M and N not multiples of the 128 tile, K not a multiple of the 128-value scale block."""

PROMOTION = """            blk = fragment(f32, (BM, BN), layout=wgmma_acc, fill=None)
            wgmma(blk, sa[s], sb[s].T, accumulate=False)   # blk = A @ B: no clearing
            # The scales are read while the tensor cores run: the row scales from the
            # stage, B's block scale from global memory (L2).
            scale = unsqueeze(load(ss[s]), 1) * load(SB.tile((1, 1), (block.y, k)))
            wgmma_wait(0)
            ab.release()
            acc = fma(blk, scale, acc)
"""


def _text() -> str:
    return EXAMPLE.read_text(encoding="utf-8")


def _simulate(text: str) -> bool:
    """Whether `text`'s kernel passes the task on the ragged shape (both schedules)."""
    sk = SimKernel.from_text(text, "examples/gemm_fp8_sm90.cake", "gemm_fp8_sm90")
    report = run_task(load_task(TASK), sk, shapes=[RAGGED], n_schedules=2)
    (shape,) = report.shapes
    assert shape.error is None, shape.error
    return shape.passed


def test_example_checks_clean_and_matches_the_reference_on_a_ragged_shape() -> None:
    result = check_text(_text(), "examples/gemm_fp8_sm90.cake")
    assert result.diagnostics == []
    assert _simulate(_text())


def test_dropping_the_promotion_fails_the_reference() -> None:
    """One accumulator for the whole K loop and no scales, as a plain GEMM would do: the
    same test must fail it, or it proves nothing about the promotion."""
    assert PROMOTION in _text()
    mutant = _text().replace(PROMOTION, """            wgmma(acc, sa[s], sb[s].T)
            wgmma_wait(0)
            ab.release()
""")
    assert not _simulate(mutant)


def test_a_block_accumulator_that_is_never_reset_fails_the_reference() -> None:
    """The block accumulator must restart in every K block: allocated once outside the
    loop and accumulated into, each promotion would add the earlier blocks again under the
    new scale.  (`accumulate=False` is what restarts it in the example.)"""
    text = _text()
    decl = "            blk = fragment(f32, (BM, BN), layout=wgmma_acc, fill=None)\n"
    mma = "wgmma(blk, sa[s], sb[s].T, accumulate=False)"
    assert decl in text and mma in text
    mutant = text.replace(decl, "").replace(mma, "wgmma(blk, sa[s], sb[s].T)").replace(
        "        acc = fragment(f32, (BM, BN), layout=wgmma_acc)\n",
        "        acc = fragment(f32, (BM, BN), layout=wgmma_acc)\n"
        "        blk = fragment(f32, (BM, BN), layout=wgmma_acc)\n")
    assert not _simulate(mutant)


def test_task_inputs_are_block_quantised_e4m3() -> None:
    """Each (row, K block) of A and each 128x128 block of B uses the whole e4m3 range (its
    largest magnitude is 448), so the scales carry the magnitudes, as in DeepGEMM."""
    task = load_task(TASK)
    dims = {"M": 130, "N": 136, "K": 272}
    x = task.inputs(dims, np.random.default_rng(1))
    assert x["SA"].shape == (3, 130) and x["SB"].shape == (2, 3)
    a = np.abs(x["A"]).reshape(130, -1)
    for kb in range(3):
        assert np.all(a[:, kb * 128:(kb + 1) * 128].max(axis=1) == 448.0)
    b = np.abs(x["B"])
    assert b[:128, :128].max() == 448.0 and b[128:, 256:].max() == 448.0
    c = task.reference(x, dims)["C"]
    assert c.shape == (130, 136) and 0.1 < float(np.abs(c).mean()) < 10.0


def test_lowers_to_the_fp8_wgmma() -> None:
    res = lower_source(SourceFile(_text(), "examples/gemm_fp8_sm90.cake"), cu_name="fp8.cu")
    assert res.cu is not None
    assert re.search(r"wgmma\.mma_async\.sync\.aligned\.m64n128k32\.f32\.e4m3\.e4m3", res.cu)
    assert "__fmaf_rn(blk[" in res.cu  # the promotion, in f32 on the CUDA cores


@pytest.mark.nvcc
@pytest.mark.skipif(find_nvcc() is None, reason="nvcc is not installed")
def test_compiles_without_spills(tmp_path: Path) -> None:
    from cake_core.lower.build import build_source
    from cake_core.lower.toolchain import find_toolchain

    rep = build_source(SourceFile(_text(), "examples/gemm_fp8_sm90.cake"),
                       toolchain=find_toolchain(), cache=tmp_path)
    assert rep.ok, [d.message for d in rep.diagnostics]
    assert rep.diagnostics == []
    (k,) = rep.kernels
    r = k.resources
    assert r is not None and (r.spill_stores, r.spill_loads, r.stack) == (0, 0, 0)


# --- the grouped (MoE, masked layout) variant ------------------------------------------
GROUPED = ROOT / "examples" / "grouped_gemm_sm90.cake"
GROUPED_TASK = ROOT / "examples" / "tasks" / "grouped_gemm.py"
GROUPED_RAGGED = {"G": 3, "MX": 196, "N": 144, "K": 208}


def _simulate_grouped(text: str) -> bool:
    sk = SimKernel.from_text(text, "examples/grouped_gemm_sm90.cake", "grouped_gemm_sm90")
    report = run_task(load_task(GROUPED_TASK), sk, shapes=[GROUPED_RAGGED], n_schedules=2)
    (shape,) = report.shapes
    assert shape.error is None, shape.error
    return shape.passed


def test_grouped_example_matches_the_reference_per_expert() -> None:
    text = GROUPED.read_text(encoding="utf-8")
    assert check_text(text, "examples/grouped_gemm_sm90.cake").diagnostics == []
    assert _simulate_grouped(text)


def test_grouped_example_with_one_experts_scales_fails() -> None:
    """Every expert reading expert 0's B scales must fail: the test sees the per-expert
    scale rows, not only the per-expert operands."""
    text = GROUPED.read_text(encoding="utf-8")
    row = "block.z * cdiv(N, BN) + block.y"
    assert row in text
    assert not _simulate_grouped(text.replace(row, "block.y"))

