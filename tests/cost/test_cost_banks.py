"""Bank conflicts in the cost model: an n-way conflicted access costs n times the
shared-memory time, a conflict-free one costs exactly what it did before conflicts were
priced, and the ratio is the verifier's wavefront count (CK404), not a second model."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from cost_support import ROOT

from cake_core.check import check_text
from cake_core.cost.banks import kernel_conflicts
from cake_core.cost.model import KernelProfile, Prediction, estimate, predict, profile
from cake_core.ir.kernel import Kernel

DATA = Path(__file__).resolve().parent / "data"
BUGS = ROOT / "tests" / "bugs"
CONFLICTED = DATA / "gemm_banks_row_major_sm80.cake"
CONFLICT_FREE = DATA / "gemm_banks_swizzle_sm80.cake"
DIMS = {"M": 4096, "N": 4096, "K": 4096}
#: Planted layout bugs whose `.fixed` twin changes only the layout.
BUG_PAIRS = ("ldmatrix_unswizzled", "padded_cp_async_conflict", "transpose_store_conflict")


def _checked(path: Path) -> tuple[Kernel, list[dict[str, int]]]:
    """The kernel and the accesses the CK404 findings report."""
    res = check_text(path.read_text(encoding="utf-8"), path.name)
    assert not res.errors, [d.message for d in res.errors]
    assert res.program is not None
    accesses = [a for d in res.diagnostics if d.code == "CK404"
                for a in (d.data or {}).get("accesses", [])]
    return res.program.kernels[0], accesses


def _bank_blind(p: KernelProfile) -> KernelProfile:
    """The profile as the model priced it before bank conflicts: every ratio 1."""
    ops = [dataclasses.replace(w, record=dataclasses.replace(w.record, smem_conflict=1.0))
           for w in p.ops]
    return dataclasses.replace(p, ops=ops)


def _smem_seconds(p: Prediction) -> float:
    return p.terms["smem"]


def _smem_and_serial(p: Prediction) -> float:
    """Shared-memory time in the loops plus the prologue/epilogue (which holds the
    shared-memory time of a kernel without loops)."""
    return p.terms["smem"] + p.terms["serial"]


def test_row_major_ldmatrix_is_four_way_conflicted_as_the_verifier_counts() -> None:
    kernel, accesses = _checked(CONFLICTED)
    conflicts = kernel_conflicts(kernel)
    ldm = [op for op in kernel.ops() if op.name == "ldmatrix"]
    assert len(ldm) == 2 and all(id(op) in conflicts for op in ldm)
    # the cp.async chunks run along rows: conflict-free, not priced
    assert not any(id(op) in conflicts for op in kernel.ops() if op.name == "cp_async")
    assert len(accesses) == 2
    for op, acc in zip(ldm, accesses, strict=True):
        c = conflicts[id(op)]
        assert (c.wavefronts, c.ideal, c.worst) == (acc["wavefronts"], acc["ideal"],
                                                    acc["worst"])
        assert c.ratio == pytest.approx(4.0)


def test_conflict_free_layout_has_no_conflicts_and_its_prediction_is_unchanged() -> None:
    kernel, accesses = _checked(CONFLICT_FREE)
    assert accesses == []
    assert kernel_conflicts(kernel) == {}
    p = profile(kernel, DIMS)
    assert all(w.record.smem_conflict == 1.0 for w in p.ops)
    now, before = estimate(p), estimate(_bank_blind(p))
    assert now.seconds == before.seconds
    assert now.terms == before.terms
    # the same kernel as the example, priced the same
    example, _ = _checked(ROOT / "examples" / "gemm_sm80.cake")
    assert predict(example, DIMS).seconds == now.seconds


def test_conflicted_layout_is_predicted_slower_by_its_wavefronts() -> None:
    bad_k, _ = _checked(CONFLICTED)
    good_k, _ = _checked(CONFLICT_FREE)
    bad_p, good_p = profile(bad_k, DIMS), profile(good_k, DIMS)
    # blind to banks, the two layouts were indistinguishable
    assert estimate(_bank_blind(bad_p)).seconds == estimate(good_p).seconds
    bad, good = estimate(bad_p), estimate(good_p)
    assert bad.seconds > 1.5 * good.seconds
    assert bad.bottleneck == "memory" and good.bottleneck == "compute"
    assert "bank conflicts" in bad.bottleneck_detail and "4x" in bad.bottleneck_detail
    # the shared-memory term grows by the ldmatrix share times (ratio - 1), nothing else
    ratio = 4.0
    ldm = sum(w.record.smem_read * w.execs for w in good_p.ops
              if w.op.name == "ldmatrix" and w.phase == "steady")
    other = sum((w.record.smem_read + w.record.smem_write) * w.execs for w in good_p.ops
                if w.op.name != "ldmatrix" and w.phase == "steady")
    assert ldm > 0 and other > 0
    expected = (ratio * ldm + other) / (ldm + other)
    assert _smem_seconds(bad) / _smem_seconds(good) == pytest.approx(expected, rel=1e-9)
    # bytes stay bytes: the conflicts cost time, not traffic
    assert bad.work["smem_bytes"] == good.work["smem_bytes"]
    assert bad.terms["tensor"] == good.terms["tensor"]


def test_conflict_ratio_reaches_only_the_conflicted_ops() -> None:
    kernel, _ = _checked(CONFLICTED)
    for w in profile(kernel, DIMS).ops:
        want = 4.0 if w.op.name == "ldmatrix" else 1.0
        assert w.record.smem_conflict == pytest.approx(want), w.op.name


@pytest.mark.parametrize("name", BUG_PAIRS)
def test_planted_conflicts_cost_their_wavefronts_and_their_fix_removes_them(name: str) -> None:
    bad_k, accesses = _checked(BUGS / f"{name}.cake")
    good_k, fixed_accesses = _checked(BUGS / f"{name}.fixed.cake")
    assert accesses and not fixed_accesses
    conflicts = kernel_conflicts(bad_k)
    got = sorted((c.wavefronts, c.ideal) for c in conflicts.values())
    assert got == sorted((a["wavefronts"], a["ideal"]) for a in accesses)
    assert kernel_conflicts(good_k) == {}
    dims = {d: 4096 for d in bad_k.dims}
    bad, good = predict(bad_k, dims), predict(good_k, dims)
    assert _smem_and_serial(bad) > _smem_and_serial(good)
    assert bad.seconds >= good.seconds


def test_transposed_store_prices_its_32_way_conflict() -> None:
    kernel, _ = _checked(BUGS / "transpose_store_conflict.cake")
    (c,) = kernel_conflicts(kernel).values()
    assert c.worst == 32
    p = profile(kernel, {"R": 4096, "C": 4096})
    store = next(w for w in p.ops if w.op.name == "store" and w.record.smem_write)
    assert store.record.smem_conflict == pytest.approx(c.ratio)
    assert c.ratio > 8


def test_tma_and_wgmma_kernels_are_left_at_ratio_one() -> None:
    for name in ("gemm_sm90.cake", "kmeans_assign_sm90.cake", "tinygemm_sm90.cake"):
        kernel, accesses = _checked(ROOT / "examples" / name)
        assert accesses == []
        assert kernel_conflicts(kernel) == {}


def test_analysis_is_cached_per_kernel() -> None:
    kernel, _ = _checked(CONFLICTED)
    assert kernel_conflicts(kernel) is kernel_conflicts(kernel)
