"""The verification and timing contract, rule by rule, on FakeDevice (no GPU needed).

Every test runs the real protocol (`cake_core.run.protocol.run_shape`); only the device
and the kernel are stand-ins, so a rule that stops being enforced fails here.
"""

from __future__ import annotations

import numpy as np
import pytest
from run_support import GEMM, SMALL, Run

from cake_core.run.device import LaunchError
from cake_core.run.fake import (
    BEHAVIOURS,
    FakeBaseline,
    FakeDevice,
    FakeKernel,
    FakeLaunch,
    SimulatorKernel,
)
from cake_core.run.protocol import TimingConfig, run_shape
from cake_core.run.results import (
    FLAG_BELOW_FLOOR,
    FLAG_FAKE,
    FLAG_NOISY,
    FLAG_TOO_FAST,
    BenchReport,
    Workload,
)
from cake_core.run.tensors import POISON_BYTE
from cake_core.sim.program import SimKernel
from cake_core.tasks import Task


def codes(res) -> list[str]:
    return sorted({f.code for f in res.findings})


def test_a_correct_kernel_passes_and_is_timed(run_fake: Run) -> None:
    res, dev = run_fake("correct", cost_ms=0.5, baseline_ms=1.0)
    assert res.status == "ok" and res.correct and res.findings == []
    assert res.candidate_ms == pytest.approx(0.5)
    assert res.baseline_ms == pytest.approx(1.0)
    assert res.pct_of_baseline == pytest.approx(200.0)
    assert res.rounds_ms == [pytest.approx(0.5)] * 3 and res.cv == pytest.approx(0.0)
    assert res.seeds == [0, 1] and FLAG_FAKE in res.flags
    assert dev.live == 0, "every buffer is freed after the shape"


def test_every_fake_behaviour_is_documented_and_runs(run_fake: Run) -> None:
    expected = {"correct": "ok", "too_fast": "ok", "writes_nothing": "wrong",
                "partial": "wrong", "wrong": "wrong", "mutates_input": "wrong",
                "caches": "wrong", "correct_first_calls": "wrong", "fault": "error",
                "launch_error": "error"}
    assert set(expected) | {"hang", "abort"} == set(BEHAVIOURS)
    for name, status in expected.items():
        res, _ = run_fake(name)
        assert res.status == status, (name, res.status, res.findings)


# --- 1. poisoning ---------------------------------------------------------------------------
def test_outputs_are_poisoned_before_every_checked_launch(run_fake: Run) -> None:
    _, dev = run_fake("correct", timing=TimingConfig(enabled=False))
    launches = [i for i, (what, _) in enumerate(dev.log) if what == "launch"]
    assert len(launches) == 4  # two seeds, candidate -> reference -> candidate
    c_bytes = str(SMALL["M"] * SMALL["N"] * 2)
    flush = str(2 * dev.l2_bytes)
    prev = 0
    for i in launches:
        since = dev.log[prev:i]
        assert ("fill", c_bytes) in since, "the output is filled before every launch"
        assert dev.log[i - 1] == ("read", flush), "checked launches are flushed like timed ones"
        prev = i
    assert POISON_BYTE == 0xFF


def test_poisoning_catches_a_kernel_that_writes_nothing(run_fake: Run) -> None:
    res, _ = run_fake("writes_nothing")
    assert not res.correct and res.candidate_ms is None, "a wrong kernel is never timed"
    assert codes(res) == ["CK702"]
    f = res.findings[0]
    assert f.data["unwritten"] == SMALL["M"] * SMALL["N"]
    assert "never wrote" in f.message and "poison" in f.message


def test_a_missing_edge_tile_is_unwritten_not_just_wrong(run_fake: Run) -> None:
    res, _ = run_fake("partial")
    assert codes(res) == ["CK702"]
    assert res.findings[0].data["unwritten"] == SMALL["N"]  # the last row
    assert res.findings[0].data["first_bad"][0] == SMALL["M"] - 1


