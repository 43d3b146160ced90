"""The real backends on a real GPU (skipped where there is none).

These run the same protocol as the FakeDevice tests, through pycuda or torch, with the
lowered examples built by nvcc: memory and events behave, the examples are correct on small
shapes, a kernel with a missing edge tile is caught by the poison, and a correct GEMM's
time is neither below its roofline floor nor missing its cuBLAS baseline.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from run_support import GEMM, ROOT

from cake_core.run.device import BACKENDS, available_backends, open_device, probe_gpu
from cake_core.run.protocol import TimingConfig
from cake_core.run.runner import BenchOptions, bench
from cake_core.tasks import Shape, load_task


def _ready() -> bool:
    return probe_gpu().present and bool(available_backends())


pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not _ready(), reason="needs an NVIDIA GPU and pycuda or torch")]

QUICK = TimingConfig(warmup=1, rounds=2, calls=3)


@pytest.mark.parametrize("backend", BACKENDS)
def test_device_memory_streams_and_events(backend: str) -> None:
    if backend not in available_backends():
        pytest.skip(f"{backend} is not installed")
    dev = open_device(backend)
    try:
        assert dev.l2_bytes > 0 and dev.compute_capability >= (7, 0)
        data = np.arange(256, dtype=np.float32)
        buf = dev.alloc(data.nbytes)
        dev.upload(buf, data)
        np.testing.assert_array_equal(dev.download(buf, data.nbytes).view(np.float32), data)
        stream = dev.new_stream()
        assert dev.stream_handle(stream) != 0 and dev.pointer(buf) != 0
        start, end = dev.new_event(), dev.new_event()
        dev.record(start, stream)
        dev.fill(buf, 0xFF, 512, stream)
        dev.record(end, stream)
        dev.synchronize()
        raw = dev.download(buf, data.nbytes)
        assert (raw[:512] == 0xFF).all()
        np.testing.assert_array_equal(raw[512:].view(np.float32), data[128:])
        assert dev.elapsed_ms(start, end) >= 0.0
        dev.free(buf)
    finally:
        dev.close()


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_l2_flush_reads_every_byte_and_changes_none(backend: str) -> None:
    """`read_through` leaves the buffer as it was, and takes at least the time reading it
    from HBM takes (8x the L2, bounded at 20 TB/s): the reads are not optimized away."""
    if backend not in available_backends():
        pytest.skip(f"{backend} is not installed")
    dev = open_device(backend)
    try:
        nbytes = 8 * dev.l2_bytes + 3  # a tail that is not a whole word
        buf = dev.alloc(nbytes)
        stream = dev.new_stream()
        dev.fill(buf, 0x5A, nbytes, stream)
        start, end = dev.new_event(), dev.new_event()
        dev.read_through(buf, nbytes, stream)  # once to settle, then timed
        dev.record(start, stream)
        dev.read_through(buf, nbytes, stream)
        dev.record(end, stream)
        dev.synchronize()
        assert (dev.download(buf, nbytes) == 0x5A).all()
        assert dev.elapsed_ms(start, end) * 1e-3 >= nbytes / 20e12
        dev.free(buf)
    finally:
        dev.close()


SMALL_CASES = [
    ("gemm_bf16", "examples/gemm_sm90.cake", "gemm_sm90", {"M": 256, "N": 256, "K": 128}),
    ("gemm_bf16", "examples/gemm_sm90.cake", "gemm_sm90", {"M": 200, "N": 136, "K": 72}),
    ("gemm_bf16", "examples/tinygemm_sm90.cake", "tinygemm_sm90", {"M": 16, "N": 256, "K": 512}),
    ("gemm_f16_sm80", "examples/gemm_sm80.cake", "gemm_sm80", {"M": 200, "N": 136, "K": 72}),
    ("kmeans_assign", "examples/kmeans_assign_sm90.cake", "kmeans_assign_sm90",
     {"B": 2, "N": 200, "K": 256}),
]


@pytest.mark.parametrize(("task", "path", "kernel", "dims"), SMALL_CASES,
                         ids=[f"{c[2]}-{'x'.join(map(str, c[3].values()))}" for c in SMALL_CASES])
def test_examples_are_correct_on_the_gpu(task: str, path: str, kernel: str,
                                         dims: dict[str, int]) -> None:
    if "sm90" in kernel and probe_gpu().compute_capability != (9, 0):
        pytest.skip("an sm_90a kernel needs a Hopper GPU")
    out = bench(ROOT / path, kernel, load_task(task),
                BenchOptions(shapes=[Shape(dims)], timing=QUICK, timeout=60.0))
    (shape,) = out.report.shapes
    assert shape.correct, [d.message for d in out.diagnostics]
    assert shape.candidate_ms is not None and shape.candidate_ms > 0
    assert out.report.backend in BACKENDS


def test_a_missing_edge_tile_is_caught_on_the_gpu(tmp_path: Path) -> None:
    if probe_gpu().compute_capability != (9, 0):
        pytest.skip("an sm_90a kernel needs a Hopper GPU")
    text = GEMM.read_text(encoding="utf-8").replace("grid=(cdiv(M, BM), cdiv(N, BN))",
                                                    "grid=(M // BM, cdiv(N, BN))")
    floored = tmp_path / "floored.cake"
    floored.write_text(text, encoding="utf-8")
    out = bench(floored, "gemm_sm90", load_task("gemm_bf16"),
                BenchOptions(shapes=[Shape({"M": 200, "N": 136, "K": 72})],
                             timing=TimingConfig(enabled=False), timeout=60.0))
    (shape,) = out.report.shapes
    assert shape.correct is False
    assert "CK702" in {d.code for d in out.diagnostics}


def test_a_gemm_time_is_plausible_against_cublas() -> None:
    if probe_gpu().compute_capability != (9, 0):
        pytest.skip("an sm_90a kernel needs a Hopper GPU")
    dims = {"M": 2048, "N": 2048, "K": 2048}
    out = bench(GEMM, "gemm_sm90", load_task("gemm_bf16"),
                BenchOptions(shapes=[Shape(dims)], seeds=(0,), timing=QUICK, timeout=60.0))
    (shape,) = out.report.shapes
    assert shape.correct
    assert shape.floor_ms is not None and shape.candidate_ms > shape.floor_ms
    if "torch" in available_backends():
        assert shape.baseline_ms is not None and shape.baseline_ms > shape.floor_ms
        assert not shape.suspicious
