"""Persistent kernels: `sm_count()`, the tile scheduler `tile_coords` and CK326.

The scheduler must be a bijection onto the tile grid (ragged bands included) in every form
it takes: folded by the builder, evaluated by the simulator and the cost model, and as the
C++ the lowering writes.  `sm_count()` must come from the device in the CUDA launcher, be a
small fixed count in the simulator and the target GPU's in the cost model.
"""

from __future__ import annotations

import dataclasses
import itertools
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from cake_cli.main import main
from cake_core.check import check_text
from cake_core.cost.model import profile
from cake_core.diagnostics.model import apply_edits
from cake_core.hardware import get_gpu
from cake_core.ir import symbolic as S
from cake_core.ir.tile_order import tile_coords
from cake_core.lower import lower_source
from cake_core.lower.context import LowerContext
from cake_core.sim import SimKernel, simulate
from cake_core.sim.program import SimSetupError
from cake_core.sim.runstate import SIM_SM_COUNT
from cake_core.source import SourceFile
from cake_core.tasks import as_dtype

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "gemm_sm90_persistent.cake"
RULE_PAGE = ROOT / "docs" / "rules" / "CK326.md"
SHAPES = [(m, n) for m in range(1, 18) for n in range(1, 18)]
GROUPS = (1, 2, 3, 5, 8, 16)


def _codes(text: str) -> list[str]:
    return [d.code for d in check_text(text, "k.cake").diagnostics]


# --- the scheduler's arithmetic ---------------------------------------------------------------
@pytest.mark.parametrize("raster", ["m", "n"])
@pytest.mark.parametrize("group", GROUPS)
def test_tile_coords_is_a_bijection_on_every_small_grid(group: int, raster: str) -> None:
    for tm, tn in SHAPES:
        seen = set()
        for t in range(tm * tn):
            a, b = tile_coords(t, tm, tn, group, raster)
            assert a.const is not None and b.const is not None
            assert 0 <= a.const < tm and 0 <= b.const < tn, (tm, tn, group, raster, t)
            seen.add((a.const, b.const))
        assert len(seen) == tm * tn, (tm, tn, group, raster)


def test_the_symbolic_form_evaluates_to_the_folded_one() -> None:
    # what the simulator and the cost model evaluate: the map over a runtime index and dims
    t, tm_d, tn_d = S.Var("t"), S.Dim("TM"), S.Dim("TN")
    for group, raster in itertools.product((1, 3, 8), "mn"):
        ex = tile_coords(t, tm_d, tn_d, group, raster)
        for tm, tn in [(5, 7), (8, 3), (17, 2), (1, 9)]:
            env = {"t": 0, "TM": tm, "TN": tn}
            for i in range(tm * tn):
                env["t"] = i
                got = tuple(_eval(e, env) for e in ex)
                want = tuple(e.const for e in tile_coords(i, tm, tn, group, raster))
                assert got == want


def _eval(e: S.SymExpr, env: dict[str, int]) -> int:
    if isinstance(e, S.Const):
        return e.value
    if isinstance(e, S.Dim | S.Var):
        return env[e.name]
    assert isinstance(e, S.BinExpr)
    return S.apply_op(e.op, _eval(e.left, env), _eval(e.right, env))


def test_group_and_raster_give_the_documented_orders() -> None:
    order = [tuple(x.const for x in tile_coords(t, 3, 2, 8, "m")) for t in range(6)]
    assert order == [(0, 0), (1, 0), (2, 0), (0, 1), (1, 1), (2, 1)]  # group >= tiles: M fastest
    order = [tuple(x.const for x in tile_coords(t, 3, 2, 1, "m")) for t in range(6)]
    assert order == [(0, 0), (0, 1), (1, 0), (1, 1), (2, 0), (2, 1)]  # group 1: N fastest
    # bands of 2 M-tiles, the last one (M-tile 2) alone: the ragged edge
    order = [tuple(x.const for x in tile_coords(t, 3, 2, 2, "m")) for t in range(6)]
    assert order == [(0, 0), (1, 0), (0, 1), (1, 1), (2, 0), (2, 1)]
    order = [tuple(x.const for x in tile_coords(t, 2, 3, 2, "n")) for t in range(6)]
    assert order == [(0, 0), (0, 1), (1, 0), (1, 1), (0, 2), (1, 2)]


