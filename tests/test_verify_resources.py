"""The resource and layout models, checked against numbers worked out by hand."""

from __future__ import annotations

from pathlib import Path

import pytest
from kernels import GEMM_SM90 as GEMM
from kernels import GEMM_VARIANTS

from cake_core.check import check_text
from cake_core.diagnostics.model import Severity, apply_edits
from cake_core.hardware import get_arch
from cake_core.ir.kernel import Kernel, SmemAlloc
from cake_core.ir.symbolic import Const
from cake_core.ir.types import DType, SmemLayout
from cake_core.source import SourceFile
from cake_core.verify import banks, layout, resources
from cake_core.verify.registers import (
    allocated,
    launch_registers,
    nearest_legal_regs,
    occupancy,
    register_budget,
)
from cake_core.verify.smem_plan import plan_allocations, smem_plan
from cake_core.verify.views import Geometry, View, ViewTracer, geometry_of

ROOT = Path(__file__).resolve().parent.parent
SM90 = get_arch("sm_90a")
SM80 = get_arch("sm_80")
assert SM90 is not None and SM80 is not None

def kernel_of(text: str) -> Kernel:
    r = check_text(text, "k.cake", passes=[])
    assert r.program is not None and not r.errors, [d.message for d in r.diagnostics]
    return r.program.kernels[0]


def mine(text: str, path: str = "k.cake") -> list:
    """Findings of the resource and layout passes alone."""
    return check_text(text, path, passes=[resources.check, layout.check]).diagnostics


def _alloc(name: str, nbytes: int, align: int, swz: int = 0, kind: str = "buffer") -> SmemAlloc:
    span = SourceFile("", "x").span(0, 0)
    lay = None if kind == "barrier" else SmemLayout("row", swz)
    return SmemAlloc(name, None if kind == "barrier" else DType.BF16, (1,), lay, nbytes,
                     align, span, kind)


# --- the shared-memory plan ------------------------------------------------------------
def test_smem_plan_of_the_gemm() -> None:
    plan = smem_plan(kernel_of(GEMM), SM90)
    got = [(p.name, p.offset, p.nbytes, p.padding) for p in plan.placements]
    assert got == [("sa", 0, 65536, 0), ("sb", 65536, 131072, 0), ("ab", 196608, 64, 0)]
    assert (plan.total, plan.buffer_bytes, plan.barrier_bytes) == (196672, 196608, 64)
    assert plan.limit == 232448 and plan.fits


def test_smem_plan_orders_by_alignment_and_pads_by_hand() -> None:
    # declared: a 120 B row-major buffer, a 512 B swizzle(128) stage, a 100 B buffer,
    # a swizzle(64) buffer, then 3 mbarriers.
    allocs = [_alloc("small", 120, 16), _alloc("sw128", 512, 1024, 128),
              _alloc("odd", 100, 16), _alloc("sw64", 512, 512, 64),
              _alloc("bars", 24, 8, kind="barrier")]
    plan = plan_allocations(allocs, 4096)
    got = [(p.name, p.offset, p.padding, p.align) for p in plan.placements]
    # sw128 @0..512; sw64 needs 512: @512..1024; small (128-aligned) @1024..1144;
    # odd: 1144 -> 1152 (8 B padding) ..1252; bars: 8-aligned 1252 -> 1256 (4 B) ..1280.
    assert got == [("sw128", 0, 0, 1024), ("sw64", 512, 0, 512), ("small", 1024, 0, 128),
                   ("odd", 1152, 8, 128), ("bars", 1256, 4, 8)]
    assert (plan.total, plan.padding_bytes) == (1280, 12)
    assert plan.total == plan.buffer_bytes + plan.barrier_bytes + plan.padding_bytes


def test_overflow_names_the_crossing_allocation() -> None:
    allocs = [_alloc("a", 3000, 1024, 128), _alloc("b", 2000, 1024, 128)]
    plan = plan_allocations(allocs, 4096)
    over = plan.overflowing()
    assert over is not None and over.name == "b" and over.offset == 3072


