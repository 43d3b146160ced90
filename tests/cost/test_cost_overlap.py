"""Resources overlap: the floor is a max over resources, warpgroups of a role overlap one's
MMA with another's CUDA-core math, memory-bound kernels are told in bytes per second, and
the L2 rate comes from the hardware table."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from cost_support import ROOT, example, kernel_from_text

from cake_core.cost.calibration import default_coefficients
from cake_core.cost.model import predict
from cake_core.cost.record import CostRecord, GlobalAccess
from cake_core.cost.render import render_predictions
from cake_core.hardware import get_gpu
from cake_core.ir.kernel import Kernel
from cake_core.source import SourceFile

DATA = Path(__file__).resolve().parent / "data"
H200 = get_gpu("h200")
assert H200 is not None
KMEANS = {"B": 32, "N": 65536, "K": 1024}
GEMM = {"M": 4096, "N": 4096, "K": 4096}


def _vector_add() -> tuple[Kernel, str]:
    text = (DATA / "vector_add_sm90.cake").read_text(encoding="utf-8")
    return kernel_from_text(text, "vector_add_sm90.cake"), text


def test_a_vector_add_is_told_in_bytes_per_second_and_bound_by_dram() -> None:
    kernel, text = _vector_add()
    p = predict(kernel, {"N": 1 << 28}, H200)
    assert p.tensor_flops == 0
    assert p.bottleneck == "memory"
    assert p.bottleneck_detail == "DRAM bandwidth"
    assert p.roofline_bound == "dram"
    assert 0.5 * H200.hbm_bandwidth < p.dram_bytes_per_s <= H200.hbm_bandwidth
    out = render_predictions([p], SourceFile("vector_add_sm90.cake", text))
    assert "GB/s DRAM" in out and "TFLOP/s" not in out
    assert "shared-memory" not in out


def test_the_roofline_is_the_largest_floor_not_a_sum() -> None:
    p = predict(example("kmeans_assign_sm90.cake"), KMEANS, H200)
    f = p.floors
    assert f["tensor"] > 0 and f["cuda"] > 0  # both pipes work
    assert p.roofline_seconds == max(f["tensor"], f["cuda"], f["dram"])
    assert p.roofline_seconds < f["tensor"] + f["cuda"]
    assert p.roofline_bound == "tensor"
    assert p.kernel_floor[1] >= p.roofline_seconds
    assert p.seconds >= p.kernel_floor[1]


def _kmeans_variant(*edits: tuple[str, str]) -> Kernel:
    text = (ROOT / "examples" / "kmeans_assign_sm90.cake").read_text(encoding="utf-8")
    for old, new in edits:
        assert old in text
        text = text.replace(old, new)
    return kernel_from_text(text, f"kmeans_variant_{len(edits)}.cake")


def _staggered(warps: int) -> tuple[str, str]:
    """Consumer warpgroups ordered by a named barrier each iteration (ping-pong)."""
    return ("            s = chunks.wait()\n",
            f"            s = chunks.wait()\n            barrier_sync(1, {warps})\n")


STAGGERED = _staggered(8)


def _times(kernel: Kernel, dims: dict[str, int], kappas: tuple[float, ...]) -> list[float]:
    base = default_coefficients(H200)
    return [predict(kernel, dims, H200, coefficients=replace(base, pipe_contention=k)).seconds
            for k in kappas]


def test_staggered_warpgroups_overlap_mma_with_cuda_core_math() -> None:
    lockstep = example("kmeans_assign_sm90.cake")
    staggered = _kmeans_variant(STAGGERED)
    times = _times(staggered, KMEANS, (0.0, 0.25, 0.5, 1.0))
    assert times == sorted(times)
    assert times[0] < 0.85 * times[-1]
    # the example's two warpgroups wait on the same stages and drain the tensor pipe
    # (`wgmma_wait(0)`) before their math: they run in lockstep, MMA then math
    same = _times(lockstep, KMEANS, (0.0, 1.0))
    assert same[0] == same[1]
    p = predict(lockstep, KMEANS, H200)
    assert p.terms["role:dist"] >= p.terms["tensor"] + p.terms["cuda"]
    assert predict(staggered, KMEANS, H200).seconds < p.seconds


def test_one_warpgroup_does_not_overlap_itself() -> None:
    one = _kmeans_variant(("BM, BN = 128, 128", "BM, BN = 64, 128"), ("warps=12", "warps=8"),
                          ("range(4, 12)", "range(4, 8)"), _staggered(4))
    t0, t1 = _times(one, KMEANS, (0.0, 1.0))
    assert t0 == t1


def test_an_mma_group_in_flight_hides_the_waits() -> None:
    """gemm_sm90 keeps one wgmma group in flight (`wgmma_wait(1)`): its consumer's waits
    overlap the tensor pipe.  Draining every iteration puts them back in sequence."""
    text = (ROOT / "examples" / "gemm_sm90.cake").read_text(encoding="utf-8")
    drained = kernel_from_text(text.replace("wgmma_wait(1)", "wgmma_wait(0)"), "drain.cake")
    ahead = predict(example("gemm_sm90.cake"), GEMM, H200)
    drain = predict(drained, GEMM, H200)
    assert ahead.terms["role:mma"] == pytest.approx(ahead.terms["tensor"], rel=1e-9)
    assert drain.terms["role:mma"] > drain.terms["tensor"]
    assert drain.seconds > ahead.seconds


def test_double_buffered_accumulators_overlap_mma_with_the_argmin() -> None:
    """kmeans_assign_sm90_dbuf keeps one chunk's groups in flight (`wgmma_wait(2)`, two
    accumulators): its consumer is priced max(T, C) + contention x min(T, C), faster than
    the seed's T + C + S and the faster the less the pipes contend."""
    seed = predict(example("kmeans_assign_sm90.cake"), KMEANS, H200)
    dbuf_k = example("kmeans_assign_sm90_dbuf.cake")
    dbuf = predict(dbuf_k, KMEANS, H200)
    assert dbuf.seconds < seed.seconds / 1.15
    assert dbuf.terms["role:dist"] < dbuf.terms["tensor"] + dbuf.terms["cuda"]
    times = _times(dbuf_k, KMEANS, (0.0, 0.5, 1.0))
    assert times == sorted(times) and times[0] < times[-1]