def test_integer_outputs_are_poisoned_too(run_fake: Run, kmeans_task: Task,
                                          kmeans_specs: list) -> None:
    dims = {"B": 1, "N": 100, "K": 128}
    res, _ = run_fake("writes_nothing", dims=dims, task=kmeans_task, specs=kmeans_specs)
    assert codes(res) == ["CK702"]
    ok, _ = run_fake("correct", dims=dims, task=kmeans_task, specs=kmeans_specs)
    assert ok.correct


def test_wrong_values_are_reported_with_errors(run_fake: Run) -> None:
    res, _ = run_fake("wrong")
    assert codes(res) == ["CK701"]
    assert res.max_abs == pytest.approx(1.0, rel=0.1)  # +1, rounded to bf16
    assert "differs from the reference" in res.findings[0].message


# --- 2. inputs ----------------------------------------------------------------------------
def test_an_input_mutating_kernel_is_caught(run_fake: Run) -> None:
    res, _ = run_fake("mutates_input")
    assert "CK703" in codes(res) and not res.correct
    f = next(f for f in res.findings if f.code == "CK703")
    assert f.data["tensor"] == "A" and f.data["changed"] > 0


def test_inputs_are_checked_in_the_timing_loop(gemm_task: Task, gemm_specs: list) -> None:
    """Right outputs, but inputs used as scratch once the checked launches are over."""

    def body(ctx: FakeLaunch) -> None:
        a, b = ctx.read("A"), ctx.read("B")
        ctx.write("C", gemm_task.reference({"A": a, "B": b}, ctx.dims)["C"])
        if ctx.call >= 4:  # after the 4 checked launches
            ctx.write("B", b * 2.0)

    dev = FakeDevice()
    res = run_shape(dev, FakeKernel(gemm_specs, body), gemm_task, SMALL,
                    baseline=FakeBaseline(gemm_task), timing=TimingConfig(2, 2, 3))
    assert "CK703" in codes(res) and not res.correct
    assert [f.data["tensor"] for f in res.findings if f.code == "CK703"] == ["B"]


# --- 3. candidate -> reference -> candidate ------------------------------------------------
def test_order_is_candidate_reference_candidate(run_fake: Run) -> None:
    _, dev = run_fake("correct", timing=TimingConfig(enabled=False))
    order = [what for what, _ in dev.log if what in ("launch", "baseline")]
    assert order == ["launch", "launch", "baseline", "launch", "launch"]


def test_a_kernel_right_only_on_its_first_call_is_caught(run_fake: Run) -> None:
    res, _ = run_fake("caches")
    assert not res.correct and codes(res) == ["CK702"]
    second = [f for f in res.findings if f.data["when"] == "second launch"]
    assert second and "no state kept across calls" in " ".join(second[0].notes)


# --- 4. timing ----------------------------------------------------------------------------
def test_l2_flush_before_every_timed_call(run_fake: Run) -> None:
    cfg = TimingConfig(warmup=1, rounds=2, calls=3)
    _, dev = run_fake("correct", timing=cfg, flush_bytes=5 << 20)
    flush = str(max(5 << 20, 2 * dev.l2_bytes))
    log = dev.log
    timed = [i for i, e in enumerate(log) if e[0] in ("launch", "baseline")][5:]  # after checks
    assert len(timed) == (cfg.warmup + cfg.rounds * cfg.calls) * 2 + 2  # +2: the re-check
    for i in timed[: -2]:
        assert log[i - 1] == ("read", flush), f"no flush before timed call {i}: {log[i - 1]}"
    assert int(flush) >= 2 * dev.l2_bytes


def test_the_l2_flush_reads_and_never_writes_between_launches(run_fake: Run) -> None:
    """A memset of the flush buffer would leave L2 full of dirty lines written back inside
    the timed kernel: the buffer is filled once, before the first launch, then only read."""
    cfg = TimingConfig(warmup=1, rounds=2, calls=3)
    _, dev = run_fake("correct", timing=cfg)
    flush = str(2 * dev.l2_bytes)
    first = next(i for i, e in enumerate(dev.log) if e[0] == "launch")
    assert ("fill", flush) not in dev.log[first:], "the flush buffer is never filled again"
    assert dev.log[:first].count(("fill", flush)) == 1
    reads = dev.log.count(("read", flush))
    launches = sum(e[0] in ("launch", "baseline") for e in dev.log)
    # every launch but the baseline's untimed correctness call
    assert reads == launches - 1, "one flush read before every launch, the baseline's included"


