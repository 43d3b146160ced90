"""Attention forward at head dims 64 and 256: each kernel against its task's float64
reference (simulator and CPU emulator), a wrong softmax scale caught by that reference, the
budgets each design is sized to (shared memory, registers per role), and a spill-free nvcc
build."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from cake_cli.main import main
from cake_core.check import check_text
from cake_core.emulate.build import host_compiler_present
from cake_core.hardware import get_arch
from cake_core.ir.kernel import Role
from cake_core.sim import SimKernel
from cake_core.sim.tasks_run import run_task
from cake_core.tasks import Task, load_task
from cake_core.verify.smem_plan import smem_plan

ROOT = Path(__file__).resolve().parents[1]
CASES = [pytest.param(64, id="d64"), pytest.param(256, id="d256")]
#: The scale constant each kernel folds into exp2, log2(e) / sqrt(D).
SCALES = {64: "0.18033688011112042", 256: "0.09016844005556021"}


def _path(d: int) -> Path:
    return ROOT / "examples" / f"attention_fwd_sm90_d{d}.cake"


def _task(d: int) -> Task:
    return load_task(f"attention_fwd_d{d}")


@pytest.mark.parametrize("d", CASES)
def test_it_checks_clean(d: int) -> None:
    path = _path(d)
    assert check_text(path.read_text(encoding="utf-8"), str(path)).diagnostics == []


@pytest.mark.parametrize("d", CASES)
def test_the_simulator_matches_the_reference(d: int) -> None:
    report = run_task(_task(d), SimKernel.from_file(_path(d), _path(d).stem), n_schedules=2)
    assert report.passed, [(s.dims, s.error) for s in report.shapes]
    assert len(report.shapes) == 2
    assert any(s.label == "query tile past S" for s in report.shapes)


@pytest.mark.parametrize("d", CASES)
def test_a_wrong_scale_is_caught_by_the_reference(d: int) -> None:
    """The scale of attention_fwd (D = 128) is a plausible slip; it stays well-formed."""
    text = _path(d).read_text(encoding="utf-8")
    bad = text.replace(f"SCALE_LOG2 = {SCALES[d]}", "SCALE_LOG2 = 0.12751743074602467")
    assert bad != text
    assert check_text(bad, "attention.cake").diagnostics == []
    report = run_task(_task(d), SimKernel.from_text(bad, _path(d).name), n_schedules=1)
    assert not report.passed


def test_d64_uses_a_128_key_tile_and_three_consumer_warpgroups() -> None:
    """What D = 64 buys: a wider key tile, deeper prefetch and a third warpgroup in the
    ring, with the producer at the setmaxnreg floor so the consumers get 160."""
    text = _path(64).read_text(encoding="utf-8")
    assert "BM, BN = 64, 128" in text and "STAGES = 4" in text
    k = check_text(text, "d64.cake").program.kernels[0]
    regs = {r.name: r.regs for r in k.body if isinstance(r, Role)}
    assert regs == {"load": 24, "wg0": 160, "wg1": 160, "wg2": 160}
    assert 4 * 32 * 24 + 12 * 32 * 160 <= 65536
    arch = get_arch(k.arch)
    assert arch is not None
    # Q 3 x 64 x 64, then per stage K 128 x 64 and Vt 64 x 128, all bf16, + barriers
    assert smem_plan(k, arch).total >= 3 * 64 * 64 * 2 + 4 * 2 * 128 * 64 * 2


def test_d256_fits_two_stages_in_shared_memory_and_o_in_registers() -> None:
    """What D = 256 costs: Q is 64 KB and a stage 64 KB, so two stages; the O slice of a
    consumer thread is 64 * 256 / 128 = 128 f32 registers under a 232 cap."""
    text = _path(256).read_text(encoding="utf-8")
    assert "BM, BN = 64, 64" in text and "STAGES = 2" in text
    k = check_text(text, "d256.cake").program.kernels[0]
    regs = {r.name: r.regs for r in k.body if isinstance(r, Role)}
    assert regs == {"load": 40, "wg0": 232, "wg1": 232}
    arch = get_arch(k.arch)
    assert arch is not None
    total = smem_plan(k, arch).total
    assert 2 * 64 * 256 * 2 + 2 * 2 * 64 * 256 * 2 <= total <= 227 * 1024


@pytest.mark.slow
@pytest.mark.skipif(not host_compiler_present(), reason="needs a host C++ compiler")
@pytest.mark.parametrize("d", CASES)
def test_the_emulated_lowering_matches_the_reference(d: int) -> None:
    out = CliRunner().invoke(main, ["run", str(_path(d)), "--task", f"attention_fwd_d{d}",
                                    "--emulate"])
    assert out.exit_code == 0, out.output
    assert "2/2 shapes correct" in out.output


@pytest.mark.nvcc
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
@pytest.mark.parametrize("d", CASES)
def test_nvcc_builds_it_without_spills(d: int) -> None:
    out = CliRunner().invoke(main, ["compile", str(_path(d))])
    assert out.exit_code == 0, out.output
    assert "spills 0 B stores / 0 B loads" in out.output, out.output
    assert "CK604" not in out.output, out.output
