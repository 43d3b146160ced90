"""`cake run --emulate` end to end: the runner, its worker and the report.

The lowering is replaced by the fixture (which defines the emulation ABI itself), so the
path from the command line to the worker subprocess and back is the real one without the
CPU runtime.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from emulate_support import TINYGEMM, fixture_cu, needs_cxx, tinygemm_meta

from cake_cli.main import main
from cake_core.diagnostics.model import Diagnostic
from cake_core.emulate import build as emu_build
from cake_core.run import runner
from cake_core.run.results import BenchReport, Finding, ShapeResult
from cake_core.run.runner import EMULATE, BenchOptions, bench, findings_to_diagnostics
from cake_core.source import SourceFile, display_path
from cake_core.tasks import Shape, load_task

SHOWN = display_path(TINYGEMM)
LINE = 43  # `s = ring.wait()`: where a consumer would wait forever
RUN = ["run", str(TINYGEMM), "--task", "gemm_bf16", "--emulate"]


def _lower_to(monkeypatch: pytest.MonkeyPatch, cu: str) -> None:
    monkeypatch.setattr(runner, "_lower", lambda src, kernel: (cu, tinygemm_meta()))


def test_sim_and_emulate_are_mutually_exclusive() -> None:
    r = CliRunner().invoke(main, [*RUN, "--sim"])
    assert r.exit_code == 2 and "--sim and --emulate are mutually exclusive" in r.output


def test_no_compiler_exits_2_with_one_line(stub_runtime: Path, tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CXX", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))  # no g++, no clang++
    r = CliRunner().invoke(main, RUN)
    assert r.exit_code == 2, r.output
    assert r.output.strip().splitlines()[-1] == (
        "cake run: no host C++ compiler (g++ or clang++) found; install one or set CXX")
    assert "Traceback" not in r.output


def test_without_the_runtime_exits_2(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(emu_build, "INCLUDE_DIR", tmp_path)
    r = CliRunner().invoke(main, RUN)
    assert r.exit_code == 2
    assert "cake run: cannot emulate: the CPU emulation runtime is not installed " \
           "(cake_emulate.h is missing" in r.output


@needs_cxx
def test_a_correct_kernel_on_the_task_simulator_shapes(
        stub_runtime: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _lower_to(monkeypatch, fixture_cu("correct", SHOWN, LINE))
    r = CliRunner().invoke(main, RUN)
    assert r.exit_code == 0, r.output
    assert "emulated on the CPU (host compiler " in r.output
    assert "correctness only, no timing" in r.output
    assert "on the CPU, emulated with " in r.output and "(emulate backend)" in r.output
    entry = load_task("gemm_bf16").entry("tinygemm_sm90", TINYGEMM)
    shapes = [str(s) for s in load_task("gemm_bf16").shapes_for(entry, sim=True)]
    assert len(shapes) == 3 and all(s in r.output for s in shapes)
    assert f"{len(shapes)}/{len(shapes)} shapes correct" in r.output
    assert "baseline" not in r.output and "TFLOP/s" not in r.output
    assert "emulated" not in r.output.split("flags")[1].split("note:")[0]  # no flag column

    j = CliRunner().invoke(main, [*RUN, "--dims", "M=16,N=24,K=40", "--seed", "3",
                                  "--format", "json"])
    assert j.exit_code == 0, j.output
    doc = json.loads(j.output)
    assert doc["backend"] == EMULATE and doc["timing"] is False and doc["passed"]
    (shape,) = doc["shapes"]
    assert shape["dims"] == {"M": 16, "N": 24, "K": 40} and shape["seeds"] == [3, 4]
    assert shape["flags"] == ["emulated"] and shape["candidate_ms"] is None
    assert doc["runs"] == []  # nothing for calibration: emulation measures no time


@needs_cxx
def test_a_deadlock_is_reported_at_its_line(stub_runtime: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    _lower_to(monkeypatch, fixture_cu("deadlock", SHOWN, LINE))
    r = CliRunner().invoke(main, [*RUN, "--dims", "M=16,N=24,K=40", "--format", "json"])
    assert r.exit_code == 1, r.output
    doc = json.loads(r.output)
    assert doc["shapes"][0]["status"] == "error" and not doc["passed"]
    located = [d for d in doc["report"]["diagnostics"] if d["code"] == "CK705"]
    assert [d["range"]["start"]["line"] for d in located] == [LINE, LINE + 1]
    assert "deadlock" in located[0]["message"]
    assert any("96 threads at" in n for n in located[0]["notes"])
    text = CliRunner().invoke(main, [*RUN, "--dims", "M=16,N=24,K=40"])
    assert text.exit_code == 1
    assert f"{SHOWN}:{LINE}:" in text.output and "0/1 shapes correct" in text.output


@needs_cxx
def test_a_compile_error_fails_the_kernel_with_the_log(stub_runtime: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    _lower_to(monkeypatch, f'#line {LINE} "{SHOWN}"\nthis is not C++;\n')
    r = CliRunner().invoke(main, RUN)
    assert r.exit_code == 1, r.output
    assert "CK602" in r.output and "building tinygemm_sm90 for the CPU" in r.output
    assert f"{SHOWN}:{LINE}" in r.output  # the compiler's own words, from the log


@needs_cxx
def test_a_crash_or_a_hang_ends_only_the_worker(stub_runtime: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    task = load_task("gemm_bf16")
    opts = BenchOptions(shapes=[Shape({"M": 16, "N": 24, "K": 40})], seeds=(0,),
                        backend=EMULATE, emulate_timeout=2.0)
    _lower_to(monkeypatch, fixture_cu("crash", SHOWN, LINE))
    crashed = bench(TINYGEMM, None, task, opts)
    (res,) = crashed.report.shapes
    assert res.status == "crash" and "killed by SIG" in (res.error or "")
    _lower_to(monkeypatch, fixture_cu("hang", SHOWN, LINE))
    hung = bench(TINYGEMM, None, task, opts)
    (res,) = hung.report.shapes
    assert res.status == "timeout" and res.findings[0].code == "CK706"
    assert "no progress for 2 s during launch" in (res.error or "")


def test_findings_with_a_line_are_placed_there() -> None:
    src = SourceFile.read(TINYGEMM, SHOWN)
    kernel_span = src.span(0, 3)
    shape = ShapeResult({"M": 1}, findings=[
        Finding("CK705", "here", file=SHOWN, line=LINE),
        Finding("CK705", "elsewhere", file="other.cake", line=3),
        Finding("CK701", "no line")])
    report = BenchReport("t", "k", SHOWN, EMULATE, "cpu", None, [shape])
    diags: list[Diagnostic] = findings_to_diagnostics(report, kernel_span, SHOWN, src)
    assert [d.span.start.line + 1 for d in diags] == [LINE, 1, 1]
    assert diags[0].span.end.offset > diags[0].span.start.offset
    # without the source, as callers wrote it before: everything at the kernel
    old: list[Any] = findings_to_diagnostics(report, kernel_span, SHOWN)
    assert all(d.span == kernel_span for d in old)


@needs_cxx
def test_the_text_report_shows_each_finding_once(stub_runtime: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """The shape's error line used to repeat the findings the CK705 diagnostics show."""
    _lower_to(monkeypatch, fixture_cu("deadlock", SHOWN, LINE))
    r = CliRunner().invoke(main, [*RUN, "--dims", "M=16,N=24,K=40"])
    assert r.exit_code == 1, r.output
    assert r.output.count("every live thread waits") == 1, r.output
    assert r.output.count("smem[0:16] read before any write") == 1, r.output
    assert r.output.count("96 threads at") == 1, r.output
    error_line = next(ln for ln in r.output.splitlines() if ln.startswith("  M=16,N=24,K=40: "))
    assert error_line.endswith("schedule seed 0, lazy order; 2 emulator findings, each "
                               "reported at its line")
    assert r.output.count("error[CK705]") == 2