def test_rounds_alternate_between_candidate_and_baseline(run_fake: Run) -> None:
    cfg = TimingConfig(warmup=0, rounds=4, calls=2)
    _, dev = run_fake("correct", timing=cfg)
    timed = [w for w, _ in dev.log if w in ("launch", "baseline")][5:-2]
    firsts = [timed[r * 2 * cfg.calls] for r in range(cfg.rounds)]
    assert firsts == ["launch", "baseline", "launch", "baseline"]


def test_median_of_round_medians_and_cv(gemm_task: Task, gemm_specs: list) -> None:
    """One slow call in every round (a co-tenant, a clock dip) does not move the median."""

    def cost(call: int) -> float:
        return 5.0 if call % 5 == 0 else 1.0

    def body(ctx: FakeLaunch) -> None:
        a, b = ctx.read("A"), ctx.read("B")
        ctx.write("C", gemm_task.reference({"A": a, "B": b}, ctx.dims)["C"])

    res = run_shape(FakeDevice(), FakeKernel(gemm_specs, body, cost_ms=cost), gemm_task, SMALL,
                    baseline=None, timing=TimingConfig(0, 3, 5))
    assert res.correct and res.candidate_ms == pytest.approx(1.0)
    assert len(res.rounds_ms) == 3
    assert res.cv is not None and res.cv > 0.5 and FLAG_NOISY in res.flags
    assert res.baseline_ms is None


# --- 5. re-check after timing ----------------------------------------------------------------
def test_the_recheck_catches_a_kernel_that_stops_computing(run_fake: Run) -> None:
    res, _ = run_fake("correct_first_calls", calls=4)  # passes the 4 checked launches
    assert not res.correct and codes(res) == ["CK704"]
    assert res.candidate_ms is None, "the time of a kernel that fails the re-check is dropped"
    # caught at the first timed call drawn for judging, before the re-check even runs
    assert len(res.findings) == 1 and res.findings[0].data["when"].startswith("timed call")


# --- 6. suspicious times ----------------------------------------------------------------------
def _wl(flops: float = 2 * 64 * 48 * 32, nbytes: float = 1e4) -> Workload:
    return Workload(flops, nbytes, 989.4e12, 4.8e12, "H200-SXM")


def test_an_impossible_speedup_is_flagged_not_celebrated(run_fake: Run) -> None:
    res, _ = run_fake("too_fast", workload=_wl())
    assert res.correct
    assert FLAG_TOO_FAST in res.flags and FLAG_BELOW_FLOOR in res.flags and res.suspicious
    report = BenchReport("gemm_bf16", "k", "k.cake", "torch", "H200", "H200-SXM", [res])
    res.flags.remove(FLAG_FAKE)  # as if measured on a GPU
    assert report.calibration_runs() == [], "a suspicious time never reaches calibration"


def test_ten_x_alone_is_flagged(run_fake: Run) -> None:
    res, _ = run_fake("correct", cost_ms=0.05, baseline_ms=1.0, workload=_wl())
    assert FLAG_TOO_FAST in res.flags and FLAG_BELOW_FLOOR not in res.flags
    ok, _ = run_fake("correct", cost_ms=0.2, baseline_ms=1.0, workload=_wl())
    assert not ok.suspicious and ok.pct_of_baseline == pytest.approx(500.0)


def test_below_the_roofline_floor_alone_is_flagged(run_fake: Run) -> None:
    wl = _wl(flops=2 * 4096**3)
    assert wl.floor_ms == pytest.approx(2 * 4096**3 / 989.4e12 * 1e3)
    res, _ = run_fake("correct", cost_ms=wl.floor_ms / 2, baseline_ms=wl.floor_ms,
                      workload=wl)
    assert res.flags == sorted([FLAG_BELOW_FLOOR, FLAG_FAKE])
    assert res.tflops == pytest.approx(2 * 989.4, rel=1e-6)