@pytest.mark.skipif(shutil.which("g++") is None, reason="needs a host C++ compiler")
def test_the_lowered_cuda_arithmetic_is_a_bijection(tmp_path: Path) -> None:
    # the C++ the lowering writes for the map, compiled and run exhaustively
    lowered = lower_source(SourceFile(EXAMPLE.read_text(encoding="utf-8"),
                                      "gemm_sm90_persistent.cake"))
    assert lowered.kernels and not [d for d in lowered.diagnostics if d.severity.value == "error"]
    printer = LowerContext.__new__(LowerContext)
    printer.dims = {"TM": "tm", "TN": "tn"}  # only what `sym` reads for dims and `@` vars
    cases = []
    for group, raster in itertools.product(GROUPS, "mn"):
        a, b = tile_coords(S.Var("@t"), S.Dim("TM"), S.Dim("TN"), group, raster)
        cases.append(f"  {{ auto f = [](int t, int tm, int tn, int* a, int* b) {{ "
                     f"*a = {printer.sym(a)}; *b = {printer.sym(b)}; }}; "
                     f"if (!check(f)) {{ std::printf(\"group {group} raster {raster}\\n\"); "
                     "return 1; } }\n")
    src = ("#include <cstdio>\n#include <vector>\n"
           "inline int min(int a, int b) { return a < b ? a : b; }\n"
           "inline int max(int a, int b) { return a < b ? b : a; }\n"
           "template <class F> bool check(F f) {\n"
           "  for (int tm = 1; tm < 40; ++tm) for (int tn = 1; tn < 40; ++tn) {\n"
           "    std::vector<int> hit(tm * tn, 0);\n"
           "    for (int t = 0; t < tm * tn; ++t) { int a, b; f(t, tm, tn, &a, &b);\n"
           "      if (a < 0 || a >= tm || b < 0 || b >= tn || hit[a * tn + b]++) return false; }\n"
           "  }\n  return true;\n}\nint main() {\n" + "".join(cases) + "  return 0;\n}\n")
    (tmp_path / "t.cpp").write_text(src)
    subprocess.run(["g++", "-O1", "-std=c++17", "-o", str(tmp_path / "t"),
                    str(tmp_path / "t.cpp")], check=True, capture_output=True, timeout=120)
    run = subprocess.run([str(tmp_path / "t")], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stdout


# --- the language ------------------------------------------------------------------------------
def test_the_example_checks_clean_and_names_no_sm_count() -> None:
    text = EXAMPLE.read_text(encoding="utf-8")
    assert _codes(text) == []
    assert "132" not in text
    kernel = check_text(text, "k.cake").program.kernels[0]
    assert str(kernel.grid[0]) == "min(sm_count(), cdiv(M, 128) * cdiv(N, 256))"


@pytest.mark.parametrize(("snippet", "code"), [
    ('S = dim("sm_count")', "CK103"),
    ("S = sm_count(4)", "CK103"),
    ("S = tile_coords(1, 2)", "CK103"),
    ('S = tile_coords(1, 2, 3, group=0)', "CK107"),
    ('S = tile_coords(1, 2, 3, raster="k")', "CK103"),
    ('S = tile_coords(1, 2, 3, colour=2)', "CK103"),
])
def test_bad_forms_are_findings(snippet: str, code: str) -> None:
    assert code in _codes(snippet + "\n")


def test_tile_coords_folds_at_compile_time() -> None:
    res = check_text('A, B = tile_coords(13, 5, 4, group=2)\n', "k.cake")
    assert res.program.constants["A"].sym.const == tile_coords(13, 5, 4, 2)[0].const
    assert res.program.constants["B"].sym.const == tile_coords(13, 5, 4, 2)[1].const


# --- the simulator ------------------------------------------------------------------------------
def _gemm_inputs(m: int, n: int, k: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(3)
    return {"A": as_dtype(rng.standard_normal((m, k)), "bf16"),
            "B": as_dtype(rng.standard_normal((n, k)), "bf16")}


@pytest.mark.parametrize("sms", [None, 1, 3, 16])
def test_the_simulator_runs_a_small_configurable_sm_count(sms: int | None) -> None:
    sk = SimKernel.from_text(EXAMPLE.read_text(encoding="utf-8"), "k.cake")
    dims = {"M": 520, "N": 264, "K": 72}  # 5 x 2 tiles, the last band of 8 cut to 1
    data = _gemm_inputs(520, 264, 72)
    res = simulate(sk, dims if sms is None else {**dims, "sm_count": sms}, data)
    assert res.ok, [d.message for d in res.diagnostics]
    assert res.blocks == min(SIM_SM_COUNT if sms is None else sms, 10)
    want = data["A"].astype(np.float64) @ data["B"].T.astype(np.float64)
    np.testing.assert_allclose(res.outputs["C"], want, rtol=1e-2, atol=1e-2)


def test_a_step_of_zero_at_launch_is_reported_not_looped() -> None:
    text = EXAMPLE.read_text(encoding="utf-8")
    data = _gemm_inputs(128, 256, 64)
    with pytest.raises(SimSetupError, match="sm_count=0 must be positive"):
        simulate(SimKernel.from_text(text, "k.cake"),
                 {"M": 128, "N": 256, "K": 64, "sm_count": 0}, data)
    empty = text.replace("TILES, sm_count()):", "TILES, sm_count() - 1):")
    res = simulate(SimKernel.from_text(empty, "k.cake"),
                   {"M": 128, "N": 256, "K": 64, "sm_count": 1}, data)
    assert [d.code for d in res.diagnostics] == ["CK510"]
    assert "the loop step `sm_count() - 1` is 0 at this launch" in res.diagnostics[0].message


# --- lowering -------------------------------------------------------------------------------------
def test_the_launcher_asks_the_device_for_the_sm_count() -> None:
    out = lower_source(SourceFile(EXAMPLE.read_text(encoding="utf-8"), "p.cake"))
    meta = out.kernels[0].meta
    assert meta["launcher_params"] == ["A", "B", "C", "M", "N", "K", "stream"]
    assert "sm_count" not in meta["dims"]
    cu = out.cu
    assert "cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, device)" in cu
    launcher = cu[cu.index("cake_launch_gemm_sm90_persistent("):]
    assert "cake_sm_count(&sm_count)" in launcher
    assert launcher.index("cake_sm_count(&sm_count)") < launcher.index("const dim3 grid(")
    assert "132" not in launcher
    assert "tile_id += sm_count" in cu  # the loop strides by the kernel's own argument


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("g++") is None, reason="needs a host C++ compiler")
def test_the_lowered_kernel_emulates_with_several_tiles_per_block(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CAKE_CACHE_DIR", str(tmp_path / "cache"))
    r = CliRunner().invoke(main, ["run", str(EXAMPLE), "--task", "gemm_bf16", "--emulate",
                                  "--dims", "M=520,N=264,K=72"])
    assert r.exit_code == 0, r.output
    assert "1/1 shapes correct" in r.output


# --- the cost model -----------------------------------------------------------------------------
def test_the_cost_model_launches_the_target_gpus_sm_count() -> None:
    kernel = check_text(EXAMPLE.read_text(encoding="utf-8"), "k.cake").program.kernels[0]
    dims = {"M": 8192, "N": 8192, "K": 1024}
    h100 = get_gpu("H100-SXM5")
    assert h100 is not None
    assert profile(kernel, dims, h100).grid == (h100.sms,)
    # read from the GPU's table, not from a constant: a part with fewer SMs launches fewer
    assert profile(kernel, dims, dataclasses.replace(h100, sms=114)).grid == (114,)
    assert profile(kernel, {"M": 256, "N": 256, "K": 64}).grid == (2,)  # fewer tiles than SMs


def test_the_group_size_changes_the_l2_reuse_the_model_counts() -> None:
    text = EXAMPLE.read_text(encoding="utf-8")
    dims = {"M": 8192, "N": 8192, "K": 1024}
    reads = {}
    for group in (1, 8, 64):
        k = check_text(text.replace("GROUP = 8", f"GROUP = {group}"), "k.cake").program.kernels[0]
        p = profile(k, dims)
        assert p.tile_loops is not None
        reads[group] = sum(p.waves[0].read_model)
    # 132 tiles at once on 64 x 32 tiles: N fastest reads 5 A and 32 B panels, bands of 8
    # read 8 and 17, M fastest 64 and 3 (a B panel is twice an A panel: BN = 2 BM)
    panel = 128 * 1024 * 2
    assert reads[1] == pytest.approx((5 + 32 * 2) * panel, rel=0.01)
    assert reads[8] == pytest.approx((8 + 17 * 2) * panel, rel=0.01)
    assert reads[64] == pytest.approx((64 + 3 * 2) * panel, rel=0.01)


# --- CK326 ----------------------------------------------------------------------------------------
def _page_kernels() -> tuple[str, str]:
    text = RULE_PAGE.read_text(encoding="utf-8")
    blocks = text.split("```python\n")
    return blocks[1].split("```")[0], blocks[2].split("```")[0]


def test_ck326_flags_a_hard_coded_stride_and_its_fix_checks_clean() -> None:
    bad, good = _page_kernels()
    res = check_text(bad, "k.cake")
    [d] = [d for d in res.diagnostics if d.code == "CK326"]
    assert "never visited" in d.message
    assert d.fixes and d.fixes[0].applicability.value == "unsafe"
    fixed = apply_edits(bad, d.fixes[0].edits)
    assert _codes(fixed) == []
    assert _codes(good) == []


def test_ck326_flags_a_grid_larger_than_the_stride() -> None:
    bad, _ = _page_kernels()
    text = bad.replace("grid=(min(sm_count(), TILES_M * TILES_N),)", "grid=(264,)")
    [d] = [d for d in check_text(text, "k.cake").diagnostics if d.code == "CK326"]
    assert "tile 132 is visited twice (by blocks 0 and 132)" in d.message


@pytest.mark.parametrize(("grid", "step", "clean"), [
    ("(sm_count(),)", "sm_count()", True),
    ("(min(sm_count(), TILES_M * TILES_N),)", "sm_count()", True),
    ("(132,)", "132", True),
    ("(TILES_M * TILES_N,)", "TILES_M * TILES_N", True),
    ("(TILES_M * TILES_N,)", "1000000", True),  # one block per tile, each loop runs once
    ("(TILES_M * TILES_N,)", "8", False),
    ("(min(sm_count(), TILES_M * TILES_N),)", "2 * sm_count()", False),
    ("(max(sm_count(), TILES_M * TILES_N),)", "sm_count()", False),
])
def test_ck326_accepts_exactly_the_strides_that_cover_each_tile_once(
        grid: str, step: str, clean: bool) -> None:
    _, good = _page_kernels()
    text = good.replace("grid=(min(sm_count(), TILES_M * TILES_N),)", f"grid={grid}") \
        .replace("TILES_M * TILES_N, sm_count()):", f"TILES_M * TILES_N, {step}):")
    assert ("CK326" not in _codes(text)) == clean, text


def test_exhaustive_coverage_matches_the_rule_condition() -> None:
    # the rule's closed form against counting visits block by block
    from cake_core.verify.tile_loops import _problem

    for g, s, n in itertools.product(range(1, 9), range(1, 9), range(0, 12)):
        visits = [0] * n
        for b in range(g):
            for t in range(b, n, s):
                visits[t] += 1
        assert (_problem(g, s, n) is None) == all(v == 1 for v in visits), (g, s, n)
