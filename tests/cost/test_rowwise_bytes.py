"""The cost model counts the DRAM bytes a row-wise kernel must move, and names the floor.

A row-wise kernel is memory-bound: its floor is the compulsory bytes (read X and the gain
once, write Y once) over the GPU's DRAM bandwidth.  The byte counts here are written out
from the tensor shapes, not taken from the model.
"""

from __future__ import annotations

import pytest
from cost_support import example

from cake_core.cost.model import predict
from cake_core.hardware import get_gpu

BF16 = 2


@pytest.mark.parametrize("gpu", ["H200", "H100"])
@pytest.mark.parametrize(("name", "dims", "must_move"), [
    # X (M, 4096) read, W (4096,) read, Y (M, 4096) written
    ("rmsnorm_sm90.cake", {"M": 8192}, 2 * 8192 * 4096 * BF16 + 4096 * BF16),
    ("rmsnorm_sm80.cake", {"M": 8192}, 2 * 8192 * 4096 * BF16 + 4096 * BF16),
    # X (M, 4096) read, Y written
    ("softmax_sm90.cake", {"M": 8192}, 2 * 8192 * 4096 * BF16),
])
def test_one_pass_kernels_count_exactly_what_they_must_move(name: str, dims: dict[str, int],
                                                            must_move: int, gpu: str) -> None:
    g = get_gpu(gpu)
    p = predict(example(name), dims, g)
    assert p.work["compulsory_bytes"] == must_move
    assert p.work["dram_bytes"] == must_move
    assert (p.bottleneck, p.roofline_bound) == ("memory", "dram")
    assert p.roofline_seconds == pytest.approx(must_move / g.hbm_bandwidth)
    assert 0.0 < p.dram_bytes_per_s <= g.hbm_bandwidth


def test_online_softmax_floor_counts_one_read_and_the_model_both() -> None:
    """The online kernel reads X twice.  Its floor is the compulsory one read and one
    write; the model's DRAM traffic counts the second read too (it does not model a block
    re-reading its own tile from L2), so the predicted time is an upper bound."""
    g = get_gpu("H200")
    m, n = 8192, 8192
    p = predict(example("softmax_sm90_online.cake"), {"M": m, "N": n}, g)
    x = m * n * BF16
    assert p.work["compulsory_bytes"] == 2 * x
    assert p.work["dram_bytes"] == 3 * x
    assert p.roofline_seconds == pytest.approx(2 * x / g.hbm_bandwidth)
    assert (p.bottleneck, p.roofline_bound) == ("memory", "dram")
