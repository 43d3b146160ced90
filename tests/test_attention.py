"""The attention forward example: its design as the IR states it, the simulator and the
CPU emulator against the float64 reference, and a clean nvcc build."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from kernel_support import assert_builds_clean

from cake_cli.main import main
from cake_core.check import check_text
from cake_core.emulate.build import host_compiler_present
from cake_core.sim import SimKernel
from cake_core.sim.tasks_run import run_task
from cake_core.tasks import load_task

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "attention_fwd_sm90.cake"
PINGPONG = ROOT / "examples" / "attention_fwd_sm90_pingpong.cake"
PERSISTENT = ROOT / "examples" / "attention_fwd_sm90_persistent.cake"
BOTH = [pytest.param(EXAMPLE, id="attention_fwd_sm90"),
        pytest.param(PINGPONG, id="attention_fwd_sm90_pingpong"),
        pytest.param(PERSISTENT, id="attention_fwd_sm90_persistent")]


@pytest.mark.parametrize("path", BOTH)
def test_it_checks_clean(path: Path) -> None:
    assert check_text(path.read_text(encoding="utf-8"), str(path)).diagnostics == []


def test_p_stays_in_registers_as_the_a_operand() -> None:
    """The second GEMM's A is the bf16 cast of the softmax numerators, not a buffer."""
    for path in (EXAMPLE, PINGPONG, PERSISTENT):
        text = path.read_text(encoding="utf-8")
        assert "exp2(fma(s, SCALE_LOG2, -unsqueeze(ms, 1)))" in text   # one fma per element
    assert "wgmma(o, cast(p, bf16), sv[st].T)" in EXAMPLE.read_text(encoding="utf-8")
    # 128 keys per tile: V in two 64-key halves, each fed by a 64-column slice of P
    for path in (PINGPONG, PERSISTENT):
        text = path.read_text(encoding="utf-8")
        assert "pb = cast(p, bf16)" in text
        assert "wgmma(o, pb[:, 0:VK], sv[st, 0].T)" in text
        assert "wgmma(o, pb[:, VK:BN], sv[st, 1].T)" in text


@pytest.mark.parametrize("path", BOTH)
def test_the_simulator_matches_the_reference(path: Path) -> None:
    task = load_task("attention_fwd")
    report = run_task(task, SimKernel.from_file(path, path.stem), n_schedules=2)
    assert report.passed, [(s.dims, s.error) for s in report.shapes]
    # the ping-pong kernels take S a multiple of their key tile only (their task entries say
    # so)
    assert len(report.shapes) == (4 if path == EXAMPLE else 2)


def test_a_wrong_rescale_is_caught_by_the_reference() -> None:
    """Dropping the rescale of O keeps the kernel well-formed but wrong on 2+ key tiles."""
    text = EXAMPLE.read_text(encoding="utf-8").replace(
        "o = o * unsqueeze(alpha, 1)", "o = o * 1.0")
    sk = SimKernel.from_text(text, "attention_fwd_sm90.cake")
    report = run_task(load_task("attention_fwd"), sk, n_schedules=1)
    assert not report.passed


@pytest.mark.skipif(not host_compiler_present(), reason="needs a host C++ compiler")
@pytest.mark.parametrize("path", BOTH)
def test_the_emulated_lowering_matches_the_reference(path: Path) -> None:
    out = CliRunner().invoke(main, ["run", str(path), "--task", "attention_fwd",
                                    "--emulate"])
    assert out.exit_code == 0, out.output
    assert ("4/4" if path == EXAMPLE else "2/2") + " shapes correct" in out.output


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
@pytest.mark.parametrize("path", BOTH)
def test_nvcc_builds_it_without_spills(path: Path) -> None:
    assert_builds_clean(path)


# --- hazards of the two GEMMs: O rescaled in flight (CK306), P overwritten in flight (CK328) --
def _codes(text: str) -> list[tuple[str, int]]:
    return [(d.code, d.span.start.line + 1)
            for d in check_text(text, "attention.cake").diagnostics]


def _line(text: str, needle: str) -> int:
    return next(i for i, t in enumerate(text.splitlines(), 1) if needle in t)


PV = '''            wgmma(o, cast(p, bf16), sv[st].T)
            wgmma_wait(0)
'''


def test_rescaling_o_while_p_at_v_is_in_flight_is_ck306() -> None:
    """The accumulator rule covers the rescale: `o * alpha` reads the registers the wgmma
    still writes."""
    text = EXAMPLE.read_text(encoding="utf-8")
    bad = text.replace("            o = o * unsqueeze(alpha, 1)         # the previous P @ V has "
                       "been waited for\n" + PV,
                       "            wgmma(o, cast(p, bf16), sv[st].T)\n"
                       "            o = o * unsqueeze(alpha, 1)\n"
                       "            wgmma_wait(0)\n")
    assert bad != text
    assert _codes(bad) == [("CK306", _line(bad, "o = o * unsqueeze(alpha, 1)"))]


def test_rescaling_o_on_the_next_iteration_before_the_wait_is_ck306() -> None:
    """Without the wait in the loop, the stage release and the rescale of the next key tile
    both race with P @ V; one CK306 names the first of them."""
    text = EXAMPLE.read_text(encoding="utf-8")
    bad = text.replace(PV, "            wgmma(o, cast(p, bf16), sv[st].T)\n").replace(
        "        o = o / unsqueeze(l, 1)", "        wgmma_wait(0)\n        o = o / unsqueeze(l, 1)")
    assert [c for c, _ in _codes(bad)] == ["CK306"]


def test_overwriting_p_while_p_at_v_is_in_flight_is_ck328() -> None:
    text = EXAMPLE.read_text(encoding="utf-8")
    bad = text.replace(PV, "            pb = cast(p, bf16)\n"
                           "            wgmma(o, pb, sv[st].T)\n"
                           "            pb = cast(s, bf16)\n"
                           "            wgmma_wait(0)\n")
    assert _codes(bad) == [("CK328", _line(bad, "pb = cast(s, bf16)"))]
    [d] = check_text(bad, "attention.cake").diagnostics
    from cake_core.diagnostics.model import apply_edits
    fixed = apply_edits(bad, d.fixes[0].edits)
    assert _codes(fixed) == []


def test_reading_p_while_p_at_v_is_in_flight_is_fine() -> None:
    text = EXAMPLE.read_text(encoding="utf-8")
    ok = text.replace(PV, "            pb = cast(p, bf16)\n"
                          "            wgmma(o, pb, sv[st].T)\n"
                          "            q = pb * 2.0\n"
                          "            wgmma_wait(0)\n")
    assert _codes(ok) == []
