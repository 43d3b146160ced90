"""examples/gemm_sm90_expert.cake: persistent tiles, 2x1 cluster multicast, TMA-store epilogue.

The three Hopper schedules in one kernel must still check clean, be priced as a persistent
kernel (its tile loop strides by the number of *clusters*), lower and compile without
spills, put the instructions they stand for into the SASS, and compute the task's C when
the lowered code runs under emulation with several cluster tiles per cluster.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from click.testing import CliRunner
from sass_tools import sass_of

from cake_cli.main import main
from cake_core.check import check_text
from cake_core.cost.model import predict, profile
from cake_core.emulate import host_compiler_present
from cake_core.hardware import get_gpu
from cake_core.lower import lower_source
from cake_core.lower.toolchain import find_nvcc
from cake_core.source import SourceFile

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "gemm_sm90_expert.cake"
TEXT = EXAMPLE.read_text(encoding="utf-8")
DIMS = {"M": 4096, "N": 4096, "K": 4096}


def _kernel(text: str = TEXT, name: str = "gemm_sm90_expert.cake"):  # type: ignore[no-untyped-def]
    res = check_text(text, name)
    assert [d.code for d in res.diagnostics] == []
    return res.program.kernels[0]


def test_the_expert_gemm_checks_clean() -> None:
    k = _kernel()
    assert k.cluster[:2] == (2, 1)
    assert "132" not in TEXT  # the SM count comes from the device


def test_the_cluster_strided_tile_loop_is_priced_as_persistent() -> None:
    h200 = get_gpu("H200-SXM")
    assert h200 is not None
    p = profile(_kernel(), DIMS, h200)
    assert p.tile_loops is not None  # stride sm_count() // 2: one per cluster
    assert p.grid == (h200.sms,)
    assert p.tile_loops.tiles == (4096 // 128) * (4096 // 256)  # every block, every tile


def test_multicast_and_persistence_beat_each_alone_in_the_model() -> None:
    h200 = get_gpu("H200-SXM")
    pers = predict(_kernel((ROOT / "examples" / "gemm_sm90_persistent.cake").read_text(
        encoding="utf-8"), "p.cake"), DIMS, h200)
    expert = predict(_kernel(), DIMS, h200)
    assert expert.bottleneck.startswith("compute")  # not the DRAM-bound misreading
    assert expert.seconds < pers.seconds
    # the B half each block multicasts crosses the L2 -> SM fabric once per cluster
    assert expert.work["l2_sm_bytes"] < pers.work["l2_sm_bytes"]


def test_the_lowering_multicasts_and_stores_through_tma() -> None:
    res = lower_source(SourceFile(TEXT, "examples/gemm_sm90_expert.cake"))
    assert res.ok and res.cu is not None, [d.message for d in res.diagnostics]
    body = res.cu.split("__global__", 1)[1]  # the prelude defines every helper
    for call in ("cake_tma_load_mc_2d(", "cake_mbar_arrive_cluster(", "cake_stmatrix_x4(",
                 "cake_tma_store_2d(", "cake_cluster_sync(", "cake_sm_count("):
        assert call in body, call
    assert "132" not in body


@pytest.mark.nvcc
@pytest.mark.skipif(find_nvcc() is None, reason="nvcc is not installed")
def test_the_expert_gemm_compiles_without_spills(tmp_path: Path) -> None:
    r = CliRunner().invoke(main, ["compile", str(EXAMPLE), "-o", str(tmp_path / "k.cubin")])
    assert r.exit_code == 0, r.output
    assert "spills 0 B stores / 0 B loads, stack 0 B" in r.output


@pytest.mark.slow
def test_the_sass_has_multicast_loads_stmatrix_and_tma_stores(tmp_path: Path) -> None:
    if find_nvcc() is None:
        pytest.skip("needs nvcc")
    cubin = tmp_path / "k.cubin"
    r = CliRunner().invoke(main, ["compile", str(EXAMPLE), "-o", str(cubin)])
    assert r.exit_code == 0, r.output
    sass = sass_of(cubin)
    assert re.search(r"UTMALDG\.2D\.MULTICAST", sass)
    assert "STSM" in sass
    assert "UTMASTG" in sass
    assert re.search(r"HGMMA\.64x256x16\.F32\.BF16", sass)
    assert not re.search(r"\bSTG\b", sass)  # no per-thread global stores


@pytest.mark.slow
@pytest.mark.skipif(not host_compiler_present(), reason="needs a host C++ compiler")
def test_the_emulated_expert_gemm_is_right_with_several_tiles_per_cluster(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # 4 blocks = 2 clusters over 7 x 3 tiles (ragged M, N and K): each cluster walks 6 or
    # 5 cluster tiles, its barrier phases carried from one tile to the next
    monkeypatch.setenv("CAKE_CACHE_DIR", str(tmp_path / "cache"))
    r = CliRunner().invoke(main, ["run", str(EXAMPLE), "--task", "gemm_bf16", "--emulate",
                                  "--dims", "M=776,N=520,K=328,sm_count=4"])
    assert r.exit_code == 0, r.output
    assert "1/1 shapes correct" in r.output
