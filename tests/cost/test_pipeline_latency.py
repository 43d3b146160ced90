"""The pipeline latency bound: Little's law over a pipeline's buffers, one round trip per stage.

Each of a pipeline's `stages` buffers cycles through a round trip and the iteration that
consumes it, so an iteration takes at least `(L + c) / stages`; the copies of one stage
complete on one barrier phase, so a stage issued slab by slab by an inner loop is still one
round trip.
"""

from __future__ import annotations

import pytest
from cost_support import example, variant

from cake_core.cost.calibration import default_coefficients
from cake_core.cost.model import estimate, predict, profile
from cake_core.cost.timing import _pipelined_loops
from cake_core.hardware import get_gpu

H200 = get_gpu("h200")
#: 4 x 33 tiles of 128 x 128: exactly one wave on the 132 SMs, so the terms are one wave's.
ONE_WAVE = {"M": 512, "N": 33 * 128, "K": 4096}
STEADY_TERMS = ("tensor", "cuda", "smem", "l2", "dram")


def _busy(terms: dict[str, float]) -> float:
    return max(v for k, v in terms.items() if k in STEADY_TERMS or k.startswith("role:"))


@pytest.mark.parametrize("stages", [2, 3, 4])
def test_latency_bound_counts_the_buffer_being_consumed(stages: int) -> None:
    p = predict(variant(128, 128, 64, stages), ONE_WAVE, H200)
    assert p.waves == pytest.approx(1.0)
    c = default_coefficients(H200)
    # B (33 x 128 x 4096 bf16, 34.6 MB) is past the resident half of L2: DRAM round trips
    trip = c.dram_latency_ns * 1e-9
    ktiles = 4096 // 64
    busy = _busy(p.terms)
    assert p.terms["latency"] == pytest.approx((ktiles * trip + busy) / stages, rel=1e-9)
    # where it binds it is below the round trip over the copies in flight; where it does
    # not, it is below the steady state and changes nothing
    old = ktiles * trip / (stages - 1)
    assert p.terms["latency"] <= max(old, busy) * (1 + 1e-12)
    assert (p.terms["latency"] > busy) == (old > busy)


def test_two_stages_still_expose_latency_but_less_than_a_round_trip_each() -> None:
    p = predict(variant(128, 128, 64, 2), ONE_WAVE, H200)
    trip = default_coefficients(H200).dram_latency_ns * 1e-9
    assert p.bottleneck == "latency"
    # the consumer holds one buffer while the other is in flight: (L + c) / 2 < L
    assert p.terms["latency"] < 64 * trip
    assert p.terms["latency"] > 64 * trip / 2


def test_latency_bound_does_not_bind_when_compute_covers_the_round_trip() -> None:
    p = predict(variant(128, 128, 64, 4), ONE_WAVE, H200)
    assert p.terms["latency"] < _busy(p.terms)
    assert p.bottleneck == "compute"


def test_slabs_of_one_stage_are_one_round_trip() -> None:
    # the K tile of a stage is four 64-column slabs loaded by `for h in range(D // DK)`,
    # the V tile one copy in the key loop: all complete on the stage's barrier phase
    k = example("attention_fwd_sm90_d256.cake")
    dims = {"BH": 256, "S": 4096}
    prof = profile(k, dims, H200)
    loops = _pipelined_loops(prof)
    assert len(loops) == 1
    (loop, (idx, depth, stage_bytes)), = loops.items()
    assert len(idx) == 2 and depth == 1
    assert prof.loop_execs[loop] == 4096 // 64
    assert stage_bytes == 4 * 64 * 64 * 2 + 256 * 64 * 2
    # two stages of 64 KB at this much tensor work per key tile do cover the round trip
    assert estimate(prof).bottleneck == "compute"


def test_one_slab_per_stage_is_unchanged() -> None:
    # the GEMM loads each operand in one copy per stage: its stage loop is its copy loop
    prof = profile(variant(128, 128, 64, 3), ONE_WAVE, H200)
    loops = _pipelined_loops(prof)
    assert len(loops) == 1
    (_loop, (idx, depth, stage_bytes)), = loops.items()
    assert len(idx) == 2 and depth == 2
    assert stage_bytes == (128 + 128) * 64 * 2
