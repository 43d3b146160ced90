"""`wgmma(..., accumulate=False)` and `fragment(..., fill=None)`: an accumulator written by
the tensor cores' scale-d 0 instead of cleared by moves.

Checked where each part lives: the type rule, CK335 on the text (straight, in a k-loop,
under a branch), the simulator's semantics (overwrite, NaN registers, CK511), the lowered
CUDA under emulation (a non-zero fill that `accumulate=False` must ignore), the SASS
(ptxas folds an ordinary zero fill into the first wgmma, which is why the cost model
charges neither spelling), and the cost model itself.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from sass_tools import sass_of

from cake_cli.main import main
from cake_core.check import check_text
from cake_core.cost.model import predict
from cake_core.emulate.build import host_compiler_present
from cake_core.fix import fix_source
from cake_core.hardware import get_gpu
from cake_core.lower.toolchain import find_nvcc
from cake_core.sim import SimKernel, simulate
from cake_core.sim.tasks_run import run_task
from cake_core.source import SourceFile
from cake_core.tasks import as_dtype, load_task

ROOT = Path(__file__).resolve().parents[1]
FP8 = ROOT / "examples" / "gemm_fp8_sm90.cake"
FP8_TEXT = FP8.read_text()
FP8_DECL = "blk = fragment(f32, (BM, BN), layout=wgmma_acc, fill=None)"
FP8_MMA = "wgmma(blk, sa[s], sb[s].T, accumulate=False)"

ONE_TILE = '''\
BM, BN, BK = 64, 64, 64
M, N = dim("M"), dim("N", multiple_of=8)

@kernel(arch="sm_90a", grid=(cdiv(M, BM), cdiv(N, BN)), warps=4)
def one_tile(A: Tensor[bf16, (M, BK)], B: Tensor[bf16, (N, BK)], C: Tensor[f32, (M, N)]):
    sa = smem(bf16, (BM, BK), layout=swizzle(128))
    sb = smem(bf16, (BN, BK), layout=swizzle(128))
    bar = mbarrier(count=1)
    fence_barrier_init()
    syncthreads()
    acc = fragment(f32, (BM, BN), layout=wgmma_acc, fill=None)
    bar.expect_tx((BM + BN) * BK * 2)
    tma_load(sa, A.tile((BM, BK), (block.x, 0)), bar)
    tma_load(sb, B.tile((BN, BK), (block.y, 0)), bar)
    bar.wait(0)
    wgmma(acc, sa, sb.T, accumulate=False)
    wgmma_wait(0)
    store(C.tile((BM, BN), (block.x, block.y)), acc)
'''
MMA = "    wgmma(acc, sa, sb.T, accumulate=False)\n"

# the k-loop form: one accumulator, the first K step's wgmma overwrites it
K_LOOP = ONE_TILE.replace(
    "A: Tensor[bf16, (M, BK)], B: Tensor[bf16, (N, BK)]",
    "A: Tensor[bf16, (M, 2 * BK)], B: Tensor[bf16, (N, 2 * BK)]").replace(
    "    bar.expect_tx((BM + BN) * BK * 2)\n"
    "    tma_load(sa, A.tile((BM, BK), (block.x, 0)), bar)\n"
    "    tma_load(sb, B.tile((BN, BK), (block.y, 0)), bar)\n"
    "    bar.wait(0)\n" + MMA + "    wgmma_wait(0)\n",
    "    for k in range(2):\n"
    "        bar.expect_tx((BM + BN) * BK * 2)\n"
    "        tma_load(sa, A.tile((BM, BK), (block.x, k)), bar)\n"
    "        tma_load(sb, B.tile((BN, BK), (block.y, k)), bar)\n"
    "        bar.wait(k % 2)\n"
    "        wgmma(acc, sa, sb.T, accumulate=k > 0)\n"
    "        wgmma_wait(0)\n"
    "        syncthreads()\n")


def _codes(text: str) -> list[str]:
    return [d.code for d in check_text(text, "k.cake").diagnostics]


def _one_tile_inputs(k: int) -> tuple[dict[str, np.ndarray], np.ndarray]:
    rng = np.random.default_rng(3)
    a = as_dtype(rng.standard_normal((64, k)), "bf16")
    b = as_dtype(rng.standard_normal((64, k)), "bf16")
    return {"A": a, "B": b}, a.astype(np.float64) @ b.astype(np.float64).T


def test_accumulate_takes_a_condition_not_a_number() -> None:
    assert _codes(ONE_TILE) == []
    assert _codes(ONE_TILE.replace("accumulate=False", "accumulate=0")) == ["CK104"]


def test_an_unfilled_accumulator_must_be_overwritten_first() -> None:
    accumulating = ONE_TILE.replace(MMA, "    wgmma(acc, sa, sb.T)\n")
    assert _codes(accumulating) == ["CK335"]
    read_first = ONE_TILE.replace(MMA, "    store(C.tile((BM, BN), (block.x, block.y)), acc)\n"
                                  + MMA)
    assert _codes(read_first) == ["CK335"]
    branch = ONE_TILE.replace(MMA, "    if block.x > 0:\n    " + MMA)
    assert "CK335" in _codes(branch)


def test_the_fix_clears_the_fragment_again() -> None:
    accumulating = ONE_TILE.replace(MMA, "    wgmma(acc, sa, sb.T)\n")
    fixed = fix_source(SourceFile(accumulating, "k.cake")).source.text
    assert "fill=None" not in fixed and _codes(fixed) == []


def test_a_k_loop_overwrites_on_its_first_trip_only() -> None:
    assert _codes(K_LOOP) == []
    # false on the first trip only if it compares with the loop's start
    assert _codes(K_LOOP.replace("accumulate=k > 0", "accumulate=k > 1")) == ["CK335"]
    inputs, want = _one_tile_inputs(128)
    r = simulate(SimKernel.from_text(K_LOOP, "k.cake"), {"M": 64, "N": 64}, inputs)
    assert r.diagnostics == []
    np.testing.assert_allclose(r.outputs["C"], want, rtol=1e-5, atol=1e-4)


def test_the_simulator_overwrites_and_poisons() -> None:
    inputs, want = _one_tile_inputs(64)
    r = simulate(SimKernel.from_text(ONE_TILE, "k.cake"), {"M": 64, "N": 64}, inputs)
    assert r.diagnostics == []
    np.testing.assert_allclose(r.outputs["C"], want, rtol=1e-5, atol=1e-4)
    # a non-zero fill is ignored by an overwriting wgmma and added by an accumulating one
    filled = ONE_TILE.replace("fill=None", "fill=3.0")
    r = simulate(SimKernel.from_text(filled, "k.cake"), {"M": 64, "N": 64}, inputs)
    np.testing.assert_allclose(r.outputs["C"], want, rtol=1e-5, atol=1e-4)
    adds = filled.replace(MMA, "    wgmma(acc, sa, sb.T)\n")
    r = simulate(SimKernel.from_text(adds, "k.cake"), {"M": 64, "N": 64}, inputs)
    np.testing.assert_allclose(r.outputs["C"], want + 3.0, rtol=1e-5, atol=1e-4)
    # silenced statically, the read of the unwritten registers is found at run time
    silenced = ONE_TILE.replace(MMA, "    wgmma(acc, sa, sb.T)  # cake: ignore[CK335]\n")
    r = simulate(SimKernel.from_text(silenced, "k.cake"), {"M": 64, "N": 64}, inputs)
    assert [d.code for d in r.diagnostics] == ["CK511"]
    assert np.isnan(r.outputs["C"]).all()


def _fp8(fill: str, accumulate: bool) -> str:
    decl = FP8_DECL.replace("fill=None", fill)
    mma = FP8_MMA if not accumulate else FP8_MMA.replace(", accumulate=False", "")
    text = FP8_TEXT.replace(FP8_DECL, decl).replace(FP8_MMA, mma)
    assert text.count(decl) == 1 and text.count(mma) == 1
    return text


def test_the_fp8_gemm_block_accumulator_is_overwritten_in_the_simulator() -> None:
    task = load_task("gemm_fp8")
    # the task's block scales are small (~1e-3): a fill must be large to show in C
    ok = _fp8("fill=1e4", accumulate=False)
    assert run_task(task, SimKernel.from_text(ok, "k.cake"), n_schedules=1).passed
    wrong = _fp8("fill=1e4", accumulate=True)
    assert not run_task(task, SimKernel.from_text(wrong, "k.cake"), n_schedules=1).passed


@pytest.mark.slow
@pytest.mark.skipif(not host_compiler_present(), reason="needs a host C++ compiler")
@pytest.mark.parametrize("accumulate", [False, True])
def test_the_lowered_scale_d_overwrites_under_emulation(tmp_path: Path,
                                                        accumulate: bool) -> None:
    path = tmp_path / "k.cake"
    path.write_text(_fp8("fill=1e4", accumulate=accumulate))
    r = CliRunner().invoke(main, ["run", str(path), "--task", "gemm_fp8", "--emulate",
                                  "--dims", "M=128,N=128,K=256"])
    assert "shapes correct" in r.output, r.output  # it ran and was compared
    assert (r.exit_code == 0) is (not accumulate), r.output


def _time(text: str, dims: dict[str, int]) -> float:
    program = check_text(text, "k.cake").program
    assert program is not None
    return predict(program.kernels[0], dims, get_gpu("h200")).seconds


def test_the_cost_model_charges_neither_spelling_of_a_cleared_accumulator() -> None:
    dims = {"M": 4096, "N": 7168, "K": 7168}
    spellings = (FP8_TEXT, _fp8("fill=0", accumulate=False), _fp8("fill=0", accumulate=True))
    t = {text: _time(text, dims) for text in spellings}
    assert len(set(t.values())) == 1, t
    # a fill that an element-wise op reads first is real work
    kept = _fp8("fill=0", True).replace(
        "            wgmma(blk, sa[s], sb[s].T)",
        "            blk = blk * 1.0\n            wgmma(blk, sa[s], sb[s].T)")
    t_kept = _time(kept, dims)
    assert t_kept > t[FP8_TEXT]


@pytest.mark.slow
@pytest.mark.skipif(find_nvcc() is None, reason="needs nvcc")
def test_ptxas_folds_a_zero_fill_into_the_first_wgmma(tmp_path: Path) -> None:
    """The fact the cost model relies on: with the default zero fill, the first QGMMA of
    each block reads RZ (scale-d 0), exactly as with fill=None and accumulate=False."""
    for text in (FP8_TEXT, _fp8("fill=0", accumulate=True)):
        path, cubin = tmp_path / "k.cake", tmp_path / "k.cubin"
        path.write_text(text)
        r = CliRunner().invoke(main, ["compile", str(path), "-o", str(cubin)])
        assert r.exit_code == 0, r.output
        assert "spills 0 B" in r.output
        mmas = re.findall(r"QGMMA\.\S+ (R\d+), gdesc\[\w+\], (\w+)", sass_of(cubin))
        assert mmas and mmas[0][1] == "RZ", mmas
        assert all(c == d for d, c in mmas[1:]), mmas
