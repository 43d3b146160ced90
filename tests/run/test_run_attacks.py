"""The runner's contract re-read as an attacker: one malicious "kernel" per defence.

These are tests of the runner's logic on FakeDevice, not of a GPU: each kernel is a numpy
function that tries one way of faking a result (docs/running.md, "What a candidate could
do to fake a result"), and each test asserts the real protocol (`run_shape`) rejects it
with the finding the defence gives, or times it at the cost of the work it must do.
FakeDevice keeps every live buffer in `memory`, as a real kernel could address any memory
of its context, so the attacks that go looking for other buffers can find them.
"""

from __future__ import annotations

import hashlib
import random

import numpy as np
import pytest
from run_support import SMALL

from cake_core.run.fake import FakeBaseline, FakeBuffer, FakeDevice, FakeKernel, FakeLaunch
from cake_core.run.protocol import TimingConfig, run_shape
from cake_core.run.results import ShapeResult
from cake_core.run.tensors import TensorSpec
from cake_core.tasks import Task

TIMING = TimingConfig(warmup=2, rounds=3, calls=5)
CHECKED = 4
"""Checked launches before timing: two seeds, candidate -> reference -> candidate."""
COMPUTE_MS, CHEAP_MS = 1.0, 0.01


def codes(res: ShapeResult) -> list[str]:
    return sorted({f.code for f in res.findings})


def compute(task: Task, ctx: FakeLaunch) -> np.ndarray:
    return task.reference({"A": ctx.read("A"), "B": ctx.read("B")}, ctx.dims)["C"]


def own(ctx: FakeLaunch) -> set[int]:
    return {b.address for b in ctx.buffers.values()}


def run(task: Task, specs: list[TensorSpec], body, *, seeds=(0, 1), seed: int = 0,
        timing: TimingConfig = TIMING) -> tuple[ShapeResult, FakeDevice]:
    """The kernel's body advances the clock itself (real work or a cheap trick)."""
    dev = FakeDevice()
    res = run_shape(dev, FakeKernel(specs, body, cost_ms=0.0), task, SMALL, seeds=seeds,
                    baseline=FakeBaseline(task), timing=timing, rng=random.Random(seed))
    return res, dev


def test_an_honest_kernel_passes_every_defence(gemm_task: Task, gemm_specs: list) -> None:
    def body(ctx: FakeLaunch) -> None:
        ctx.write("C", compute(gemm_task, ctx))
        ctx.device.advance(COMPUTE_MS)

    for seed in range(3):
        res, dev = run(gemm_task, gemm_specs, body, seed=seed)
        assert res.correct and res.findings == [], res.findings
        assert res.candidate_ms == pytest.approx(COMPUTE_MS)
        assert dev.live == 0


# --- a cached copy ---------------------------------------------------------------------------
def test_replaying_a_cached_answer_keyed_on_part_of_the_inputs_is_caught(
        gemm_task: Task, gemm_specs: list) -> None:
    """Remembers each answer under a hash of the first 64 bytes of A and replays it (fast)
    when it sees them again: right in every checked launch, since a seed's inputs repeat.
    Timed calls run on perturbed inputs, and one judged call's perturbation is checked
    against its own reference."""
    for seed in range(5):
        cache: dict[bytes, np.ndarray] = {}

        def body(ctx: FakeLaunch) -> None:
            key = hashlib.sha1(ctx.buffers["A"].data[:64].tobytes()).digest()
            if key in cache:  # noqa: B023
                ctx.write("C", cache[key])  # noqa: B023
                ctx.device.advance(CHEAP_MS)
                return
            cache[key] = compute(gemm_task, ctx)  # noqa: B023
            ctx.write("C", cache[key])  # noqa: B023
            ctx.device.advance(COMPUTE_MS)

        res, _ = run(gemm_task, gemm_specs, body, seed=seed)
        assert codes(res) == ["CK704"], (seed, res.findings)
        assert "timed call" in res.findings[0].data["when"]
        assert res.candidate_ms is None


def test_a_cache_keyed_on_all_of_the_inputs_is_timed_at_the_cost_of_the_work(
        gemm_task: Task, gemm_specs: list) -> None:
    """A cache that hashes every input byte is never wrong, but fresh inputs on every
    timed call mean it must compute them: its time is the work's, not the replay's."""
    cache: dict[bytes, np.ndarray] = {}

    def body(ctx: FakeLaunch) -> None:
        key = hashlib.sha1(ctx.buffers["A"].data.tobytes() + ctx.buffers["B"].data.tobytes()
                           ).digest()
        if key not in cache:
            cache[key] = compute(gemm_task, ctx)
            ctx.device.advance(COMPUTE_MS)
        else:
            ctx.device.advance(CHEAP_MS)
        ctx.write("C", cache[key])

    res, _ = run(gemm_task, gemm_specs, body)
    assert res.correct, res.findings
    assert res.candidate_ms == pytest.approx(COMPUTE_MS)


