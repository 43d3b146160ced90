"""The GEMM tile sweep used for the comparison with nvMatmulHeuristics."""

from __future__ import annotations

from cost_support import Variant, kernel_from_text, sweep

from cake_core.cost.resources import smem_bytes


def test_sweep_has_at_least_thirty_distinct_configurations_that_check_clean() -> None:
    variants = sweep()
    assert len(variants) >= 30
    texts = {v.text() for v in variants}
    assert len(texts) == len(variants)
    for v in variants:
        k = kernel_from_text(v.text(), v.name + ".cake")
        assert k.warps == v.warps
        # the generator's own smem arithmetic is the exact plan (no padding in this kernel)
        assert smem_bytes(k) == v.smem_bytes


def test_invalid_configurations_are_refused() -> None:
    assert not Variant(256, 256, 64, 4).valid  # 256 KB of smem
    assert not Variant(128, 256, 64, 5).valid
    assert Variant(128, 256, 64, 4).valid
