"""Ragged and causal attention: the key masks against the float64 reference (mutants that
drop a mask must fail), the causal tile skipping as the IR states it, its price in the
cost model, the emulated lowering and a clean nvcc build."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from cake_cli.main import main
from cake_core.check import check_text
from cake_core.cost.model import predict, profile
from cake_core.emulate.build import host_compiler_present
from cake_core.hardware import get_gpu
from cake_core.sim import SimKernel
from cake_core.sim.tasks_run import run_task
from cake_core.tasks import load_task

ROOT = Path(__file__).resolve().parents[1]
CAUSAL = ROOT / "examples" / "attention_fwd_sm90_causal.cake"
PLAIN = ROOT / "examples" / "attention_fwd_sm90.cake"
PINGPONG = ROOT / "examples" / "attention_fwd_sm90_pingpong.cake"
RAGGED = "s = where(lt(col_index(s) + j * BN, S), s, -inf)"
CAUSAL_WG0 = "s = where(le(col_index(s) + j * BN, row_index(s) + 2 * qt * BM), s, -inf)"
CAUSAL_WG1 = "s = where(le(col_index(s) + j * BN, row_index(s) + (2 * qt + 1) * BM), s, -inf)"
HEADLINE = {"BH": 256, "S": 4096}


def _sim(text: str, task: str, name: str) -> bool:
    res = check_text(text, f"{name}.cake")
    assert res.errors == [], [d.message for d in res.errors]
    return run_task(load_task(task), SimKernel.from_text(text, f"{name}.cake"),
                    n_schedules=1).passed


def test_the_causal_kernel_checks_clean() -> None:
    assert check_text(CAUSAL.read_text(encoding="utf-8"), str(CAUSAL)).diagnostics == []


def test_the_causal_kernel_matches_the_reference_on_every_sim_shape() -> None:
    task = load_task("attention_fwd_causal")
    report = run_task(task, SimKernel.from_file(CAUSAL, CAUSAL.stem), n_schedules=2)
    assert report.passed, [(s.dims, s.error) for s in report.shapes]
    assert len(report.shapes) == len(task.sim_shapes) == 5
    assert any(s.dims["S"] % 64 for s in report.shapes)     # a ragged last key tile


@pytest.mark.parametrize("needle", [CAUSAL_WG0, CAUSAL_WG1], ids=["wg0", "wg1"])
def test_dropping_a_causal_mask_fails_the_reference(needle: str) -> None:
    text = CAUSAL.read_text(encoding="utf-8")
    assert text.count(needle) == 1
    assert not _sim(text.replace(needle, "s = s * 1.0"), "attention_fwd_causal", "mutant")


def test_the_non_causal_kernel_fails_the_causal_reference() -> None:
    """The causal task is another function: the plain kernel (same inputs) must not pass."""
    assert not _sim(PLAIN.read_text(encoding="utf-8"), "attention_fwd_causal", "plain")


def test_dropping_the_ragged_key_mask_fails_the_reference() -> None:
    """Zero-filled keys past S score 0 and would join the softmax of the last tile.  (The
    ping-pong kernel has no key mask: it takes S a multiple of its key tile.)"""
    text = PLAIN.read_text(encoding="utf-8")
    assert RAGGED in text
    assert _sim(text, "attention_fwd", "ragged")
    assert not _sim(text.replace(RAGGED, "s = s * 1.0"), "attention_fwd", "mutant")


def test_the_loops_stop_at_the_diagonal() -> None:
    """Producer and both consumers walk the same NT key tiles, up to the diagonal."""
    text = CAUSAL.read_text(encoding="utf-8")
    assert "NT = min(cdiv(S, BN), cdiv((qt + 1) * 2 * BM, BN))" in text
    assert "qt = cdiv(S, 2 * BM) - 1 - block.x" in text
    assert text.count("for j in range(NT):") == 3
    assert "cdiv(S, BN))" not in text.replace("NT = min(cdiv(S, BN),", "")


def _time(path: Path, dims: dict[str, int]) -> float:
    [k] = check_text(path.read_text(encoding="utf-8"), str(path)).program.kernels
    return predict(k, dims, get_gpu("h200")).seconds


def test_the_cost_model_sees_the_skipped_tiles() -> None:
    """A block of query tile qt walks 2 * (qt + 1) of the 64 key tiles at S = 4096: 33 of
    64 on average, so causal costs a bit more than half the ping-pong kernel it derives
    from (the masked diagonal tiles and the fixed prologue and epilogue make up the rest)."""
    causal, full = _time(CAUSAL, HEADLINE), _time(PINGPONG, HEADLINE)
    assert 33 / 64 <= causal / full < 0.6, (causal, full)


# --- the cost model: loops and branches that depend on the block index -------------------
TRIANGLE = '''\
BM, NC = 4, 128
M = dim("M")
N = dim("N")

@kernel(arch="sm_90a", grid=(cdiv(M, BM),), warps=4)
def triangle(X: Tensor[f32, (M, N)], Y: Tensor[f32, (M,)]):
    m = fragment(f32, (BM,), fill=-inf)
    for j in range(min(block.x + 1, cdiv(N, NC))):
        x = load(X.tile((BM, NC), (block.x, j)))
        if j == block.x:
            x = where(le(col_index(x) + j * NC, row_index(x) + block.x * BM), x, -inf)
        m = maximum(m, row_max(x))
    store(Y.tile((BM,), (block.x,)), m)
'''


def test_a_block_dependent_trip_count_is_priced_at_its_mean_over_the_blocks() -> None:
    """8 blocks walk min(b + 1, 5) tiles: 1, 2, 3, 4, 5, 5, 5, 5, i.e. 3.75 on average.  The
    middle block (b = 3) would say 4 and the longest 5; the branch taken once per block
    that reaches its own diagonal (5 times in 30 iterations) runs 3.75 / 6 times."""
    [k] = check_text(TRIANGLE, "triangle.cake").program.kernels
    execs = {w.op.prim.key: w.execs for w in profile(k, {"M": 32, "N": 640}).ops}
    assert execs["load"] == pytest.approx(3.75)
    assert execs["where"] == pytest.approx(3.75 * 5 / 30)
    assert execs["store"] == pytest.approx(1.0)


# --- the lowered kernel ---------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.skipif(not host_compiler_present(), reason="needs a host C++ compiler")
def test_the_emulated_lowering_matches_the_reference() -> None:
    out = CliRunner().invoke(main, ["run", str(CAUSAL), "--task", "attention_fwd_causal",
                                    "--emulate"])
    assert out.exit_code == 0, out.output
    assert "5/5 shapes correct" in out.output


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
def test_nvcc_builds_it_without_spills_or_serialized_wgmma() -> None:
    out = CliRunner().invoke(main, ["compile", str(CAUSAL)])
    assert out.exit_code == 0, out.output
    assert "spills 0 B stores / 0 B loads" in out.output, out.output
    assert "CK604" not in out.output, out.output