@needs_cxx
def test_order_picks_when_asynchronous_operations_complete(
        stub_runtime: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _lower_to(monkeypatch, fixture_cu("deadlock_when_eager", SHOWN, LINE))
    dims = ["--dims", "M=16,N=24,K=40", "--format", "json"]
    lazy = CliRunner().invoke(main, [*RUN, *dims, "--order", "lazy"])
    assert lazy.exit_code == 0, lazy.output
    assert "every launch in lazy order" in json.loads(lazy.output)["notes"][1]
    both = CliRunner().invoke(main, [*RUN, *dims, "--seed", "5"])  # both, by default
    assert both.exit_code == 1, both.output
    doc = json.loads(both.output)
    assert "on the first launch of each input set and eagerly (at issue)" in doc["notes"][1]
    located = [d for d in doc["report"]["diagnostics"] if d["code"] == "CK705"]
    # seeds 5 and 6 are the lazy first launches; the first eager one (seed 7) deadlocks
    assert {(d["data"]["seed"], d["data"]["order"]) for d in located} == {(7, "eager")}
    assert "schedule seed 7 in eager order" in located[0]["notes"][-1]
    (shape,) = doc["shapes"]
    assert "schedule seed 7, eager order" in shape["error"]
    eager = CliRunner().invoke(main, [*RUN, *dims, "--order", "eager"])
    assert eager.exit_code == 1
    assert {d["data"]["seed"] for d in json.loads(eager.output)["report"]["diagnostics"]
            if d["code"] == "CK705"} == {0}


def test_order_needs_emulate() -> None:
    r = CliRunner().invoke(main, ["run", str(TINYGEMM), "--task", "gemm_bf16", "--sim",
                                  "--order", "eager"])
    assert r.exit_code == 2 and "--order applies only with --emulate" in r.output
    bad = CliRunner().invoke(main, [*RUN, "--order", "late"])
    assert bad.exit_code == 2 and "Invalid value for '--order'" in bad.output