def test_smem_overflow_fix_rewrites_the_stage_constant() -> None:
    text = GEMM.replace("64, 4\n", "64, 5\n", 1)
    (d,) = mine(text)
    assert d.code == "CK201" and "`sb`" in d.message and "245840 B" in d.message
    assert d.data["smem"]["total"] == 245840  # type: ignore[index]
    fixed = apply_edits(text, d.fixes[0].edits)
    assert fixed.startswith("BM, BN, BK, STAGES = 128, 256, 64, 4\n")
    assert mine(fixed) == []


# --- registers ------------------------------------------------------------------------
def test_launch_register_ceiling() -> None:
    assert launch_registers(384, SM90) == 168  # 65536 / 384 = 170.7 -> 168
    assert launch_registers(256, SM90) == 255  # 256 capped at 255
    assert launch_registers(128, SM90) == 255
    assert allocated(255, SM90) == 256 and allocated(168, SM90) == 168


def test_register_budget_of_the_warp_specialised_gemm() -> None:
    k = kernel_of(GEMM)
    b = register_budget(k, SM90)
    assert (b.launch_regs, b.pool) == (168, 64512)
    assert b.demand == 4 * 32 * 40 + 8 * 32 * 232 == 64512
    assert b.fits
    occ = occupancy(k, SM90, smem_plan(k, SM90).total, b)
    assert (occ.blocks, occ.by_smem, occ.by_registers, occ.by_warps) == (1, 1, 1, 5)


def test_oversubscribed_split_is_an_error_with_a_fitting_fix() -> None:
    text = GEMM.replace("regs=232", "regs=240")
    (d,) = mine(text)
    assert d.code == "CK202" and d.severity is Severity.ERROR
    assert d.data["demand"] == 66560 and d.data["pool"] == 64512
    assert mine(apply_edits(text, d.fixes[0].edits)) == []


def test_idle_warps_keep_the_launch_registers() -> None:
    text = GEMM.replace("warps=12", "warps=16")  # warps 12..15 in no role
    b = register_budget(kernel_of(text), SM90)
    assert b.launch_regs == 128 and b.idle_warps == 4
    assert b.demand == 4 * 32 * 40 + 8 * 32 * 232 + 4 * 32 * 128 > b.pool == 65536
    assert [d.code for d in mine(text)] == ["CK202"]


@pytest.mark.parametrize(("n", "want"), [(236, 232), (20, 24), (300, 256), (45, 48), (44, 40)])
def test_nearest_legal_register_count(n: int, want: int) -> None:
    assert nearest_legal_regs(n) == want


def test_register_rules() -> None:
    assert [d.code for d in mine(GEMM.replace("regs=232", "regs=233"))] == ["CK203"]
    assert [d.code for d in mine(GEMM.replace("range(0, 4), regs", "range(0, 3), regs"))] \
        == ["CK204"]


# --- bank conflicts -------------------------------------------------------------------
def _view(rows: int, cols: int, transposed: bool = False) -> View:
    return View("s", Const(0), Const(0), rows, cols, transposed, 2)


def test_swizzle_is_chunk_xor_row_for_full_rows() -> None:
    for row in range(16):
        for chunk in range(8):
            assert banks.swizzle(row * 128 + chunk * 16, 128) == row * 128 + (chunk ^ row % 8) * 16
    assert banks.swizzle(0x90, 0) == 0x90
    assert banks.swizzle(0x90, 32) == 0x80  # bit 7 flips bit 4


def test_ldmatrix_on_unswizzled_128_byte_rows_is_8_way() -> None:
    g = geometry_of("s", DType.BF16, (128, 64), SmemLayout())
    rep = banks.ldmatrix_report(g, _view(16, 16), 0)
    # 4 matrices; each phase reads 8 rows 128 B apart: all in banks 0-3 -> 8 wavefronts.
    assert (rep.phases, rep.wavefronts, rep.extra, rep.worst, rep.instructions) == \
        (4, 32, 28, 8, 1)


def test_ldmatrix_on_unswizzled_64_byte_rows_is_4_way() -> None:
    g = geometry_of("s", DType.F16, (128, 32), SmemLayout())
    rep = banks.ldmatrix_report(g, _view(64, 16), 0)
    assert (rep.phases, rep.wavefronts, rep.worst) == (16, 64, 4)


@pytest.mark.parametrize(("cols", "lay"), [(64, SmemLayout("row", 128)),
                                            (32, SmemLayout("row", 64)),
                                            (16, SmemLayout("row", 32)),
                                            (64, SmemLayout("row", 0, 8))])
