"""Every failure of the environment is a one-line message and an exit status, never a
traceback: outputs that cannot be written, inputs that cannot be read, a reader that
closes the pipe early, Ctrl-C (130) and running out of memory."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from cake_cli.main import main

ROOT = Path(__file__).resolve().parent.parent
GEMM = ROOT / "examples" / "gemm_sm80.cake"


def _quiet(out: str) -> None:
    assert "Traceback" not in out and "internal error" not in out, out


@pytest.mark.parametrize("command", [
    ["lower", "-o", "{blocked}/x.cu", str(GEMM)],
    ["check", "-o", "{blocked}/report.json", "--format", "json", str(GEMM)],
])
def test_an_output_under_a_file_is_a_message(tmp_path: Path, command: list[str]) -> None:
    blocked = tmp_path / "file"
    blocked.write_text("")
    res = CliRunner().invoke(main, [a.format(blocked=blocked) for a in command])
    assert res.exit_code == 2, res.output
    _quiet(res.output)
    assert str(blocked) in res.output


def test_an_unwritable_output_is_a_message(tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    # root may write anywhere, so the refusal is the file system's answer, simulated
    def refuse(self: Path, *args: object, **kwargs: object) -> int:
        raise PermissionError(13, "Permission denied", str(self))

    monkeypatch.setattr(Path, "write_text", refuse)
    res = CliRunner().invoke(main, ["lower", "-o", str(tmp_path / "x.cu"), str(GEMM)])
    assert res.exit_code == 2, res.output
    _quiet(res.output)
    assert "Permission denied" in res.output and "x.cu" in res.output


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0,
                    reason="needs a user that file permissions apply to")
def test_an_unreadable_input_is_a_message(tmp_path: Path) -> None:
    path = tmp_path / "k.cake"
    path.write_text(GEMM.read_text())
    path.chmod(0)
    for command in (["check", str(path)], ["lower", str(path)], ["cost", str(path)]):
        res = CliRunner().invoke(main, command)
        assert res.exit_code == 2, res.output
        _quiet(res.output)


@pytest.mark.parametrize("command", [["check"], ["lower"], ["cost"],
                                     ["run", "--sim", "--task", "gemm_f16_sm80"]])
def test_a_missing_input_is_a_message(tmp_path: Path, command: list[str]) -> None:
    res = CliRunner().invoke(main, [*command, str(tmp_path / "nope.cake")])
    assert res.exit_code == 2, res.output
    _quiet(res.output)
    assert "nope.cake" in res.output


def test_an_interrupt_exits_130_with_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    import cake_core.check as check

    def interrupted(*args: object, **kwargs: object) -> object:
        raise KeyboardInterrupt

    monkeypatch.setattr(check, "check_source", interrupted)
    res = CliRunner().invoke(main, ["check", str(GEMM)])
    assert res.exit_code == 130
    assert res.output.strip() == "cake: interrupted"


def test_running_out_of_memory_is_a_message(monkeypatch: pytest.MonkeyPatch) -> None:
    import cake_core.check as check

    def exhausted(*args: object, **kwargs: object) -> object:
        raise MemoryError

    monkeypatch.setattr(check, "check_source", exhausted)
    res = CliRunner().invoke(main, ["check", str(GEMM)])
    assert res.exit_code == 2
    assert res.output.strip() == "cake: out of memory; try smaller inputs"


@pytest.mark.parametrize("command", [
    ["rules"],
    ["explain", "CK302"],
    ["check", "--format", "json", str(ROOT / "examples")],
    ["lower", str(GEMM)],
])
def test_a_closed_pipe_is_one_line_and_exit_2(command: list[str]) -> None:
    # the reader is gone before `cake` writes: the first write fails, whatever its size
    read, write = os.pipe()
    os.close(read)
    try:
        out = subprocess.run([sys.executable, "-m", "cake_cli", *command], stdout=write,
                             stderr=subprocess.PIPE, text=True, timeout=120, cwd=ROOT)
    finally:
        os.close(write)
    assert out.returncode == 2, out.stderr
    assert out.stderr.strip() == "cake: output closed before it was all written (broken pipe)"


def test_head_of_a_long_output_is_quiet_or_one_line() -> None:
    shell = f"{sys.executable} -m cake_cli rules | head -1"
    out = subprocess.run(["bash", "-c", f"set -o pipefail; {shell}"], capture_output=True,
                         text=True, timeout=120, cwd=ROOT)
    assert out.stdout.startswith("CK001")
    assert "Traceback" not in out.stderr and "Exception ignored" not in out.stderr
    assert out.returncode in (0, 2)
