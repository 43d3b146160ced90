"""`smem(..., offset=)`: buffers placed by hand, from the parser to the lowering.

One placement serves every consumer (the verifier's plan, `cake check --resources`, the
CUDA constants, the simulator's byte array), so each is checked against the offsets the
kernel wrote; CK317 and CK318 guard what hand placement makes possible.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from cake_core.check import check_text
from cake_core.hardware import get_arch
from cake_core.lower import lower_source
from cake_core.lower.toolchain import find_nvcc
from cake_core.source import SourceFile
from cake_core.verify.smem_plan import smem_plan

RULES = Path(__file__).resolve().parent.parent / "docs" / "rules"
SM80 = get_arch("sm_80")
assert SM80 is not None

REUSE = """\
BM, BN, BK = 128, 128, 32
STAGES = 3
M, N, K = dim("M"), dim("N", multiple_of=8), dim("K", multiple_of=8)

@kernel(arch="sm_80", grid=(cdiv(M, BM), cdiv(N, BN)), warps=4)
def reuse(A: Tensor[f16, (M, K)], B: Tensor[f16, (N, K)], C: Tensor[f16, (M, N)]):
    sa = smem(f16, (STAGES, BM, BK), layout=swizzle(64), offset=0)
    sb = smem(f16, (STAGES, BN, BK), layout=swizzle(64), offset=24576)
    sc = smem(f16, (BM, BN), layout=padded(8), offset=0)
    st = smem(f16, (BM, BK), layout=swizzle(64))
    acc = fragment(f32, (64, 64), layout=mma_acc)
    wm, wn = warp.id // 2, warp.id % 2
    for k in range(cdiv(K, BK)):
        cp_async(sa[k % STAGES], A.tile((BM, BK), (block.x, k)))
        cp_async(sb[k % STAGES], B.tile((BN, BK), (block.y, k)))
        cp_async(st, A.tile((BM, BK), (block.x, k)))
        cp_async_commit()
        cp_async_wait(0)
        syncthreads()
        for kk in range(BK // 16):
            a = ldmatrix(sa[k % STAGES].tile((64, 16), (wm, kk)))
            b = ldmatrix(sb[k % STAGES].tile((64, 16), (wn, kk)).T)
            mma_sync(acc, a, b)
        syncthreads()
    syncthreads()
    store(sc.tile((64, 64), (wm, wn)), cast(acc, f16))
    syncthreads()
    store(C.tile((BM, BN), (block.x, block.y)), load(sc))
"""


def codes_at(text: str) -> list[tuple[str, int]]:
    res = check_text(text, "k.cake")
    return [(d.code, d.span.start.line + 1) for d in res.diagnostics]


def line_of(text: str, needle: str) -> int:
    return text[:text.index(needle)].count("\n") + 1


def test_the_plan_keeps_hand_placed_offsets_and_fits_the_rest_around_them() -> None:
    res = check_text(REUSE, "k.cake")
    assert res.diagnostics == [] and res.program is not None
    plan = smem_plan(res.program.kernels[0], SM80)
    at = {p.name: (p.offset, p.end) for p in plan.placements}
    assert at["sa"] == (0, 24576) and at["sb"] == (24576, 49152) and at["sc"] == (0, 34816)
    # `st` is planned: first fit past every placed byte, aligned to its 512 B atom
    assert at["st"] == (49152, 49152 + 128 * 32 * 2)
    assert plan.total == 49152 + 8192 and plan.padding_bytes == 0
    assert plan.buffer_bytes == plan.total  # sc's bytes are sa's: counted once


def test_overlap_without_a_block_barrier_is_one_finding_at_the_later_buffer() -> None:
    bad = REUSE.replace("    syncthreads()\n    store(sc.tile", "    store(sc.tile")
    assert codes_at(bad) == [("CK317", line_of(bad, "sc = smem("))]


def test_overlap_inside_roles_is_live_at_once() -> None:
    text = (RULES / "CK318.md").read_text(encoding="utf-8")
    good = text.split("## Use instead")[1].split("```python\n")[1].split("```")[0]
    assert codes_at(good) == []
    bad = good.replace("offset=16384)", "offset=0)")
    assert codes_at(bad) == [("CK317", line_of(bad, "sc = smem("))]


@pytest.mark.parametrize(("layout", "offset", "ok"), [
    ("row_major", 128, True), ("row_major", 16, False), ("padded(8)", 64, False),
    ("swizzle(64)", 512, True), ("swizzle(64)", 256, False), ("swizzle(64)", 1536, True),
])
def test_offsets_are_aligned_like_the_planner_would(layout: str, offset: int, ok: bool) -> None:
    """Placed past sa and sb (65536 + offset), so only the alignment is in question; the
    swizzle(128) atom is checked by the corpus (smem_offset_swizzle_misaligned)."""
    text = REUSE.replace("    st = smem(f16, (BM, BK), layout=swizzle(64))",
                         f"    st = smem(f16, (BM, BK), layout={layout}, offset={65536 + offset})")
    want = [] if ok else [("CK318", line_of(text, "st = smem("))]
    assert [c for c in codes_at(text) if c[0] != "CK404"] == want


@pytest.mark.parametrize(("expr", "needle"), [("-128", "cannot be negative"),
                                              ("K", "compile-time constant")])
def test_offset_must_be_a_nonnegative_constant(expr: str, needle: str) -> None:
    bad = REUSE.replace("layout=padded(8), offset=0)", f"layout=padded(8), offset={expr})")
    found = check_text(bad, "k.cake").diagnostics
    assert [d.span.start.line + 1 for d in found] == [line_of(bad, "sc = smem(")]
    assert needle in found[0].message


def test_the_lowering_places_buffers_at_the_written_offsets() -> None:
    res = lower_source(SourceFile(REUSE, "k.cake"))
    assert res.diagnostics == [] and res.cu is not None
    assert "SMEM_SC_OFFSET = 0;" in res.cu and "SMEM_SB_OFFSET = 24576;" in res.cu
    assert "SMEM_ST_OFFSET = 49152;" in res.cu


def test_the_simulator_uses_the_same_addresses() -> None:
    from cake_core.sim import SimKernel

    sk = SimKernel.from_text(REUSE, "k.cake")
    assert {n: b.offset for n, b in sk.buffers.items()} == {"sa": 0, "sb": 24576, "sc": 0,
                                                           "st": 49152}


@pytest.mark.nvcc
@pytest.mark.skipif(find_nvcc() is None, reason="nvcc is not installed")
def test_a_placed_kernel_compiles(tmp_path: Path) -> None:
    from cake_core.lower.build import build_source
    from cake_core.lower.toolchain import find_toolchain

    rep = build_source(SourceFile(REUSE, "k.cake"), toolchain=find_toolchain(), cache=tmp_path)
    assert rep.ok, [d.message for d in rep.diagnostics]
    (k,) = rep.kernels
    assert k.smem_plan == 49152 + 8192


def test_the_simulator_sees_a_race_through_shared_bytes() -> None:
    """The epilogue tile written over the ring before every warp left the loop: the
    simulator compares absolute addresses, so the two buffers are one record list."""
    from cake_core.sim import SimKernel, run_schedules
    from cake_core.sim.inputs import default_dims, random_inputs

    page = (RULES / "CK317.md").read_text(encoding="utf-8")
    bad, good = (part.split("```python\n")[1].split("```")[0]
                 for part in page.split("## Use instead"))
    found: dict[str, set[str]] = {}
    for name, text in (("good", good), ("bad", bad)):
        sk = SimKernel.from_text(text, "k.cake")
        dims = default_dims(sk, 256)
        runs = run_schedules(sk, dims, random_inputs(sk, dims, skip=("C",)), n=1)
        found[name] = {d.message for r in runs for d in r.diagnostics}
    assert found["good"] == set()
    assert any("placed on the same bytes" in m for m in found["bad"]), found["bad"]
