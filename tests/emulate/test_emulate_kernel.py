"""EmulatedKernel under the verification protocol, against the fixture's ABI."""

from __future__ import annotations

from pathlib import Path

import pytest
from emulate_support import fixture_cu, needs_cxx, tinygemm_meta

from cake_core.emulate.build import build_emulated
from cake_core.run.device import LaunchError
from cake_core.run.emulated import ABI, EAGER, EmulatedKernel
from cake_core.run.fake import FakeDevice
from cake_core.run.host_device import HostDevice
from cake_core.run.protocol import TimingConfig, run_shape
from cake_core.run.results import Finding, ShapeResult
from cake_core.run.tensors import RunSetupError
from cake_core.tasks import Task, load_task

pytestmark = needs_cxx
DIMS = {"M": 48, "N": 72, "K": 200}
NO_TIMING = TimingConfig(enabled=False)


@pytest.fixture(scope="module")
def task() -> Task:
    return load_task("gemm_bf16")


@pytest.fixture(scope="module")
def libs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """One library per fixture behaviour, built once for the module."""
    root = tmp_path_factory.mktemp("emu")
    inc = root / "include"
    inc.mkdir()
    return {mode: build_emulated(fixture_cu(mode, "k.cake", 20), name=f"fx_{mode}",
                                 cache=root, include_dir=inc).path
            for mode in ("correct", "deadlock", "wrong", "not_ok", "refused",
                         "wrong_when_eager", "deadlock_when_eager")}


def _run(lib: Path, task: Task, seed: int = 0, order: str = "both",
         seeds: tuple[int, ...] = (0, 1), kernel: EmulatedKernel | None = None
         ) -> tuple[ShapeResult, EmulatedKernel]:
    if kernel is None:
        kernel = EmulatedKernel(lib, tinygemm_meta(), seed=seed, order=order)
        kernel.prepare()
    kernel.start_shape()
    res = run_shape(HostDevice(), kernel, task, DIMS, rename={"B": "W"}, seeds=seeds,
                    timing=NO_TIMING)
    kernel.locate(res)
    return res, kernel


def test_a_correct_kernel_passes_with_one_schedule_seed_per_launch(
        libs: dict[str, Path], task: Task) -> None:
    res, kernel = _run(libs["correct"], task, seed=40)
    assert res.status == "ok" and res.correct and not res.findings, res.error
    assert res.max_rel < 1.6e-2 and res.candidate_ms is None
    # the fixture only succeeds when all three tensors were registered with their sizes;
    # two seeds, each launched twice: seeds 40..43, the last one in the last report, the
    # first launch on each input set lazy, the second eager
    assert kernel.launches == 4
    assert [(ln.inputs, ln.repeat, ln.seed, ln.order) for ln in kernel.shape_launches] == [
        (0, 0, 40, "lazy"), (1, 0, 41, "lazy"), (0, 1, 42, "eager"), (1, 1, 43, "eager")]
    assert kernel.last_report is not None and kernel.last_report.ok
    assert kernel.last_report.stats["seed"] == 43 and kernel.last_report.stats["flags"] == 1


def test_a_deadlock_becomes_located_findings(libs: dict[str, Path], task: Task) -> None:
    res, kernel = _run(libs["deadlock"], task, seed=7)
    assert res.status == "error" and res.correct is False
    assert res.error is not None and "unspecified launch failure (719)" in res.error
    # the findings are the shape's findings, each once: the error only counts them
    assert res.error.endswith("schedule seed 7, lazy order; 2 emulator findings, each "
                              "reported at its line")
    assert "deadlock" not in res.error and "threads" not in res.error
    dead, uninit = res.findings
    assert (dead.code, dead.file, dead.line) == ("CK705", "k.cake", 20)
    assert dead.message.startswith("emulated launch failed: deadlock at k.cake:20: every "
                                   "live thread waits (M=48,N=72,K=200)")
    assert dead.notes[:2] == [
        "96 threads at k.cake:22 (mbarrier_wait parity 0): block (0,0,0) threads 0-95",
        "32 threads at k.cake:25 (bar.sync 1): block (0,0,0) threads 96-127"]
    assert dead.data["seed"] == 7 and dead.data["order"] == "lazy"
    assert dead.data["emulator"]["thread_count"] == 128
    assert dead.notes[-1].startswith("emulated on the CPU with schedule seed 7 in lazy order")
    assert (uninit.file, uninit.line) == ("k.cake", 21)
    assert "uninitialized_read" in uninit.message
    assert kernel.failure is None  # consumed by locate