def test_ping_pong_consumer_roles_are_staggered_only_with_named_barriers() -> None:
    """kmeans_assign_sm90_pingpong: two one-warpgroup consumer roles of one pipeline.  The
    same stage releases both, so without the named barriers they run in lockstep and cost
    what the seed's two-warpgroup role costs; with them they are priced as a ping-pong,
    as one role of two staggered warpgroups would be."""
    text = (ROOT / "examples" / "kmeans_assign_sm90_pingpong.cake").read_text(encoding="utf-8")
    lockstep_text = "\n".join(ln for ln in text.split("\n") if "barrier_sync(WG" not in ln
                              and "barrier_arrive(WG" not in ln and "if j " not in ln)
    assert "barrier_sync(" not in lockstep_text and "barrier_arrive(" not in lockstep_text
    seed = predict(example("kmeans_assign_sm90.cake"), KMEANS, H200)
    ping = predict(example("kmeans_assign_sm90_pingpong.cake"), KMEANS, H200)
    lockstep = predict(kernel_from_text(lockstep_text, "lockstep.cake"), KMEANS, H200)
    assert set(ping.terms) >= {"role:dist0+dist1", "role:load"}
    assert lockstep.seconds == pytest.approx(seed.seconds, rel=0.02)
    assert ping.seconds < seed.seconds / 1.15
    assert ping.terms["role:dist0+dist1"] < ping.terms["tensor"] + ping.terms["cuda"]


def test_a_tail_peeled_by_parity_prices_only_the_side_that_runs() -> None:
    """K // BN = 8 takes the two-chunk tail: the one-chunk `else` side is not priced, so
    the kernel costs less than counting both sides would say (every op's executions are
    checked in test_cost_exposure.py)."""
    k = example("kmeans_assign_sm90_dbuf.cake")
    even = predict(k, KMEANS, H200)
    odd = predict(k, {**KMEANS, "K": 1152}, H200)  # 9 chunks: the one-chunk tail
    lines = {ln.line for ln in even.lines if ln.seconds > 0}
    text = (ROOT / "examples" / "kmeans_assign_sm90_dbuf.cake").read_text(encoding="utf-8")
    else_line = text.split("\n").index("        else:") + 2  # 0-based line of the first op
    assert else_line not in lines
    assert else_line in {ln.line for ln in odd.lines if ln.seconds > 0}


def test_the_l2_rate_comes_from_the_hardware_table() -> None:
    gemm = example("gemm_sm90.cake")
    slow = replace(H200, l2_bandwidth=H200.l2_bandwidth / 4)
    fast, starved = predict(gemm, GEMM, H200), predict(gemm, GEMM, slow)
    assert starved.terms["l2"] == pytest.approx(4 * fast.terms["l2"], rel=1e-9)
    assert starved.floors["l2"] == pytest.approx(4 * fast.floors["l2"], rel=1e-9)
    assert starved.seconds > fast.seconds
    assert starved.bottleneck_detail == "L2 bandwidth"


def test_a_multicast_read_crosses_l2_once_per_cluster() -> None:
    read = GlobalAccess("A", 1024.0, frozenset({"x"}), 1 << 20)
    one = CostRecord(reads=(read,))
    two = CostRecord(reads=(replace(read, multicast=2),))
    assert one.global_read_bytes == two.global_read_bytes == 1024.0
    assert two.l2_bytes == 512.0 == one.l2_bytes / 2


def _measured() -> list[dict[str, object]]:
    doc = json.loads((DATA / "h200_measured.json").read_text(encoding="utf-8"))
    assert doc["provenance"]["command"] == "python bench/gpu_check.py"
    return list(doc["runs"])


@pytest.mark.parametrize("run", _measured(), ids=lambda r: f"{r['kernel']}:{r['dims']}")
def test_predictions_stay_within_a_loose_band_of_h200_measurements(
        run: dict[str, object]) -> None:
    """A sanity band (0.5x to 2x), not a fit: the numbers are never read by the model."""
    name = str(run["kernel"]).removeprefix("examples/")
    dims = {str(k): int(v) for k, v in dict(run["dims"]).items()}  # type: ignore[call-overload]
    p = predict(example(name), dims, H200)
    ratio = p.seconds * 1e3 / float(run["measured_ms"])  # type: ignore[arg-type]
    assert 0.5 <= ratio <= 2.0, ratio