def test_swizzled_or_padded_buffers_are_conflict_free(cols: int, lay: SmemLayout) -> None:
    g = geometry_of("s", DType.BF16, (128, cols), lay)
    for base_row in range(0, 64, 8):
        for col in range(0, cols, 16 if cols >= 16 else 8):
            base = base_row * g.pitch + col * 2
            assert banks.ldmatrix_report(g, _view(16, 16), base).extra == 0


def test_column_walk_of_a_transposed_view() -> None:
    g = geometry_of("s", DType.F32, (32, 32), SmemLayout())
    rep = banks.fragment_access_report(g, _view(32, 32, transposed=True), 128, 0)
    # one instruction per logical row: 32 lanes walk a physical column, 128 B apart
    assert (rep.instructions, rep.phases, rep.worst, rep.extra) == (32, 32, 32, 992)
    padded = geometry_of("s", DType.F32, (32, 32), SmemLayout("row", 0, 1))
    rep = banks.fragment_access_report(padded, _view(32, 32, transposed=True), 128, 0)
    assert rep.extra == 0


def test_fragment_rows_are_conflict_free() -> None:
    g = geometry_of("s", DType.BF16, (64, 64), SmemLayout("row", 128))
    rep = banks.fragment_access_report(g, _view(64, 64), 128, 0)
    # 64 columns over 32 lanes: 2 bf16 (4 bytes) per lane, one instruction per row
    assert banks.fragment_vector(64, 2) == 2
    assert (rep.instructions, rep.phases, rep.extra) == (64, 64, 0)
    wide = geometry_of("s", DType.BF16, (64, 256), SmemLayout())
    rep = banks.fragment_access_report(wide, _view(64, 256), 256, 0)
    assert banks.fragment_vector(256, 2) == 8
    assert (rep.instructions, rep.phases, rep.extra) == (64, 256, 0)


def test_fragment_vector_matches_the_lowering() -> None:
    lowering = pytest.importorskip("cake_core.lower.layouts")
    for cols in (8, 16, 24, 32, 64, 128, 256, 96):
        for esize in (1, 2, 4):
            assert banks.fragment_vector(cols, esize) == lowering.vector_width(cols, esize)


def test_views_trace_stage_tile_and_transpose() -> None:
    text = (ROOT / "examples" / "gemm_sm80.cake").read_text(encoding="utf-8") \
        if (ROOT / "examples" / "gemm_sm80.cake").is_file() else None
    if text is None:
        pytest.skip("examples/gemm_sm80.cake is not present")
    k = kernel_of(text)
    tracer = ViewTracer(k)
    lds = [op for op in k.ops() if op.name == "ldmatrix"]
    a, b = (tracer.view(op, "src") for op in lds)
    assert a is not None and b is not None
    assert (a.rows, a.cols, a.transposed) == (64, 16, False)
    assert (b.rows, b.cols, b.transposed) == (64, 16, True)
    assert str(a.col0) == "kk * 16"
    assert str(a.row0) == "k % 3 * 128 + warp.id // 2 * 64"  # stage, then the warp's slab


def test_bank_conflict_finding_counts_and_fixes() -> None:
    text = GEMM_SM80_ROW_MAJOR
    (d,) = mine(text)
    assert d.code == "CK404" and d.severity is Severity.WARNING
    # a: 4 matrices, b: 16 matrices, each 8 rows 128 B apart -> 8 wavefronts instead of 1
    assert "8-way" in d.message and "(28 extra)" in d.message
    assert d.data["extra_wavefronts"] == (4 + 16) * 7
    titles = [f.title for f in d.fixes]
    assert titles[0] == "use layout=swizzle(128) for `sa`"
    assert mine(apply_edits(text, d.fixes[0].edits)) == []


