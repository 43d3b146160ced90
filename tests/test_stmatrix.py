"""`stmatrix`: its type rule, its effects as the sync rules see them (fences, CK314), its
simulation against the task reference, and its lowering (lane addresses through the
buffer's swizzle, the register order of a wgmma accumulator).

The base kernel is a one-warpgroup GEMM whose epilogue stores 64-column parts of the
accumulator through one swizzled buffer; variants change one line at a time.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from sass_tools import sass_of

from cake_cli.main import main
from cake_core.check import check_text
from cake_core.diagnostics.model import apply_edits
from cake_core.emulate.build import host_compiler_present
from cake_core.lower import lower_source
from cake_core.sim import SimKernel
from cake_core.sim.tasks_run import run_task
from cake_core.source import SourceFile
from cake_core.tasks import load_task

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "gemm_sm90_tma_epilogue.cake"

BASE = '''\
BM, BN, BK, EN, STAGES = 64, 128, 64, 64, 2
M = dim("M")
N = dim("N", multiple_of=8)
K = dim("K", multiple_of=8)

@kernel(arch="sm_90a", grid=(cdiv(M, BM), cdiv(N, BN)), warps=8)
def g(A: Tensor[bf16, (M, K)], B: Tensor[bf16, (N, K)], C: Tensor[bf16, (M, N)]):
    sa = smem(bf16, (STAGES, BM, BK), layout=swizzle(128))
    sb = smem(bf16, (STAGES, BN, BK), layout=swizzle(128))
    sc = smem(bf16, (BM, EN), layout=swizzle(128))
    ab = pipeline(stages=STAGES, producer="load", consumer="mma")
    with role("load", warps=range(0, 4)):
        for k in range(cdiv(K, BK)):
            s = ab.acquire()
            tma_load(sa[s], A.tile((BM, BK), (block.x, k)), ab)
            tma_load(sb[s], B.tile((BN, BK), (block.y, k)), ab)
            ab.commit()
    with role("mma", warps=range(4, 8)):
        acc = fragment(f32, (BM, BN), layout=wgmma_acc)
        for k in range(cdiv(K, BK)):
            s = ab.wait()
            wgmma(acc, sa[s], sb[s].T)
            wgmma_wait(0)
            ab.release()
        for j in range(BN // EN):
            tma_store_wait(0)
            barrier_sync(2, 4)
            stmatrix(sc, cast(acc, bf16), j)
            fence_proxy_async()
            barrier_sync(1, 4)
            tma_store(C.tile((BM, EN), (block.x, block.y * (BN // EN) + j)), sc)
        tma_store_wait(0)
'''
STORE = "            stmatrix(sc, cast(acc, bf16), j)\n"


def _codes(text: str) -> list[tuple[str, int]]:
    return [(d.code, d.span.start.line + 1) for d in check_text(text, "k.cake").diagnostics]


def _line(text: str, needle: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), 1) if needle in line)


def _variant(new: str, old: str = STORE) -> str:
    assert old in BASE
    return BASE.replace(old, new)


# --- type rule and effects ------------------------------------------------------------------
def test_the_base_kernel_and_the_example_check_clean() -> None:
    assert _codes(BASE) == []
    assert _codes(EXAMPLE.read_text(encoding="utf-8")) == []


def test_an_f32_fragment_is_a_dtype_error_whose_fix_casts() -> None:
    bad = _variant("            stmatrix(sc, acc, j)\n")
    diags = check_text(bad, "k.cake").diagnostics
    assert [(d.code, d.span.start.line + 1) for d in diags] == [
        ("CK106", _line(bad, "stmatrix(sc, acc"))]
    fixed = apply_edits(bad, diags[0].fixes[0].edits)
    assert "stmatrix(sc, cast(acc, bf16), j)" in fixed
    assert _codes(fixed) == []


@pytest.mark.parametrize(("new", "code"), [
    ("            stmatrix(sc, cast(acc, bf16), 2)\n", "CK111"),     # 128 columns: parts 0, 1
    ("            stmatrix(sc, cast(load(sc), bf16), j)\n", "CK104"),  # not an accumulator
])
def test_what_the_instruction_cannot_store_is_reported_at_the_call(new: str, code: str) -> None:
    bad = _variant(new)
    assert _codes(bad) == [(code, _line(bad, "stmatrix("))]


def test_a_view_that_is_not_a_column_part_is_a_shape_error() -> None:
    bad = BASE.replace("sc = smem(bf16, (BM, EN)", "sc = smem(bf16, (BM, 48)").replace(
        "C.tile((BM, EN)", "C.tile((BM, 48)")
    assert ("CK105", _line(bad, "stmatrix(")) in _codes(bad)


def test_the_writes_need_a_fence_before_the_tma_store_reads_them() -> None:
    bad = _variant("", "            fence_proxy_async()\n")
    assert [c for c, _ in _codes(bad)] == ["CK309"]


def test_a_lane_dependent_condition_around_it_is_ck314() -> None:
    bad = _variant("            if lane.id < 16:\n    " + STORE)
    assert _codes(bad) == [("CK314", _line(bad, "stmatrix("))]


@pytest.mark.parametrize(("removed", "code"), [
    ("            barrier_sync(2, 4)\n", "CK316"),   # waited by thread 0 only
    ("            tma_store_wait(0)\n            barrier_sync(2, 4)\n", "CK308"),  # never
])
def test_rewriting_the_buffer_a_store_may_still_read_is_reported(removed: str,
                                                                 code: str) -> None:
    bad = _variant("", removed)
    assert code in [c for c, _ in _codes(bad)]


# --- simulation ---------------------------------------------------------------------------
@pytest.mark.parametrize("source", ["base", "example"])
def test_the_simulator_matches_the_reference(source: str) -> None:
    task = load_task("gemm_bf16")
    if source == "base":
        sk = SimKernel.from_text(BASE, "k.cake")
    else:
        sk = SimKernel.from_file(EXAMPLE, "gemm_sm90_tma_epilogue")
    report = run_task(task, sk, n_schedules=2)
    assert report.shapes
    for s in report.shapes:
        assert s.error is None and s.passed, s.dims
    assert [d for d in report.diagnostics if d.severity.value == "error"] == []


# --- lowering -----------------------------------------------------------------------------
def _cu(text: str) -> str:
    res = lower_source(SourceFile.from_bytes(text.encode(), "k.cake"))
    assert res.ok and res.cu is not None, res.diagnostics
    return res.cu


def test_lane_addresses_go_through_the_swizzle_and_registers_follow_the_part() -> None:
    cu = _cu(BASE)
    calls = re.findall(r"cake_stmatrix_x4\(smem_u32 \+ cake_swizzle<128>\((.*?)\), "
                       r"&(\w+)\[(.*?)\]\);", cu)
    assert len(calls) == 1
    addr, _, reg = calls[0]
    # warp w holds rows 16 (w % 4).., lane l addresses row l % 8 of matrix l / 8 (+8 rows
    # for odd matrices, +8 columns for the upper two); rows are 128 bytes apart
    for term in ("warp_rank % 4 * 2048", "lane / 8 % 2 * 1024", "lane % 8 * 128",
                 "q * 32", "lane / 8 / 2 * 16"):
        assert term in addr
    assert reg == "(j) * 32 + q * 8"  # part j: 64 columns = 32 registers of 16-bit pairs
    assert "stmatrix.sync.aligned.m8n8.x4.shared.b16" in cu


def test_a_transposed_view_uses_the_trans_form_with_swapped_coordinates() -> None:
    text = BASE.replace("stmatrix(sc, cast(acc, bf16), j)", "stmatrix(st.T, cast(acc, bf16), j)")
    text = text.replace("    sc = smem(bf16, (BM, EN), layout=swizzle(128))\n",
                        "    sc = smem(bf16, (BM, EN), layout=swizzle(128))\n"
                        "    st = smem(bf16, (EN, BM), layout=swizzle(128))\n")
    cu = _cu(text)
    call = re.search(r"cake_stmatrix_x4_trans\(smem_u32 \+ cake_swizzle<128>\((.*?)\), ", cu)
    assert call is not None
    # stored (EN, BM): the lane's row is a column of the fragment, 128 bytes apart
    assert "lane % 8 * 128" in call.group(1) and "q * 2048" in call.group(1)


# --- emulation and SASS -------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.skipif(not host_compiler_present(), reason="needs a host C++ compiler")
def test_the_emulated_lowering_matches_the_reference(tmp_path: Path) -> None:
    path = tmp_path / "k.cake"
    path.write_text(BASE, encoding="utf-8")
    out = CliRunner().invoke(main, ["run", str(path), "--task", "gemm_bf16", "--emulate"])
    assert out.exit_code == 0, out.output
    assert "2/2 shapes correct" in out.output


@pytest.mark.slow
def test_the_example_sass_has_stsm_and_tma_stores(tmp_path: Path) -> None:
    if shutil.which("ptxas") is None:
        pytest.skip("needs ptxas")
    cubin = tmp_path / "k.cubin"
    out = CliRunner().invoke(main, ["compile", str(EXAMPLE), "-o", str(cubin)])
    assert out.exit_code == 0, out.output
    assert "spills 0 B stores / 0 B loads" in out.output
    sass = sass_of(cubin)
    assert "STSM" in sass
    assert "UTMASTG" in sass
    assert not re.search(r"\bSTG\b", sass)  # no per-thread global stores are left
