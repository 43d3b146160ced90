"""The `emulate` gate of `cake evolve`: when it runs, and what it reports."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from emulate_support import TINYGEMM, fixture_cu, needs_cxx, tinygemm_meta

import cake_core.run.device as device
from cake_agents import gates
from cake_agents.config import EvolveConfig
from cake_agents.context import content_hash
from cake_agents.gates import NOT_AVAILABLE, NOT_BETTER, emulate_availability, evaluate_job
from cake_core.emulate import build as emu_build
from cake_core.emulate.build import NoHostCompilerError, host_compiler_present
from cake_core.run import runner

TEXT = TINYGEMM.read_text(encoding="utf-8")
TASK = TINYGEMM.parent / "tasks" / "gemm_bf16.py"
HEADLINE = {"key": "M=16,N=8192,K=8192", "dims": {"M": 16, "N": 8192, "K": 8192}}
SCORE = {"baseline": {HEADLINE["key"]: 1.0}, "floors": {}, "shapes": [[HEADLINE["key"], 1.0]]}
GATES = ("static", "cost", "emulate")


def _job(**kw: Any) -> dict[str, Any]:
    job = {"hash": content_hash(TEXT), "text": TEXT, "path": "k.cake", "task_path": str(TASK),
           "kernel": "tinygemm_sm90", "entry": 1, "arch": "sm_90a", "shapes": [HEADLINE],
           "require_shapes": [HEADLINE["key"]], "gates": list(GATES), "score": SCORE,
           "emulate": {"mode": "auto", "seed": 0, "better_than": None}}
    job.update(kw)
    return job


@pytest.fixture
def fresh(monkeypatch: pytest.MonkeyPatch) -> None:
    """No GPU, and no availability remembered from another test."""
    monkeypatch.setattr(gates, "_EMULATE", {})
    monkeypatch.setattr(device, "probe_gpu", lambda: device.GpuProbe(False, "no GPU here"))


def _gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(device, "probe_gpu",
                        lambda: device.GpuProbe(True, name="NVIDIA H100",
                                                compute_capability=(9, 0)))


def _no_compiler(monkeypatch: pytest.MonkeyPatch) -> None:
    def none() -> Any:
        raise NoHostCompilerError(emu_build.NO_COMPILER)

    monkeypatch.setattr(emu_build, "find_host_compiler", none)


def test_availability_follows_the_machine(fresh: None, stub_runtime: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    if not host_compiler_present():
        pytest.skip("needs a host C++ compiler")
    assert emulate_availability("auto").on
    assert not emulate_availability("off").on
    _gpu(monkeypatch)
    beside_gpu = emulate_availability("auto")
    assert not beside_gpu.on and not beside_gpu.notable and "H100" in beside_gpu.reason
    assert emulate_availability("on").on  # asked for: also beside a GPU


def test_without_a_compiler_it_is_off_and_quiet_unless_asked_for(
        fresh: None, stub_runtime: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _no_compiler(monkeypatch)
    auto = emulate_availability("auto")
    assert not auto.on and not auto.notable and "no host C++ compiler" in auto.reason
    assert emulate_availability("on").notable


def test_without_the_runtime_the_gate_says_so(fresh: None, tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    if not host_compiler_present():
        pytest.skip("needs a host C++ compiler")
    monkeypatch.setattr(emu_build, "INCLUDE_DIR", tmp_path)
    avail = emulate_availability("auto")
    assert not avail.on and avail.notable and "cake_emulate.h" in avail.reason
    res = evaluate_job(_job())
    assert res["status"] == "pass"
    assert res["gates"]["emulate"]["status"] == NOT_AVAILABLE
    assert "cake_emulate.h" in res["gates"]["emulate"]["detail"]["reason"]


def test_the_cli_note_is_printed_once(fresh: None, tmp_path: Path,
                                      monkeypatch: pytest.MonkeyPatch,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    from cake_cli.commands.evolve import _note_emulate

    monkeypatch.setattr(emu_build, "INCLUDE_DIR", tmp_path)
    _note_emulate("on")
    err = capsys.readouterr().err
    assert err.count("the emulate gate is off") == 1
    _gpu(monkeypatch)
    _note_emulate("auto")  # off because a GPU runs the CUDA: nothing to say
    assert capsys.readouterr().err == ""


def test_config_round_trip_and_old_runs() -> None:
    cfg = EvolveConfig(task="gemm_bf16", emulate="on")
    assert EvolveConfig.from_json(cfg.to_json()).emulate == "on"
    old = cfg.to_json()
    del old["emulate"]
    assert EvolveConfig.from_json(old).emulate == "auto"
    assert "emulate" in EvolveConfig(task="t").gates


@needs_cxx
def test_the_gate_runs_kept_kernels_only(fresh: None, stub_runtime: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runner, "_lower", lambda src, k: (fixture_cu("correct", "k.cake", 43),
                                                          tinygemm_meta()))
    ran = evaluate_job(_job())
    gate = ran["gates"]["emulate"]
    assert ran["status"] == "pass" and gate["status"] == "pass", gate
    assert gate["detail"]["device"].startswith("the CPU, emulated with")
    assert len(gate["detail"]["shapes"]) == 3  # the entry's simulator shapes
    skipped = evaluate_job(_job(emulate={"mode": "auto", "better_than": 1e9}))
    assert skipped["gates"]["emulate"]["status"] == NOT_BETTER


@needs_cxx
def test_a_failing_emulation_fails_the_candidate_at_its_line(
        fresh: None, stub_runtime: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from cake_core.source import display_path

    monkeypatch.setattr(runner, "_lower", lambda src, k: (
        fixture_cu("deadlock", display_path(Path(src.path)), 43), tinygemm_meta()))
    res = evaluate_job(_job())
    assert res["status"] == "fail" and res["failed_gate"] == "emulate"
    findings = res["gates"]["emulate"]["findings"]
    assert findings and findings[0]["code"] == "CK705"
    assert findings[0]["line"] == 42 and "ring.wait()" in findings[0]["line_text"]


@pytest.mark.parametrize(("flags", "gates_out", "mode"), [
    ([], ("static", "sim", "cost", "ptxas", "emulate", "gpu"), "auto"),
    (["--no-emulate"], ("static", "sim", "cost", "ptxas", "gpu"), "auto"),
    (["--gates", "sim,gpu", "--emulate"], ("static", "sim", "cost", "emulate", "gpu"), "on"),
    (["--gates", "sim,emulate"], ("static", "sim", "cost", "emulate"), "auto"),
])
def test_evolve_options(flags: list[str], gates_out: tuple[str, ...], mode: str,
                        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from click.testing import CliRunner

    import cake_agents.run
    from cake_agents.context import SetupError
    from cake_cli.main import main

    seen: list[EvolveConfig] = []

    def fake_evolve(config: EvolveConfig, **kw: Any) -> Any:
        seen.append(config)
        raise SetupError("stop here")

    monkeypatch.setattr(cake_agents.run, "evolve", fake_evolve)
    r = CliRunner().invoke(main, ["evolve", "gemm_bf16", "--run-dir", str(tmp_path), *flags])
    assert r.exit_code == 2 and "stop here" in r.output
    assert seen[0].gates == gates_out and seen[0].emulate == mode