GEMM_SM80_ROW_MAJOR = '''BM, BK = 64, 64
M, K = dim("M"), dim("K", multiple_of=8)

@kernel(arch="sm_80", grid=(cdiv(M, BM),), warps=4)
def rows(A: Tensor[f16, (M, K)], C: Tensor[f32, (M, 64)]):
    sa = smem(f16, (BM, BK))
    acc = fragment(f32, (16, 64), layout=mma_acc)
    cp_async(sa, A.tile((BM, BK), (block.x, 0)))
    cp_async_commit()
    cp_async_wait(0)
    syncthreads()
    a = ldmatrix(sa.tile((16, 16), (warp.id, 0)))
    mma_sync(acc, a, ldmatrix(sa.tile((64, 16), (0, 0)).T))
    store(C.tile((16, 64), (block.x * 4 + warp.id, 0)), acc)
'''


# --- TMA boxes -----------------------------------------------------------------------
def test_tma_stride_of_an_undeclared_dim_is_a_warning_with_a_fix() -> None:
    text = GEMM.replace('dim("K", multiple_of=64)', 'dim("K")')
    (d,) = mine(text)
    assert d.code == "CK209" and d.severity is Severity.WARNING
    assert d.fixes[0].edits[0].new_text == ", multiple_of=8"
    assert mine(apply_edits(text, d.fixes[0].edits)) == []


TMA_COPY = '''BR, BC = {br}, {bc}
R, C = dim("R"), dim("C", multiple_of={mult})

@kernel(arch="sm_90a", grid=(cdiv(R, BR),), warps=8)
def copy(X: Tensor[f32, (R, C)], out: Tensor[f32, (R,)]):
    sx = smem(f32, (BR, BC))
    ready = mbarrier(count=1)
    fence_barrier_init()
    syncthreads()
    with role("load", warps=range(0, 4)):
        ready.expect_tx(BR * BC * 4)
        tma_load(sx, X.tile((BR, BC), (block.x, 0)), ready)
    with role("sum", warps=range(4, 8)):
        ready.wait(0)
        store(out.tile((BR,), (block.x,)), row_sum(load(sx)))
'''


@pytest.mark.parametrize(("br", "bc", "mult", "codes"), [
    (256, 16, 4, []),                    # 256 rows, 64-byte rows: legal
    (272, 16, 4, ["CK207"]),             # rows past the 256-element box limit
    (64, 512, 4, ["CK207"]),             # inner extent past the limit
    (64, 6, 4, ["CK208"]),               # 24-byte box rows
    (64, 16, 3, ["CK209"]),              # rows of C f32: 12 * n bytes, unknown alignment
])
def test_tma_box_rules(br: int, bc: int, mult: int, codes: list[str]) -> None:
    text = TMA_COPY.format(br=br, bc=bc, mult=mult)
    assert [d.code for d in mine(text)] == codes


# --- wgmma rows per warpgroup (CK211) --------------------------------------------------
PINGPONG = (ROOT / "examples" / "kmeans_assign_sm90_pingpong.cake").read_text(encoding="utf-8")
SEED = (ROOT / "examples" / "kmeans_assign_sm90.cake").read_text(encoding="utf-8")


@pytest.mark.parametrize("text, before, after, codes", [
    # one-warpgroup roles: 64 rows, or 128 as two m64 slabs (two wgmmas per K step)
    (PINGPONG, "BM, BN = 64, 128", "BM, BN = 64, 128", []),
    (PINGPONG, "BM, BN = 64, 128", "BM, BN = 128, 128", []),
    # two warpgroups: 128 rows (64 each) or 256 (two slabs each); 64 or 192 do not split
    (SEED, "BM, BN = 128, 128", "BM, BN = 256, 128", []),
    (SEED, "BM, BN = 128, 128", "BM, BN = 64, 128", ["CK211"]),
    (SEED, "BM, BN = 128, 128", "BM, BN = 192, 128", ["CK211"]),
])
def test_wgmma_rows_are_whole_64_row_slabs_per_warpgroup(text: str, before: str, after: str,
                                                         codes: list[str]) -> None:
    assert before in text
    found = [d for d in mine(text.replace(before, after)) if d.code == "CK211"]
    assert [d.code for d in found] == codes
    if found:
        assert "whole 64-row slabs" in found[0].message


# --- the table and the examples -------------------------------------------------------
def test_resource_table_renders_plan_roles_and_occupancy() -> None:
    table = resources.resource_table(kernel_of(GEMM), SM90)
    text = resources.render_resource_table(table)
    assert "196672 B of 232448 B" in text
    assert "sb" in text and "131072" in text and "65536" in text
    assert "load" in text and "5120" in text and "59392" in text
    assert "occupancy: 1 block/SM (limited by" in text
    data = table.as_data()
    assert data["registers"]["pool"] == 64512  # type: ignore[index]