def test_findings_keep_their_location_through_json(libs: dict[str, Path],
                                                    task: Task) -> None:
    res, _ = _run(libs["deadlock"], task)
    back = ShapeResult.from_json(res.to_json())
    assert [(f.file, f.line) for f in back.findings] == [("k.cake", 20), ("k.cake", 21)]
    plain = Finding("CK701", "wrong").to_json()
    assert "line" not in plain and "file" not in plain  # unlocated findings: as before


def test_wrong_results_and_other_failures(libs: dict[str, Path], task: Task) -> None:
    wrong, _ = _run(libs["wrong"], task)
    assert wrong.status == "wrong" and {f.code for f in wrong.findings} == {"CK701"}
    not_ok, _ = _run(libs["not_ok"], task)
    assert not_ok.status == "error"
    assert "returned success but the emulator reported a problem" in (not_ok.error or "")
    assert not_ok.findings[0].line == 20 and "proxy_fence" in not_ok.findings[0].message
    refused, _ = _run(libs["refused"], task)
    assert "returned invalid argument (1)" in (refused.error or "")
    assert [f.line for f in refused.findings] == [None]  # nothing to locate


def test_only_emulation_builds_on_host_memory(libs: dict[str, Path], tmp_path: Path,
                                              task: Task) -> None:
    kernel = EmulatedKernel(libs["correct"], tinygemm_meta())
    with pytest.raises(LaunchError, match="runs only on host memory"):
        kernel.launch(FakeDevice(), {}, DIMS, {}, None)
    plain = build_emulated('extern "C" int cake_launch_tinygemm_sm90(void* a, void* w, '
                           'void* c, int m, int n, int k, void* s) { return 0; }\n',
                           name="plain", cache=tmp_path, include_dir=tmp_path)
    with pytest.raises(RunSetupError, match="not an emulation build") as exc:
        EmulatedKernel(plain.path, tinygemm_meta())
    assert all(name in str(exc.value) for name in ABI)


def test_an_order_dependent_result_names_the_order_and_seed(libs: dict[str, Path],
                                                            task: Task) -> None:
    """Under both orders the second launch on each input set is eager: a kernel right only
    when asynchronous operations complete late fails there, and the finding says so."""
    res, _ = _run(libs["wrong_when_eager"], task, seed=10)
    assert res.status == "wrong"
    assert [(f.code, f.data["when"], f.data["seed"], f.data["schedule_seed"], f.data["order"])
            for f in res.findings] == [("CK701", "second launch", 0, 12, "eager"),
                                       ("CK701", "second launch", 1, 13, "eager")]
    notes = res.findings[0].notes
    assert "emulated with schedule seed 12 in eager order (asynchronous operations " \
           "complete at issue)" in notes
    assert any(n.startswith("the first launch on these inputs, in lazy order, was right")
               for n in notes)
    lazy, _ = _run(libs["wrong_when_eager"], task, order="lazy")
    assert lazy.status == "ok" and lazy.correct
    eager, _ = _run(libs["wrong_when_eager"], task, seed=5, order="eager")
    assert [(f.data["when"], f.data["schedule_seed"], f.data["order"])
            for f in eager.findings] == [("first launch", 5, "eager"),
                                         ("first launch", 6, "eager")]
    assert not any("first launch on these inputs" in n for n in eager.findings[0].notes)


def test_one_input_set_still_runs_both_orders(libs: dict[str, Path], task: Task) -> None:
    """The emulate gate of `cake evolve` runs one seed: its two launches take one order each."""
    res, kernel = _run(libs["deadlock_when_eager"], task, seed=3, seeds=(9,))
    assert [(ln.seed, ln.order) for ln in kernel.shape_launches] == [(3, "lazy"), (4, "eager")]
    assert res.status == "error" and "schedule seed 4, eager order" in (res.error or "")
    assert {f.data["order"] for f in res.findings} == {"eager"}
    assert all(f.data["seed"] == 4 for f in res.findings)


def test_each_shape_starts_with_a_lazy_launch(libs: dict[str, Path], task: Task) -> None:
    """Seeds go on counting across shapes; the order restarts, so a shape's orders do not
    depend on how many launches an earlier shape made before it failed."""
    _, kernel = _run(libs["deadlock_when_eager"], task, seed=0, seeds=(0, 1))
    assert [ln.order for ln in kernel.shape_launches] == ["lazy", "lazy", "eager"]
    _, kernel = _run(libs["deadlock_when_eager"], task, kernel=kernel)
    assert [(ln.seed, ln.order) for ln in kernel.shape_launches] == [
        (3, "lazy"), (4, "lazy"), (5, "eager")]
    with pytest.raises(RunSetupError, match="unknown emulation order 'late'"):
        EmulatedKernel(libs["correct"], tinygemm_meta(), order="late")
    with pytest.raises(RunSetupError, match="chosen with order="):
        EmulatedKernel(libs["correct"], tinygemm_meta(), flags=EAGER)
