"""scripts/gpu_check.sh's Python side without a GPU: arch skips, the headline table, the
JSON, the external-kernel timing loop (on FakeDevice) and the flash-kmeans step's skip."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from run_support import ROOT

from cake_core.run.device import GpuProbe
from cake_core.run.fake import FakeDevice
from cake_core.run.protocol import TimingConfig
from cake_core.run.results import BenchReport, ShapeResult
from cake_core.run.runner import BenchOutcome
from cake_core.source import SourceFile

BENCH = ROOT / "bench"
sys.path.insert(0, str(BENCH))
import gpu_check  # noqa: E402
import gpu_headline as gh  # noqa: E402

G4 = {"M": 4096, "N": 4096, "K": 4096}
G8 = {"M": 8192, "N": 8192, "K": 8192}
KM = {"B": 32, "N": 65536, "K": 1024}


# --- architecture gating ----------------------------------------------------------------------
@pytest.mark.parametrize(("arch", "cc", "want"), [
    ("sm_90a", (9, 0), None),
    ("sm_90a", (8, 0), "needs sm_90a, GPU is sm_80"),
    ("sm_90a", (10, 0), "needs sm_90a, GPU is sm_100"),
    ("sm_80", (9, 0), None),
    ("sm_80", (7, 5), "needs sm_80, GPU is sm_75"),
    ("sm_42x", (9, 0), None),  # unknown: the build's error, not a skip
])
def test_a_kernel_this_gpu_cannot_run_is_a_skip_with_its_reason(
        arch: str, cc: tuple[int, int], want: str | None) -> None:
    assert gh.arch_skip(arch, cc) == want


def test_every_headline_example_exists_and_runs_on_its_task_as_sm90a() -> None:
    present = {(t.name, gpu_check.example_of(e)) for t, e in gpu_check.entries()}
    wanted = gh.highlights(present)
    assert {h.example for h in wanted} == set(gh.GEMM_EXAMPLES) | set(gh.KMEANS_EXAMPLES)
    assert [dict(h.dims) for h in wanted if h.task == gh.GEMM_TASK] == \
        [G4] * len(gh.GEMM_EXAMPLES) + [G8] * len(gh.GEMM_EXAMPLES)
    for task, entry in gpu_check.entries():
        if (task.name, gpu_check.example_of(entry)) in {(h.task, h.example) for h in wanted}:
            assert gpu_check.kernel_arch(task, entry) == "sm_90a"
    # a variant that is not there is left out, not reported as failed
    assert gh.highlights({(gh.GEMM_TASK, gh.GEMM_EXAMPLES[0])}) == [
        gh.Highlight(gh.GEMM_TASK, gh.GEMM_EXAMPLES[0], G4),
        gh.Highlight(gh.GEMM_TASK, gh.GEMM_EXAMPLES[0], G8)]


def test_headline_shapes_are_split_from_the_tasks_own() -> None:
    task, entry = next((t, e) for t, e in gpu_check.entries()
                       if gpu_check.example_of(e) == "examples/gemm_sm90.cake")
    wanted = gh.highlights({(task.name, "examples/gemm_sm90.cake")})
    head, rest = gpu_check.split_shapes(task, entry, wanted)
    assert [dict(s.dims) for s in head] == [G4, G8]
    assert head[0].label == "headline", "a task shape keeps its label"
    assert rest and not any(dict(s.dims) in (G4, G8) for s in rest)
    cluster = next(e for t, e in gpu_check.entries()
                   if gpu_check.example_of(e) == "examples/gemm_sm90_cluster.cake")
    head, rest = gpu_check.split_shapes(task, cluster, gh.highlights(
        {(task.name, "examples/gemm_sm90_cluster.cake")}))
    assert [dict(s.dims) for s in head] == [G4, G8] and rest == [], \
        "a variant that is no entry of the task runs on the headline shapes only"


def test_the_plan_runs_headline_shapes_then_flash_then_the_rest() -> None:
    todo = gpu_check.entries()
    wanted = gh.highlights((t.name, gpu_check.example_of(e)) for t, e in todo)
    steps = gpu_check.plan(todo, wanted)
    flash_at = steps.index(gpu_check.FLASH_STEP)
    before, after = steps[:flash_at], steps[flash_at + 1:]
    assert {gpu_check.example_of(e) for _, e, _ in before} == \
        set(gh.GEMM_EXAMPLES) | set(gh.KMEANS_EXAMPLES)
    headline_dims = [dict(h.dims) for h in wanted]
    assert all(dict(s.dims) in headline_dims for _, _, shapes in before for s in shapes)
    assert len([s for _, _, shapes in before for s in shapes]) == len(wanted)
    assert after and all(isinstance(x, tuple) for x in after)
    assert gpu_check.plan(todo, wanted, rest=False) == steps[:flash_at + 1]
    no_kmeans = [h for h in wanted if h.task == gh.GEMM_TASK]
    assert gpu_check.FLASH_STEP not in gpu_check.plan(todo, no_kmeans)


# --- the headline table ------------------------------------------------------------------------
def _row(example: str, task: str, dims: dict[str, int], **kw: Any) -> dict[str, Any]:
    row = {"example": example, "task": task, "dims": dims, "status": "ok", "correct": True,
           "ms": None, "baseline_ms": None, "flags": [], "error": None, "arch_skip": False}
    row.update(kw)
    return row


def test_headline_rows_give_time_tflops_and_ratio_against_the_paired_baseline() -> None:
    wanted = [gh.Highlight(gh.GEMM_TASK, "examples/gemm_sm90.cake", G4),
              gh.Highlight(gh.GEMM_TASK, "examples/gemm_sm90_cluster.cake", G4),
              gh.Highlight(gh.KMEANS_TASK, "examples/kmeans_assign_sm90.cake", KM)]
    rows = [_row("examples/gemm_sm90.cake", gh.GEMM_TASK, G4, ms=0.25, baseline_ms=0.2),
            _row("examples/gemm_sm90_cluster.cake", gh.GEMM_TASK, G4, status="wrong",
                 correct=False, ms=None, baseline_ms=0.22, error="C differs"),
            _row("examples/kmeans_assign_sm90.cake", gh.KMEANS_TASK, KM, ms=1.0,
                 baseline_ms=4.0)]
    flash = {"status": "ok", "flash_ms": 2.0, "torch_ms": 5.0, "note": ""}
    head = gh.headline_rows(wanted, rows, flash)
    assert [r.kernel for r in head] == [
        "gemm_sm90", "gemm_sm90_cluster", gh.BASELINE_NAMES[gh.GEMM_TASK],
        "kmeans_assign_sm90", gh.BASELINE_NAMES[gh.KMEANS_TASK], gh.FLASH_NAME]
    g, wrong, cublas, km, torch_ref, fl = head
    assert g.shape == "4096^3" and g.us == pytest.approx(250.0)
    assert g.tflops == pytest.approx(2 * 4096 ** 3 / 0.25e-3 / 1e12)
    assert g.ratio == pytest.approx(0.8) and g.status == "ok"
    assert wrong.us is None and wrong.ratio is None and wrong.status == "wrong: C differs"
    assert cublas.us == pytest.approx(210.0) and cublas.ratio == pytest.approx(1.0)
    assert "paired with 2 kernel(s)" in cublas.status
    assert km.shape == "B=32,N=65536,K=1024,D=128" and km.ratio == pytest.approx(4.0)
    assert km.tflops == pytest.approx(2 * 32 * 65536 * 1024 * 128 / 1e-3 / 1e12)
    assert torch_ref.us == pytest.approx(4000.0)
    assert fl.us == pytest.approx(2000.0) and fl.ratio == pytest.approx(2.5)
    assert fl.cells()[-2:] == ["2.50x", "ok"]


def test_skips_show_their_reason_and_do_not_fail_the_run() -> None:
    wanted = [gh.Highlight(gh.KMEANS_TASK, "examples/kmeans_assign_sm90.cake", KM)]
    skip = _row("examples/kmeans_assign_sm90.cake", gh.KMEANS_TASK, KM, status="skipped",
                correct=None, error="needs sm_90a, GPU is sm_80", arch_skip=True)
    flash = {"status": "skipped", "reason": "flash-kmeans is not installed"}
    km, base, fl = gh.headline_rows(wanted, [skip], flash)
    assert km.status == "skipped (needs sm_90a, GPU is sm_80)" and km.us is None
    assert base.us is None and base.status.startswith("not timed")
    assert fl.status == "skipped (flash-kmeans is not installed)"
    assert gh.row_passes(skip)
    budget = dict(skip, arch_skip=False, error="time budget spent")
    assert not gh.row_passes(budget), "a kernel not run for lack of time is not a pass"
    assert gh.flash_row(KM, None).status == "not run"


# --- timing an external kernel -----------------------------------------------------------------
def test_time_sides_flushes_by_reading_before_every_call_and_alternates() -> None:
    dev = FakeDevice(l2_bytes=1 << 16)
    stream = dev.new_stream()
    flush = dev.alloc(2 * dev.l2_bytes)
    calls: list[str] = []

    def side(name: str, ms: float) -> Any:
        def fn() -> None:
            calls.append(name)
            dev.log.append(("launch", name))
            dev.advance(ms + (5.0 if len(calls) % 7 == 0 else 0.0))  # an outlier now and then
        return fn

    cfg = TimingConfig(warmup=2, rounds=4, calls=5)
    times = gh.time_sides(dev, stream, flush, 2 * dev.l2_bytes,
                          [("a", side("a", 1.0)), ("b", side("b", 3.0))], cfg)
    launches = [i for i, e in enumerate(dev.log) if e[0] == "launch"]
    assert len(launches) == 2 * (cfg.warmup + cfg.rounds * cfg.calls)
    for i in launches:
        assert dev.log[i - 1] == ("read", str(2 * dev.l2_bytes)), "a read flush before each"
    assert not any(e[0] == "fill" for e in dev.log), "the timing loop never memsets"
    assert times["a"].median_ms == pytest.approx(1.0)
    assert times["b"].median_ms == pytest.approx(3.0)
    assert len(times["a"].rounds_ms) == cfg.rounds and times["a"].cv is not None
    timed = calls[2 * cfg.warmup:]
    firsts = [timed[r * 2 * cfg.calls] for r in range(cfg.rounds)]
    assert firsts == ["a", "b", "a", "b"]


# --- gpu_check.py end to end, with the GPU and the runner stubbed ------------------------------
def _outcome(example: str, task: Any, shapes: list[Any]) -> BenchOutcome:
    results = []
    for s in shapes:
        r = ShapeResult(dict(s.dims), s.label, status="ok", correct=True, candidate_ms=1.0,
                        baseline_ms=2.0)
        results.append(r)
    report = BenchReport(task.name, Path(example).stem, example, "torch", "H200", "H200",
                         results)
    return BenchOutcome(report, [], SourceFile("", example), 0.1)


def _main(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, cc: tuple[int, int],
          *args: str) -> tuple[int, dict[str, Any], list[str]]:
    monkeypatch.setattr(gpu_check, "probe_gpu", lambda: GpuProbe(
        True, "", "a test GPU", cc, 50 << 20, 141 << 30))
    benched: list[str] = []

    def fake_bench(path: Path, kernel: str, task: Any, opts: Any) -> BenchOutcome:
        example = Path(path).relative_to(ROOT).as_posix()
        benched.append(example)
        return _outcome(example, task, list(opts.shapes))

    monkeypatch.setattr(gpu_check, "bench", fake_bench)
    rc = gpu_check.main(["--out-dir", str(tmp_path), "--flash-timeout", "0", *args])
    doc = json.loads((tmp_path / "gpu_check.json").read_text(encoding="utf-8"))
    return rc, doc, benched


def test_on_a_non_hopper_gpu_sm90a_kernels_are_skipped_not_failed(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    rc, doc, benched = _main(monkeypatch, tmp_path, (8, 0), "--only", "_sm90")
    assert benched == [], "nothing for sm_90a is built or launched on an sm_80 GPU"
    assert rc == 0 and doc["rows"] and all(r["status"] == "skipped" for r in doc["rows"])
    assert all(r["error"] == "needs sm_90a, GPU is sm_80" for r in doc["rows"])
    kernels = [h for h in doc["headline"] if h["kernel"].endswith(("sm90", "_cluster",
                                                                   "_epilogue", "_dbuf",
                                                                   "_pingpong"))]
    assert kernels and all(h["status"] == "skipped (needs sm_90a, GPU is sm_80)"
                           for h in kernels)
    assert doc["flash_kmeans"] == {"status": "skipped", "reason": "--flash-timeout 0"}
    assert doc["schema"] == "cake.gpu_check/2" and "reason" in doc["toolkit"]
    out = capsys.readouterr().out
    assert "skipped (needs sm_90a, GPU is sm_80)" in out and "median us" in out


def test_on_hopper_the_headline_table_has_every_kernel_and_baseline(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    rc, doc, benched = _main(monkeypatch, tmp_path, (9, 0), "--only", "examples/gemm_sm90",
                             "--only", "kmeans_assign_sm90")
    assert rc == 0
    assert set(benched) == set(gh.GEMM_EXAMPLES) | set(gh.KMEANS_EXAMPLES)
    assert not (tmp_path / "references").exists(), "the shared references are removed"
    head = {(h["kernel"], h["shape"]): h for h in doc["headline"]}
    for ex in gh.GEMM_EXAMPLES:
        for shape in ("4096^3", "8192^3"):
            h = head[(Path(ex).stem, shape)]
            assert h["median_us"] == pytest.approx(1000.0)
            assert h["ratio_vs_baseline"] == pytest.approx(2.0) and h["status"] == "ok"
    assert head[(gh.BASELINE_NAMES[gh.GEMM_TASK], "8192^3")]["median_us"] == \
        pytest.approx(2000.0)
    km = "B=32,N=65536,K=1024,D=128"
    assert head[(gh.FLASH_NAME, km)]["status"].startswith("skipped")
    assert head[("kmeans_assign_sm90_pingpong", km)]["tflops"] == pytest.approx(
        2 * 32 * 65536 * 1024 * 128 / 1e-3 / 1e12)


def test_a_wrong_kernel_fails_the_run(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    right = _outcome

    def wrong(example: str, task: Any, shapes: list[Any]) -> BenchOutcome:
        out = right(example, task, shapes)
        out.report.shapes[0].correct, out.report.shapes[0].status = False, "wrong"
        return out

    monkeypatch.setattr(sys.modules[__name__], "_outcome", wrong)
    rc, doc, _ = _main(monkeypatch, tmp_path, (9, 0), "--only", "examples/gemm_sm90.cake")
    assert rc == 1 and any(r["status"] == "wrong" for r in doc["rows"])


def test_a_spent_budget_skips_what_is_left_and_fails_the_run(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(gpu_check, "run_flash", lambda *a: pytest.fail("flash ran"))
    rc, doc, benched = _main(monkeypatch, tmp_path, (9, 0), "--budget", "-1",
                             "--flash-timeout", "150", "--only", "kmeans_assign_sm90.cake")
    assert benched == [] and rc == 1
    assert all(r["status"] == "skipped" and r["error"] == "time budget spent"
               for r in doc["rows"])
    assert doc["flash_kmeans"] == {"status": "skipped", "reason": "time budget spent"}


@pytest.mark.parametrize("how", ["interrupt", "deadline"])
def test_a_run_stopped_at_the_time_limit_still_writes_its_tables(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, how: str) -> None:
    """The second kernel is stopped (by the shell's SIGINT, or by --deadline): what ran is
    kept, the rest is `skipped`, the JSON is written and the run fails."""
    calls = []

    def slow(example: str, task: Any, shapes: list[Any]) -> BenchOutcome:
        calls.append(example)
        if len(calls) == 2:
            if how == "interrupt":
                raise KeyboardInterrupt
            time.sleep(30)  # the alarm interrupts this
        return right(example, task, shapes)

    right = _outcome
    monkeypatch.setattr(sys.modules[__name__], "_outcome", slow)
    extra = ["--deadline", "1.5"] if how == "deadline" else []
    t0 = time.monotonic()
    rc, doc, _ = _main(monkeypatch, tmp_path, (9, 0), "--only", "examples/gemm_sm90.cake",
                       "--only", "examples/kmeans_assign_sm90.cake", *extra)
    assert time.monotonic() - t0 < 20
    assert rc == 1 and len(calls) == 2
    statuses = [(r["example"], r["status"], r["error"]) for r in doc["rows"]]
    assert statuses[0][1] == "ok"
    stopped = [s for s in statuses if s[2] == "stopped at the time limit"]
    assert stopped and all(s[1] == "skipped" for s in stopped)
    ok = [(r["example"], r["dims"]) for r in doc["rows"] if r["status"] == "ok"]
    assert ok == [("examples/gemm_sm90.cake", G4), ("examples/gemm_sm90.cake", G8)], \
        "the headline shapes of the first kernel were done before the stop"
    assert all(r["error"] == "stopped at the time limit" for r in doc["rows"]
               if r["example"] == "examples/kmeans_assign_sm90.cake")
    assert len(ok) + len(stopped) == len(doc["rows"])
    assert doc["flash_kmeans"] == {"status": "skipped", "reason": "stopped at the time limit"}
    assert any(n.startswith("stopped at the time limit") for n in doc["notes"])


def test_the_flash_step_is_cut_to_the_budget_and_its_timeout_reported(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    args = gpu_check.parse_args(["--budget", "100", "--flash-timeout", "150"])
    assert gpu_check.flash_seconds(args, 0.0) == 150.0
    assert gpu_check.flash_seconds(args, 90.0) == pytest.approx(100 + gpu_check.FLASH_GRACE - 90)
    assert gpu_check.flash_seconds(args, 500.0) == 0.0
    slow = tmp_path / "slow.py"
    slow.write_text("import time\ntime.sleep(30)\n")
    monkeypatch.setattr(gpu_check, "FLASH_SCRIPT", slow)
    res = gpu_check.run_flash(args, tmp_path / "f.json", 1.0)
    assert res == {"status": "error", "reason": "did not finish within 1 s"}


# --- the flash-kmeans script where it cannot run ------------------------------------------------
def test_flash_kmeans_is_skipped_with_the_reason_where_it_cannot_run(tmp_path: Path) -> None:
    out = tmp_path / "flash.json"
    proc = subprocess.run([sys.executable, str(BENCH / "flash_kmeans_time.py"), "--out",
                           str(out)], capture_output=True, text=True, timeout=300,
                          check=False)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(out.read_text(encoding="utf-8"))
    assert f"flash-kmeans: {doc['status']}" in proc.stdout
    if doc["status"] == "ok":  # a GPU machine with torch, Triton and flash-kmeans
        assert doc["flash_ms"] > 0 and doc["torch_ms"] > 0
    else:
        assert doc["status"] in ("skipped", "error", "wrong") and doc["reason"]


def test_gpu_check_sh_refuses_cleanly_without_a_gpu(tmp_path: Path) -> None:
    probe = subprocess.run(["bash", "-c", "command -v nvidia-smi || ls /dev/nvidia0"],
                           capture_output=True, check=False)
    if probe.returncode == 0:
        pytest.skip("this machine has an NVIDIA GPU (or its driver)")
    proc = subprocess.run(["bash", str(ROOT / "scripts" / "gpu_check.sh")], capture_output=True,
                          text=True, timeout=60, check=False, cwd=tmp_path)
    assert proc.returncode == 2 and "no NVIDIA GPU visible" in proc.stdout