# --- faults and setup ---------------------------------------------------------------------
def test_an_asynchronous_fault_loses_the_device(run_fake: Run) -> None:
    res, _ = run_fake("fault")
    assert res.status == "error" and res.device_lost and codes(res) == ["CK705"]
    assert "illegal memory access" in res.error


def test_a_refused_launch_is_a_runtime_error(run_fake: Run) -> None:
    res, _ = run_fake("launch_error")
    assert res.status == "error" and not res.device_lost and codes(res) == ["CK705"]


def test_a_shape_the_kernel_cannot_take_is_a_setup_error(gemm_task: Task,
                                                         gemm_specs: list) -> None:
    k = FakeKernel(gemm_specs, lambda ctx: None,
                   dim_limits={"N": {"multiple_of": 8, "max": None}})
    res = run_shape(FakeDevice(), k, gemm_task, {"M": 64, "N": 60, "K": 32})
    assert res.status == "error" and res.correct is None and "multiple of 8" in res.error
    res = run_shape(FakeDevice(), k, gemm_task, {"M": 64, "K": 32})
    assert res.status == "error" and "no value for dim N" in res.error


def test_a_kernel_missing_the_output_is_a_setup_error(gemm_task: Task,
                                                      gemm_specs: list) -> None:
    k = FakeKernel([s for s in gemm_specs if s.name != "C"], lambda ctx: None)
    res = run_shape(FakeDevice(), k, gemm_task, SMALL)
    assert res.status == "error" and "no tensor for the task's output" in res.error


def test_launch_errors_raised_by_a_body_propagate_as_findings(gemm_task: Task,
                                                              gemm_specs: list) -> None:
    def body(ctx: FakeLaunch) -> None:
        raise LaunchError("too many resources requested for launch")

    res = run_shape(FakeDevice(), FakeKernel(gemm_specs, body), gemm_task, SMALL)
    assert codes(res) == ["CK705"] and "too many resources" in res.findings[0].message


# --- the simulator as the kernel -----------------------------------------------------------
def test_the_simulator_runs_a_real_kernel_through_the_protocol(gemm_task: Task) -> None:
    sk = SimKernel.from_text(GEMM.read_text(encoding="utf-8"), str(GEMM), "gemm_sm90")
    res = run_shape(FakeDevice(), SimulatorKernel(sk), gemm_task, {"M": 72, "N": 40, "K": 24},
                    seeds=(0,), baseline=FakeBaseline(gemm_task),
                    timing=TimingConfig(0, 1, 1))
    assert res.correct, res.findings
    assert res.max_abs < 0.05


FLOORED = GEMM.read_text(encoding="utf-8").replace("grid=(cdiv(M, BM), cdiv(N, BN))",
                                                   "grid=(M // BM, cdiv(N, BN))")


def test_the_simulator_kernel_with_a_missing_edge_is_caught(gemm_task: Task) -> None:
    assert GEMM.read_text(encoding="utf-8") != FLOORED, "the example's grid changed"
    sk = SimKernel.from_text(FLOORED, "floored.cake", "gemm_sm90")
    res = run_shape(FakeDevice(), SimulatorKernel(sk), gemm_task, {"M": 200, "N": 40, "K": 24},
                    seeds=(0,), timing=TimingConfig(enabled=False))
    assert codes(res) == ["CK702"]
    assert res.findings[0].data["first_bad"][0] == 128  # the first row of the missing tile
    assert res.findings[0].data["unwritten"] == (200 - 128) * 40


def test_json_round_trip(run_fake: Run) -> None:
    from cake_core.run.results import ShapeResult

    res, _ = run_fake("partial", workload=_wl())
    back = ShapeResult.from_json(res.to_json())
    assert back.to_json() == res.to_json()
    assert back.max_abs == res.max_abs == np.inf  # NaN where a value belongs: infinite error
