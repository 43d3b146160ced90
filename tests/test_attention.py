"""The attention forward example: its design as the IR states it, the simulator and the
CPU emulator against the float64 reference, and a clean nvcc build."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from cake_cli.main import main
from cake_core.check import check_text
from cake_core.emulate.build import host_compiler_present
from cake_core.sim import SimKernel
from cake_core.sim.tasks_run import run_task
from cake_core.tasks import load_task

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "attention_fwd_sm90.cake"


def test_it_checks_clean() -> None:
    assert check_text(EXAMPLE.read_text(encoding="utf-8"), str(EXAMPLE)).diagnostics == []


def test_p_stays_in_registers_as_the_a_operand() -> None:
    """The second GEMM's A is the bf16 cast of the softmax numerators, not a buffer."""
    text = EXAMPLE.read_text(encoding="utf-8")
    assert "wgmma(o, cast(p, bf16), sv[st].T)" in text
    assert "exp2(fma(s, SCALE_LOG2, -unsqueeze(ms, 1)))" in text   # scale folded in one fma


def test_the_simulator_matches_the_reference() -> None:
    task = load_task("attention_fwd")
    report = run_task(task, SimKernel.from_file(EXAMPLE, "attention_fwd_sm90"), n_schedules=2)
    assert report.passed, [(s.dims, s.error) for s in report.shapes]
    assert len(report.shapes) == 2


def test_a_wrong_rescale_is_caught_by_the_reference() -> None:
    """Dropping the rescale of O keeps the kernel well-formed but wrong on 2+ key tiles."""
    text = EXAMPLE.read_text(encoding="utf-8").replace(
        "o = o * unsqueeze(alpha, 1)", "o = o * 1.0")
    sk = SimKernel.from_text(text, "attention_fwd_sm90.cake")
    report = run_task(load_task("attention_fwd"), sk, n_schedules=1)
    assert not report.passed


@pytest.mark.skipif(not host_compiler_present(), reason="needs a host C++ compiler")
def test_the_emulated_lowering_matches_the_reference() -> None:
    out = CliRunner().invoke(main, ["run", str(EXAMPLE), "--task", "attention_fwd",
                                    "--emulate"])
    assert out.exit_code == 0, out.output
    assert "2/2 shapes correct" in out.output


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
def test_nvcc_builds_it_without_spills() -> None:
    out = CliRunner().invoke(main, ["compile", str(EXAMPLE)])
    assert out.exit_code == 0, out.output
    assert "spills 0 B stores / 0 B loads" in out.output, out.output
    assert "CK604" not in out.output, out.output