# --- the reference's buffers -----------------------------------------------------------------
def test_copying_the_baseline_output_from_device_memory_finds_only_poison(
        gemm_task: Task, gemm_specs: list) -> None:
    """Computes on its first call, then copies any buffer of C's size it does not own:
    with one seed, the baseline's output would be exactly the right answer.  The runner
    scrubs the baseline's outputs once it has read them."""

    def body(ctx: FakeLaunch) -> None:
        nbytes = ctx.buffers["C"].data.size
        if ctx.call == 0:
            ctx.write("C", compute(gemm_task, ctx))
            return
        foreign: list[FakeBuffer] = [b for a, b in ctx.device.memory.items()
                                     if a not in own(ctx) and b.data.size == nbytes]
        for b in foreign:
            ctx.buffers["C"].data[:] = b.data

    res, _ = run(gemm_task, gemm_specs, body, seeds=(0,))
    assert codes(res) == ["CK702"], res.findings
    assert res.findings[0].data["when"] == "second launch"


# --- detecting the timed run ----------------------------------------------------------------
def test_the_flush_buffer_is_there_for_checked_launches_too(gemm_task: Task,
                                                             gemm_specs: list) -> None:
    """Takes a buffer of at least 2x L2 as the sign of a timed call and returns early
    then: checked launches are flushed exactly like timed ones, so it fails at once."""

    def body(ctx: FakeLaunch) -> None:
        if any(b.data.size >= 2 * ctx.device.l2_bytes for b in ctx.device.memory.values()):
            return
        ctx.write("C", compute(gemm_task, ctx))

    res, _ = run(gemm_task, gemm_specs, body)
    assert codes(res) == ["CK702"] and res.findings[0].data["when"] == "first launch"


def test_counting_calls_to_skip_work_when_timed_is_caught_in_a_timed_call(
        gemm_task: Task, gemm_specs: list) -> None:
    """Counts its launches, computes the checked ones, returns at once from the rest: a
    timed call drawn at random is judged, before the re-check."""

    def body(ctx: FakeLaunch) -> None:
        if ctx.call < CHECKED:
            ctx.write("C", compute(gemm_task, ctx))
            ctx.device.advance(COMPUTE_MS)
        else:
            ctx.device.advance(CHEAP_MS)

    res, _ = run(gemm_task, gemm_specs, body)
    assert codes(res) == ["CK704"], res.findings
    f = res.findings[0]
    assert f.data["when"].startswith("timed call") and f.data["unwritten"] == f.data["bad"]
    assert res.candidate_ms is None


def test_a_kernel_that_reads_the_flush_byte_learns_nothing(gemm_task: Task,
                                                           gemm_specs: list) -> None:
    """Reads the flush buffer's byte, expecting a buffer nobody filled before a check,
    and skips the work when it looks like a timed call: the buffer is filled once, before
    the first launch, and only read after that, so every launch sees the same bytes."""

    def body(ctx: FakeLaunch) -> None:
        flush = max(ctx.device.memory.values(), key=lambda b: b.data.size)
        if int(flush.data[0]) != 0:  # the old protocol never filled it before a check
            ctx.device.advance(CHEAP_MS)
            return
        ctx.write("C", compute(gemm_task, ctx))
        ctx.device.advance(COMPUTE_MS)

    res, _ = run(gemm_task, gemm_specs, body)
    assert not res.correct and set(codes(res)) <= {"CK702", "CK704"}, res.findings


# --- returning early -------------------------------------------------------------------------
def test_writing_half_the_output_when_timed_leaves_poison_in_a_judged_call(
        gemm_task: Task, gemm_specs: list) -> None:
    def body(ctx: FakeLaunch) -> None:
        c = compute(gemm_task, ctx)
        if ctx.call >= CHECKED:
            cur = ctx.read("C")
            cur[: len(c) // 2] = c[: len(c) // 2]
            c = cur
        ctx.write("C", c)

    res, _ = run(gemm_task, gemm_specs, body)
    assert codes(res) == ["CK704"]
    assert res.findings[0].data["unwritten"] == SMALL["M"] // 2 * SMALL["N"]


# --- the L2 flush buffer ---------------------------------------------------------------------
def test_writing_into_the_flush_buffer_is_caught(gemm_task: Task, gemm_specs: list) -> None:
    """Keeps state in the biggest buffer it can find (the flush buffer)."""

    def body(ctx: FakeLaunch) -> None:
        ctx.write("C", compute(gemm_task, ctx))
        flush = max(ctx.device.memory.values(), key=lambda b: b.data.size)
        flush.data[:16] = 7

    res, _ = run(gemm_task, gemm_specs, body)
    assert codes(res) == ["CK703"], res.findings
    f = res.findings[0]
    assert f.data["tensor"] == "<l2 flush>" and "flush buffer" in f.message


# --- output aliasing an input ----------------------------------------------------------------
def test_an_answer_written_into_an_input_is_not_an_answer(gemm_task: Task,
                                                          gemm_specs: list) -> None:
    """Writes C's bytes over the start of A instead of into C."""

    def body(ctx: FakeLaunch) -> None:
        c = compute(gemm_task, ctx)
        raw = np.ascontiguousarray(c.astype(np.float32)).view(np.uint8).reshape(-1)
        n = min(raw.size, ctx.buffers["A"].data.size)
        ctx.buffers["A"].data[:n] = raw[:n]

    res, _ = run(gemm_task, gemm_specs, body)
    assert codes(res) == ["CK702", "CK703"], res.findings
    assert [f.data["tensor"] for f in res.findings if f.code == "CK703"] == ["A"]
