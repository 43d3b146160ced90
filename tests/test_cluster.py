"""Thread-block clusters and TMA multicast, end to end on one kernel: the launch shape,
`cluster_sync()`, `tma_load(..., multicast=mask)` and its rules (CK323-CK325), the
lowering (nvcc for sm_90a), the simulator's refusal, the cost model's L2 saving and the
emulator, which runs the blocks of a cluster together.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from cake_cli.main import main
from cake_core.check import check_text
from cake_core.emulate import host_compiler_present
from cake_core.lower import lower_source
from cake_core.lower.build import build_source
from cake_core.lower.toolchain import find_nvcc
from cake_core.sim import SimKernel, simulate
from cake_core.sim.inputs import random_inputs
from cake_core.source import SourceFile

ROOT = Path(__file__).resolve().parents[1]
MCGEMM_PATH = ROOT / "tests" / "data" / "cluster_mcgemm.cake"
MCGEMM = MCGEMM_PATH.read_text(encoding="utf-8")
MULTICAST = """tma_load(sb.tile((BN // 2, BK), (cluster.rank, 0)),
                 B.tile((BN // 2, BK), (block.y * 2 + cluster.rank, k)), full, multicast=0b11)"""


def codes_of(text: str) -> list[str]:
    return [d.code for d in check_text(text, "t.cake").diagnostics]


def messages(text: str) -> list[str]:
    return [d.message for d in check_text(text, "t.cake").diagnostics]


def test_the_multicast_gemm_checks_clean() -> None:
    assert MULTICAST in MCGEMM
    assert codes_of(MCGEMM) == []


# --- launch shape --------------------------------------------------------------------------
def test_a_grid_that_is_not_a_whole_number_of_clusters_is_ck206() -> None:
    bad = MCGEMM.replace("grid=(cdiv(M, 2 * BM) * 2,", "grid=(cdiv(M, BM),")
    assert codes_of(bad) == ["CK206"]
    assert "not provably a multiple of the cluster's 2" in messages(bad)[0]
    # a dim declared a multiple of two tiles makes cdiv(M, BM) even
    ok = bad.replace('M = dim("M")', 'M = dim("M", multiple_of=128)')
    assert codes_of(ok) == []


def test_cluster_sync_needs_sm90() -> None:
    text = MCGEMM.replace('arch="sm_90a"', 'arch="sm_80"')
    assert "`cluster_sync` needs clusters, which sm_80 does not have" in messages(text)


# --- the mask ------------------------------------------------------------------------------
def test_a_mask_past_the_cluster_is_a_bad_argument() -> None:
    bad = MCGEMM.replace("multicast=0b11", "multicast=0b101")
    assert codes_of(bad) == ["CK103"]
    assert "names cluster ranks past 1" in messages(bad)[0]


def test_a_multicast_without_a_cluster_is_a_bad_argument() -> None:
    bad = MCGEMM.replace(", cluster=(2, 1)", "").replace("cluster_sync()", "syncthreads()")
    bad = bad.replace("grid=(cdiv(M, 2 * BM) * 2,", "grid=(cdiv(M, BM),")
    assert "CK103" in codes_of(bad)


def test_a_non_constant_mask_is_refused() -> None:
    bad = MCGEMM.replace("multicast=0b11", "multicast=cluster.rank + 1")
    assert codes_of(bad) == ["CK107"]  # a const parameter


# --- expect_tx per receiving block -----------------------------------------------------------
def test_expect_tx_counts_the_slices_every_peer_sends() -> None:
    """Each block receives its own A tile and one B slice from each of the two blocks: the
    full B tile.  Arming only the slice this block issues leaves the phase short."""
    bad = MCGEMM.replace("full.expect_tx((BM * BK + BN * BK) * 2)",
                         "full.expect_tx((BM * BK + BN // 2 * BK) * 2)")
    assert codes_of(bad) == ["CK302"]
    assert "deliver 16384" in messages(bad)[0]


# --- CK323, CK324, CK325 -----------------------------------------------------------------------
def test_syncthreads_does_not_publish_barriers_to_peers() -> None:
    bad = MCGEMM.replace("fence_barrier_init()\n    cluster_sync()",
                         "fence_barrier_init()\n    syncthreads()")
    assert codes_of(bad) == ["CK323"]


def test_a_kernel_that_multicasts_must_end_the_loop_or_kernel_with_cluster_sync() -> None:
    no_tail = MCGEMM.rstrip().removesuffix("cluster_sync()").rstrip() + "\n"
    assert codes_of(no_tail) == []  # the loop ends every iteration with cluster_sync
    # move the loop's barrier before the wait: the last copies are no longer covered
    early = no_tail.replace("        wgmma_wait(0)\n        cluster_sync()\n",
                            "        wgmma_wait(0)\n").replace(
        "    acc = fragment", "    acc = fragment").replace(
        "        full.expect_tx", "        cluster_sync()\n        full.expect_tx")
    assert codes_of(early) == ["CK324"]


def test_a_multicast_loop_without_a_cluster_handshake_is_ck325() -> None:
    bad = MCGEMM.replace("        wgmma_wait(0)\n        cluster_sync()\n",
                         "        wgmma_wait(0)\n        syncthreads()\n")
    assert codes_of(bad) == ["CK325"]


# --- lowering ---------------------------------------------------------------------------------
def test_lowering_declares_the_cluster_and_emits_the_multicast() -> None:
    res = lower_source(SourceFile(MCGEMM, "mcgemm.cake"))
    assert res.ok and res.cu is not None
    cu = res.cu
    assert "__cluster_dims__(2, 1, 1)" in cu
    assert "barrier.cluster.arrive.release.aligned;" in cu
    assert ".multicast::cluster" in cu
    body = cu.split("__global__", 1)[1]
    assert body.count("cake_cluster_sync();") == 3
    assert "cake_tma_load_mc_2d(" in body and ", 3, " in body  # mask 0b11
    # the plain A copy is no multicast
    assert body.count("cake_tma_load_2d(") == 1


@pytest.mark.nvcc
@pytest.mark.skipif(find_nvcc() is None, reason="nvcc is not installed")
def test_the_multicast_gemm_compiles_for_sm90a_without_spills(tmp_path: Path) -> None:
    rep = build_source(SourceFile(MCGEMM, "mcgemm.cake"), cache=tmp_path)
    assert rep.ok, [d.message for d in rep.diagnostics]
    r = rep.kernels[0].resources
    assert r is not None and (r.spill_stores, r.spill_loads) == (0, 0)


# --- simulation: refused, never wrong ------------------------------------------------------------
def test_the_simulator_refuses_multicast_with_a_reason() -> None:
    sk = SimKernel.from_text(MCGEMM, "mcgemm.cake")
    dims = {"M": 128, "N": 64, "K": 64}
    res = simulate(sk, dims, random_inputs(sk, dims, skip=("C",)))
    found = [(d.code, d.message) for d in res.diagnostics]
    assert len(found) == 1 and found[0][0] == "CK510"
    assert found[0][1].startswith("not simulated: TMA multicast")
    assert "--emulate" in found[0][1]


def test_a_cluster_without_multicast_still_simulates(tmp_path: Path) -> None:
    """cluster_sync() alone is a block barrier to the simulator, which runs blocks apart."""
    text = MCGEMM.replace(MULTICAST, "tma_load(sb, B.tile((BN, BK), (block.y, k)), full)")
    p = tmp_path / "t.cake"
    p.write_text(text, encoding="utf-8")
    r = CliRunner().invoke(main, ["run", str(p), "--task", "gemm_bf16", "--sim",
                                  "--dims", "M=128,N=64,K=128"])
    assert r.exit_code == 0, r.output
    assert "1/1 shapes match the reference" in r.output


# --- cost ---------------------------------------------------------------------------------------
def _cost(tmp_path: Path, text: str) -> dict[str, float]:
    p = tmp_path / "k.cake"
    p.write_text(text, encoding="utf-8")
    r = CliRunner().invoke(main, ["cost", str(p), "-d", "M=4096,N=4096,K=4096",
                                  "--format", "json"])
    assert r.exit_code == 0, r.output
    pred = json.loads(r.output)["predictions"][0]
    return {"time": pred["time_s"], **pred["work"]}


def test_multicast_halves_the_l2_traffic_of_the_shared_operand(tmp_path: Path) -> None:
    alone = _cost(tmp_path, MCGEMM.replace(
        MULTICAST, "tma_load(sb, B.tile((BN, BK), (block.y, k)), full)"))
    shared = _cost(tmp_path, MCGEMM)
    # A and B are read equally (BM == BN); multicast halves B's L2 -> SM bytes, and the
    # C writes (M * N bf16) cross the fabric either way
    reads = alone["l2_sm_bytes"] - 4096 * 4096 * 2
    assert alone["l2_sm_bytes"] - shared["l2_sm_bytes"] == pytest.approx(reads / 4)
    assert shared["smem_bytes"] == pytest.approx(alone["smem_bytes"])  # same bytes land
    assert shared["time"] < alone["time"]


# --- emulation: the blocks of a cluster run together ---------------------------------------------
@pytest.mark.skipif(not host_compiler_present(), reason="needs a host C++ compiler")
def test_the_emulated_multicast_gemm_is_right() -> None:
    r = CliRunner().invoke(main, ["run", str(MCGEMM_PATH), "--task", "gemm_bf16",
                                  "--emulate", "--dims", "M=256,N=128,K=128"])
    assert r.exit_code == 0, r.output
    assert "1/1 shapes correct" in r.output


# --- examples/gemm_sm90_cluster.cake: warp-specialised, released to the peer too -----------------
EXAMPLE_PATH = ROOT / "examples" / "gemm_sm90_cluster.cake"
EXAMPLE = EXAMPLE_PATH.read_text(encoding="utf-8")
PEER_ARRIVES = ("            empty[p].arrive(per=\"warp\", cta=1 - cluster.rank)  "
                "# and the peer's may too\n")


def test_the_cluster_gemm_checks_clean_and_counts_the_peer_arrivals() -> None:
    assert codes_of(EXAMPLE) == []
    # without the consumers' arrivals on the peer, the empty barrier's 16 are never met
    # and the producers' refills race the peer's reads
    assert PEER_ARRIVES in EXAMPLE
    lone = EXAMPLE.replace(PEER_ARRIVES, "").replace(
        '        empty[last].arrive(per="warp", cta=1 - cluster.rank)\n', "")
    assert "CK325" in codes_of(lone.replace("count=16", "count=8"))


def test_the_cluster_gemm_lowers_the_peer_arrival() -> None:
    res = lower_source(SourceFile(EXAMPLE, "examples/gemm_sm90_cluster.cake"))
    assert res.ok and res.cu is not None
    assert "mapa.shared::cluster.u32" in res.cu
    assert "mbarrier.arrive.release.cluster.shared::cluster.b64" in res.cu
    body = res.cu.split("__global__", 1)[1]
    assert "cake_mbar_arrive_cluster(" in body and "1 - cake_cluster_rank()" in body


def test_the_simulator_refuses_peer_arrivals_with_a_reason() -> None:
    copy = """tma_load(sb[s].tile((BN // 2, BK), (cluster.rank, 0)),
                     B.tile((BN // 2, BK), (block.y * 2 + cluster.rank, k)), full[s],
                     multicast=0b11)"""
    assert copy in EXAMPLE
    text = EXAMPLE.replace(copy, "tma_load(sb[s], B.tile((BN, BK), (block.y, k)), full[s])")
    assert codes_of(text) == []
    sk = SimKernel.from_text(text, "x.cake")
    assert sk.unsupported is not None
    assert "an arrival on a peer block's mbarrier" in sk.unsupported[1]


@pytest.mark.nvcc
@pytest.mark.skipif(find_nvcc() is None, reason="nvcc is not installed")
def test_the_cluster_gemm_compiles_like_gemm_sm90(tmp_path: Path) -> None:
    rep = build_source(SourceFile(EXAMPLE, "examples/gemm_sm90_cluster.cake"), cache=tmp_path)
    assert rep.ok, [d.message for d in rep.diagnostics]
    r = rep.kernels[0].resources
    assert r is not None and (r.spill_stores, r.spill_loads, r.stack) == (0, 0, 0)


@pytest.mark.slow
@pytest.mark.skipif(not host_compiler_present(), reason="needs a host C++ compiler")
def test_the_emulated_cluster_gemm_is_right_on_the_task_shapes() -> None:
    r = CliRunner().invoke(main, ["run", str(EXAMPLE_PATH), "--task", "gemm_bf16",
                                  "--emulate"])
    assert r.exit_code == 0, r.output
    assert "2/2 shapes correct" in r.output
