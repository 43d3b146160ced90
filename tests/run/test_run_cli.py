"""`cake bench` and `cake run` without --sim, on a machine without a GPU."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from run_support import GEMM

from cake_cli.main import LAZY_COMMANDS, main
from cake_core.run import device as device_mod
from cake_core.run.device import GpuProbe


@pytest.fixture
def no_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    """As on a machine without a GPU, also where the tests run on one."""
    monkeypatch.setattr(device_mod, "probe_gpu",
                        lambda: GpuProbe(False, "the NVIDIA driver library (libcuda) is not "
                                                "installed"))


def test_bench_is_a_lazy_command() -> None:
    assert LAZY_COMMANDS["bench"] == "cake_cli.commands.bench:bench"
    r = CliRunner().invoke(main, ["bench", "--help"])
    assert r.exit_code == 0 and "--task" in r.output and "--fake" not in r.output


def test_bench_without_a_gpu_exits_2_with_a_hint(no_gpu: None) -> None:
    r = CliRunner().invoke(main, ["bench", str(GEMM), "--task", "gemm_bf16"])
    assert r.exit_code == 2
    assert "no CUDA device: the NVIDIA driver library (libcuda) is not installed" in r.output
    assert "use `cake run --sim` to check correctness on the CPU" in r.output
    assert "Traceback" not in r.output


def test_run_without_sim_and_without_a_gpu_exits_2(no_gpu: None) -> None:
    r = CliRunner().invoke(main, ["run", str(GEMM), "--task", "gemm_bf16"])
    assert r.exit_code == 2
    assert "no CUDA device" in r.output and "add --sim" in r.output


def test_bench_usage_errors() -> None:
    r = CliRunner().invoke(main, ["bench", str(GEMM), "--task", "nope"])
    assert r.exit_code == 2 and "no task 'nope'" in r.output
    r = CliRunner().invoke(main, ["bench", "missing.cake", "--task", "gemm_bf16"])
    assert r.exit_code == 2 and "no such file" in r.output
    r = CliRunner().invoke(main, ["bench", str(GEMM), "--task", "gemm_bf16",
                                  "--shapes", "M=64,N"])
    assert r.exit_code == 2


def test_bench_on_the_fake_device_text_and_json(tmp_path: Path) -> None:
    args = ["bench", str(GEMM), "--task", "gemm_bf16", "--fake", "sim", "--seeds", "1",
            "--shapes", "M=72,N=40,K=24", "--rounds", "1", "--calls", "2", "--warmup", "0"]
    r = CliRunner().invoke(main, args)
    assert r.exit_code == 0, r.output
    assert "M=72,N=40,K=24" in r.output and "1/1 shapes correct" in r.output
    assert "virtual clock" in r.output
    out = tmp_path / "runs.json"
    r = CliRunner().invoke(main, [*args, "--format", "json", "-o", str(out)])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.output)
    assert doc["schema"] == "cake.bench/1" and doc["passed"] is True
    (shape,) = doc["shapes"]
    assert shape["correct"] is True and shape["candidate_ms"] == pytest.approx(1.0)
    assert json.loads(out.read_text(encoding="utf-8")) == []  # fake times are not data


def test_bench_reports_a_wrong_kernel_with_exit_1() -> None:
    r = CliRunner().invoke(main, ["bench", str(GEMM), "--task", "gemm_bf16", "--fake",
                                  "writes_nothing", "--seeds", "1", "--shapes",
                                  "M=64,N=48,K=32"])
    assert r.exit_code == 1, r.output
    assert "CK702" in r.output and "0/1 shapes correct" in r.output


def test_a_shape_without_a_kernel_dim_is_a_usage_error_before_any_launch() -> None:
    """Found by bench/fuzz_long.py: `--emulate` with dims the kernel does not use printed
    "internal error: RunSetupError" (the workload was priced before any check)."""
    kmeans = Path(__file__).resolve().parents[2] / "examples" / "kmeans_assign_sm90.cake"
    r = CliRunner().invoke(main, ["run", "--emulate", "--task", "gemm_f16_sm80",
                                  "--dims", "M=64,N=64,K=64", str(kmeans)])
    assert r.exit_code == 2, r.output
    assert "shape M=64,N=64,K=64: the shape gives no value for dim B" in r.output
    assert "internal error" not in r.output and "Traceback" not in r.output