EXAMPLES = sorted((ROOT / "examples").glob("*.cake"))


@pytest.mark.parametrize("path", [*EXAMPLES, *GEMM_VARIANTS], ids=lambda p: p.name)
def test_examples_have_no_resource_or_layout_findings(path: Path) -> None:
    found = mine(path.read_text(encoding="utf-8"), str(path))
    assert found == [], [(d.code, d.span.start.line + 1, d.message) for d in found]


def _reference_chunks(g: Geometry, view: View, threads: int,
                      base: int) -> tuple[int, int, int]:
    """Lane by lane, no caching: (instructions, wavefronts, worst) of a cp.async."""
    width = banks.vector_width(g, view)
    per_vec = width // g.esize
    lr, lc = view.logical_shape
    per_row = max(1, lc // per_vec)
    nvec = lr * per_row
    lanes = banks.lanes_per_phase(width)
    instructions = wavefronts = worst = 0
    for first_round in range(0, nvec, threads):
        for w in range(threads // 32):
            first = first_round + 32 * w
            if first >= nvec:
                break
            instructions += 1
            for p in range(0, 32, lanes):
                addrs = []
                for i in range(first + p, min(first + p + lanes, nvec)):
                    r, c = divmod(i, per_row)
                    c *= per_vec
                    row, col = (c, r) if view.transposed else (r, c)
                    addrs.append(banks.address(g, base, row, col))
                if addrs:
                    wf = banks.phase_wavefronts(addrs, width)
                    wavefronts += wf
                    worst = max(worst, wf)
    return instructions, wavefronts, worst


@pytest.mark.parametrize("dtype", [DType.F32, DType.BF16])
@pytest.mark.parametrize("lay", [SmemLayout(), SmemLayout("row", 128), SmemLayout("row", 64),
                                 SmemLayout("row", 0, 1), SmemLayout("row", 0, 8)])
@pytest.mark.parametrize(("rows", "cols", "transposed"), [(32, 64, False), (16, 24, False),
                                                          (64, 32, True), (8, 40, False),
                                                          (16, 16, True)])
def test_cached_models_match_lane_by_lane(dtype: DType, lay: SmemLayout, rows: int,
                                          cols: int, transposed: bool) -> None:
    g = geometry_of("s", dtype, (128, 64), lay)
    view = _view(rows, cols, transposed)
    for base in (0, 16 * 3, g.pitch * 5, 1000 // 16 * 16):
        rep = banks.chunked_access_report(g, view, 128, base)
        assert (rep.instructions, rep.wavefronts, rep.worst) == \
            _reference_chunks(g, view, 128, base)
        rep = banks.fragment_access_report(g, view, 128, base)
        assert (rep.instructions, rep.wavefronts, rep.worst) == \
            _reference_fragment(g, view, 128, base)


def _reference_fragment(g: Geometry, view: View, threads: int,
                        base: int) -> tuple[int, int, int]:
    """The lowering's rows layout, lane by lane: row r to warp r % warps, lane l the v
    columns from l * v (then 32 * v further); a transposed view reads them one by one."""
    lr, lc = view.logical_shape
    v = banks.fragment_vector(lc, g.esize)
    warps = threads // 32
    instructions = wavefronts = worst = 0
    for w in range(warps):
        for r in range(w, lr, warps):
            for q in range(0, lc, 32 * v):
                firsts = [q + lane * v for lane in range(32) if q + lane * v < lc]
                if view.transposed:  # v single-element instructions, column by column
                    accesses = [([banks.address(g, base, c + j, r) for c in firsts], g.esize)
                                for j in range(v)]
                else:
                    accesses = [([banks.address(g, base, r, c) for c in firsts], v * g.esize)]
                for addrs, width in accesses:
                    instructions += 1
                    step = banks.lanes_per_phase(width)
                    for p in range(0, len(addrs), step):
                        wf = banks.phase_wavefronts(addrs[p:p + step], width)
                        wavefronts += wf
                        worst = max(worst, wf)
    return instructions, wavefronts, worst
