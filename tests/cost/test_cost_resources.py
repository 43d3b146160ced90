"""Shared memory (exact), registers (estimated with a range) and occupancy."""

from __future__ import annotations

from pathlib import Path

import pytest
from cost_support import example, examples_present, kernel_from_text

from cake_core.cost.resources import (
    own_smem_plan,
    resource_report,
    smem_bytes,
    smem_plan,
    waves,
)
from cake_core.hardware import get_arch

SM90 = get_arch("sm_90a")
SM80 = get_arch("sm_80")


def test_gemm_sm90_smem_is_exact() -> None:
    k = example("gemm_sm90.cake")
    # 4 stages x (128x64 + 256x64) bf16, then 8 mbarriers of 8 bytes
    assert smem_bytes(k) == 4 * (128 + 256) * 64 * 2 + 8 * 8


@pytest.mark.parametrize("path", examples_present(), ids=lambda p: p.name)
def test_fallback_plan_matches_the_verifiers_plan(path: Path) -> None:
    k = example(path.name)
    assert own_smem_plan(k).total == smem_plan(k).total
    assert [s.offset for s in own_smem_plan(k).slots] == [s.offset for s in smem_plan(k).slots]


ALIGN_TEXT = '''
M = dim("M")

@kernel(arch="sm_90a", grid=(cdiv(M, 64),), warps=4)
def k(A: Tensor[bf16, (M, 64)], C: Tensor[bf16, (M, 64)]):
    small = smem(f32, (3,))
    big = smem(bf16, (64, 64), layout=swizzle(128))
    bar = mbarrier(count=1)
    fence_barrier_init()
    syncthreads()
    bar.expect_tx(8192)
    tma_load(big, A.tile((64, 64), (block.x, 0)), bar)
    bar.wait(0)
    x = load(big)
    store(C.tile((64, 64), (block.x, 0)), x)
    store(small, fragment(f32, (3,)))
'''


def test_alignment_padding_is_counted() -> None:
    k = kernel_from_text(ALIGN_TEXT, "align.cake")
    plan = smem_plan(k)
    by_name = {s.name: s for s in plan.slots}
    assert by_name["big"].offset % 1024 == 0
    assert by_name["small"].offset % 16 == 0
    assert plan.total >= 64 * 64 * 2 + 12 + 8
    assert plan.total == own_smem_plan(k).total


def test_setmaxnreg_roles_hold_their_ceiling() -> None:
    rep = resource_report(example("gemm_sm90.cake"), SM90)
    load, mma = rep.registers["load"], rep.registers["mma"]
    assert (load.allocated, mma.allocated) == (40, 232)
    assert mma.accumulators == 128  # 128x256 f32 over 256 threads
    for r in (load, mma):
        assert r.low <= r.estimate <= r.high <= r.ceiling
    assert rep.occupancy.blocks == 1
    assert rep.occupancy.regs_per_thread == 168
    assert {b.role: b.regs_total for b in rep.budgets} == {"load": 128 * 40, "mma": 256 * 232}


def test_per_warp_fragments_and_register_limited_occupancy() -> None:
    rep = resource_report(example("gemm_sm80.cake"), SM80)
    (r,) = rep.registers.values()
    assert r.accumulators == 128  # a 64x64 f32 mma_acc per warp: 4096 / 32 lanes
    assert r.staging == 32  # two 16-bit operand fragments of 16 registers each
    assert r.low <= r.estimate <= r.high <= 255
    assert rep.occupancy.limits["smem"] == 3
    assert rep.occupancy.blocks == rep.occupancy.limits["registers"] == 2
    assert rep.occupancy.limited_by == "registers"


def test_tinygemm_fits_two_blocks_per_sm() -> None:
    rep = resource_report(example("tinygemm_sm90.cake"), SM90)
    assert rep.occupancy.blocks == 2
    assert rep.occupancy.limited_by == "smem"
    assert rep.registers["mma"].accumulators == 16  # 64x32 f32 over 128 threads


TOO_BIG = '''
M = dim("M")

@kernel(arch="sm_90a", grid=(cdiv(M, 64),), warps=4)
def k(A: Tensor[bf16, (M, 64)]):
    big = smem(bf16, (8, 256, 64), layout=swizzle(128))
    x = load(big)
    store(A.tile((64, 64), (block.x, 0)), load(A.tile((64, 64), (block.x, 0))))
'''


def test_a_block_that_does_not_fit_has_no_occupancy() -> None:
    from cake_core.check import check_text

    res = check_text(TOO_BIG, "big.cake")
    k = res.program.kernels[0]
    rep = resource_report(k, SM90)
    assert rep.occupancy.blocks == 0
    assert rep.occupancy.limited_by == "smem"
    assert any("exceeds" in w for w in rep.warnings)


def test_waves() -> None:
    assert waves(512, 132, 1) == pytest.approx(512 / 132)
    assert waves(264, 132, 2) == 1.0
