"""The shipped examples are the language's showcase: each must check with no finding at all,
and each must still be the kernel its comments describe (roles, register split, ring depth,
shared-memory footprint), so an edit that quietly changes the design fails here.

Expected byte counts are written out by hand from the tile sizes, not computed by the
compiler, so the test also pins the builder's allocation arithmetic.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from cake_core.check import CheckResult, check_text
from cake_core.diagnostics.text import render_text
from cake_core.ir.kernel import ForOp, Kernel, Op, Role, SmemAlloc, walk_nodes
from cake_core.ir.types import DType, FragLayout, FragmentType, SmemLayout, TileType

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
EXAMPLE_FILES = sorted(EXAMPLES.glob("*.cake"))
REGS_PER_SM = 65536


def _check(name: str) -> CheckResult:
    path = EXAMPLES / name
    return check_text(path.read_text(encoding="utf-8"), str(path))


def _kernel(name: str) -> Kernel:
    result = _check(name)
    assert result.program is not None
    assert len(result.program.kernels) == 1
    return result.program.kernels[0]


def _smem(k: Kernel) -> dict[str, SmemAlloc]:
    return {a.name: a for a in k.smem}


def _ops(nodes: list, name: str) -> list[Op]:
    return [n for n in walk_nodes(nodes) if isinstance(n, Op) and n.name == name]


def test_the_four_examples_exist() -> None:
    names = {p.name for p in EXAMPLE_FILES}
    assert {"gemm_sm80.cake", "gemm_sm90.cake", "kmeans_assign_sm90.cake",
            "tinygemm_sm90.cake"} <= names


@pytest.mark.parametrize("path", EXAMPLE_FILES, ids=lambda p: p.name)
def test_example_checks_clean(path: Path) -> None:
    result = check_text(path.read_text(encoding="utf-8"), str(path))
    rendered = render_text(result.diagnostics, {str(path): result.source})
    assert result.diagnostics == [], rendered
    assert result.program is not None and result.program.kernels


@pytest.mark.parametrize("path", EXAMPLE_FILES, ids=lambda p: p.name)
def test_example_role_registers_fit_the_register_file(path: Path) -> None:
    k = check_text(path.read_text(encoding="utf-8"), str(path)).program.kernels[0]  # type: ignore[union-attr]
    if not any(r.regs for r in k.roles.values()):
        pytest.skip("no setmaxnreg split in this example")
    total = sum(r.warps * 32 * (r.regs or 0) for r in k.roles.values())
    assert total <= REGS_PER_SM
    for r in k.roles.values():
        assert r.regs is not None and r.regs % 8 == 0 and 24 <= r.regs <= 256
        assert r.warp_start % 4 == 0 and r.warps % 4 == 0  # setmaxnreg is per warpgroup


def test_gemm_sm80_design() -> None:
    k = _kernel("gemm_sm80.cake")
    assert (k.arch, k.warps, k.roles) == ("sm_80", 4, {})
    smem = _smem(k)
    assert set(smem) == {"sa", "sb"}
    for name in ("sa", "sb"):
        assert smem[name].shape == (3, 128, 32)
        assert smem[name].dtype == DType.F16
        assert smem[name].layout == SmemLayout("row", 64)
        assert smem[name].nbytes == 3 * 128 * 32 * 2
    assert sum(a.nbytes for a in k.smem) == 49152  # 48 KB: fits without the opt-in
    # the inner loop: ldmatrix for A, ldmatrix of a .T view for B, then mma_sync
    lds = _ops(k.body, "ldmatrix")
    assert [op.results[0].type.layout for op in lds] == [FragLayout.MMA_A, FragLayout.MMA_B]
    assert [op.results[0].type.shape for op in lds][1][0].const == 16
    mma = _ops(k.body, "mma_sync")
    assert len(mma) == 1
    acc = mma[0].args["acc"].type
    assert isinstance(acc, FragmentType) and acc.dtype == DType.F32
    assert tuple(d.const for d in acc.shape) == (64, 64)
    # prologue fills STAGES - 1 = 2 stages; the main loop waits with STAGES - 2 = 1 pending
    waits = [op.args["n"].sym.const for op in _ops(k.body, "cp_async_wait")]  # type: ignore[union-attr]
    assert waits == [1, 0]
    assert len(_ops(k.body, "cp_async_commit")) == 2


def test_gemm_sm90_design() -> None:
    k = _kernel("gemm_sm90.cake")
    assert (k.arch, k.warps) == ("sm_90a", 12)
    roles = {n: (r.warp_start, r.warp_stop, r.regs) for n, r in k.roles.items()}
    assert roles == {"load": (0, 4, 40), "mma": (4, 12, 232)}
    smem = _smem(k)
    assert smem["sa"].shape == (4, 128, 64) and smem["sb"].shape == (4, 256, 64)
    assert smem["sa"].nbytes == 4 * 128 * 64 * 2 == 65536
    assert smem["sb"].nbytes == 4 * 256 * 64 * 2 == 131072
    assert smem["sa"].align == smem["sb"].align == 1024  # swizzle(128) atom
    # a 4-stage pipeline: one full and one empty mbarrier per stage, 8 bytes each
    assert smem["ab"].kind == "barrier" and smem["ab"].nbytes == 2 * 4 * 8
    assert sum(a.nbytes for a in k.smem) == 196608 + 64
    # producer issues both TMA loads, consumers run the wgmmas; nothing crosses over
    load, mma = k.roles["load"], k.roles["mma"]
    assert len(_ops(load.body, "tma_load")) == 2 and not _ops(load.body, "wgmma")
    assert len(_ops(mma.body, "wgmma")) == 2 and not _ops(mma.body, "tma_load")
    # every stage the consumer waits for is released: 2 waits, 2 releases (one lagging)
    assert len(_ops(mma.body, "wait")) == len(_ops(mma.body, "release")) == 2
    assert [op.args["n"].sym.const for op in _ops(mma.body, "wgmma_wait")] == [1, 0]  # type: ignore[union-attr]


def test_gemm_sm90_tma_epilogue_design() -> None:
    k = _kernel("gemm_sm90_tma_epilogue.cake")
    assert {n: (r.warp_start, r.warp_stop, r.regs) for n, r in k.roles.items()} == {
        "load": (0, 4, 40), "mma": (4, 12, 232)}
    smem = _smem(k)
    # gemm_sm90's ring plus two 128x64 bf16 sub-tiles, swizzled like the ring
    assert smem["sc"].shape == (2, 128, 64) and smem["sc"].layout == SmemLayout("row", 128)
    assert smem["sc"].nbytes == 2 * 128 * 64 * 2 == 32768
    assert sum(a.nbytes for a in k.smem) == 196608 + 32768 + 64 <= 227 * 1024
    mma = k.roles["mma"]
    # the epilogue: no per-thread global store; per sub-tile one stmatrix, one fence, one
    # TMA store, two named barriers; the last store waited for before the block exits
    assert not _ops(mma.body, "store")
    for name, count in (("stmatrix", 1), ("fence_proxy_async", 1), ("tma_store", 1),
                        ("barrier_sync", 2)):
        assert len(_ops(mma.body, name)) == count, name
    loops = [n for n in walk_nodes(mma.body) if isinstance(n, ForOp)]
    assert _ops(loops[-1].body, "stmatrix") and _ops(loops[-1].body, "tma_store")
    assert [op.args["n"].sym.const for op in _ops(mma.body, "tma_store_wait")] == [1, 0]  # type: ignore[union-attr]


def test_tinygemm_sm90_design() -> None:
    k = _kernel("tinygemm_sm90.cake")
    assert (k.arch, k.warps, len(k.grid)) == ("sm_90a", 8, 1)
    assert {n: (r.warp_start, r.warp_stop, r.regs) for n, r in k.roles.items()} == {
        "load": (0, 4, None), "mma": (4, 8, None)}
    m = k.dims["M"]
    assert m.max == 64
    smem = _smem(k)
    assert smem["sa"].nbytes == 8 * 64 * 64 * 2
    assert smem["sw"].nbytes == 8 * 32 * 64 * 2
    assert smem["sc"].nbytes == 64 * 32 * 2 and smem["sc"].layout == SmemLayout("row", 64)
    assert smem["ring"].nbytes == 2 * 8 * 8
    total = sum(a.nbytes for a in k.smem)
    assert total == 98304 + 4096 + 128
    assert 2 * (total + 1024) <= 228 * 1024  # two blocks per SM, 1 KB reserved each
    # the TMA-store epilogue: smem store, proxy fence, role barrier, store, wait
    epilogue = [op.name for op in k.roles["mma"].body
                if isinstance(op, Op) and op.name != "tile"]
    assert epilogue[-6:] == ["cast", "store", "fence_proxy_async", "barrier_sync",
                             "tma_store", "tma_store_wait"]


def test_kmeans_assign_design() -> None:
    k = _kernel("kmeans_assign_sm90.cake")
    assert (k.arch, k.warps) == ("sm_90a", 12)
    assert {n: (r.warp_start, r.warp_stop, r.regs) for n, r in k.roles.items()} == {
        "load": (0, 4, 40), "dist": (4, 12, 232)}
    assert k.dims["K"].multiple_of == 128
    params = {p.name: p.value.type for p in k.params}
    assert [d.const for d in params["X"].shape][2] == 128  # type: ignore[attr-defined]
    assert params["out"].dtype == DType.I32  # type: ignore[attr-defined]
    smem = _smem(k)
    assert smem["sx"].nbytes == 2 * 128 * 64 * 2          # the X tile, once
    assert smem["sc"].nbytes == 3 * 2 * 128 * 64 * 2      # 3 stages of 128 centroids
    assert smem["scn"].nbytes == 3 * 128 * 4              # their f32 norms
    assert smem["xready"].nbytes == 8 and smem["chunks"].nbytes == 2 * 3 * 8
    assert sum(a.nbytes for a in k.smem) == 32768 + 98304 + 1536 + 8 + 48

    load, dist = k.roles["load"], k.roles["dist"]
    chunk_loop = next(n for n in load.body if isinstance(n, ForOp)
                      and _ops(n.body, "acquire"))
    x_loads = [op for op in _ops(load.body, "tma_load")
               if isinstance(op.args["src"].type, TileType)
               and op.args["src"].type.tensor == "X"]
    assert len(x_loads) == 1 and x_loads[0] not in _ops(chunk_loop.body, "tma_load")
    # the fused epilogue: per-chunk argmin, running (value, index) kept with where()
    assert len(_ops(dist.body, "row_argmin")) == 1
    assert len(_ops(dist.body, "where")) == 2
    stores = _ops(dist.body, "store")
    assert len(stores) == 1 and stores[0].args["src"].type.dtype == DType.I32  # type: ignore[attr-defined]
    # no buffer or fragment is N x K: the largest fragment is one 128 x 128 chunk
    frags = [op.results[0].type for op in _ops(dist.body, "fragment")]
    assert max(len(f.shape) for f in frags) == 2  # type: ignore[attr-defined]
    assert all(d.const is not None and d.const <= 128 for f in frags for d in f.shape)  # type: ignore[attr-defined]
    assert not any(isinstance(n, Role) for n in walk_nodes(load.body))


def test_kmeans_assign_dbuf_design() -> None:
    """The double-buffered k-means is the seed's kernel with a consumer that keeps one
    chunk's wgmmas in flight: two accumulators, `wgmma_wait(2)` (the newer chunk's two
    groups) in the loop and the drain only in the tail."""
    seed, k = _kernel("kmeans_assign_sm90.cake"), _kernel("kmeans_assign_sm90_dbuf.cake")
    assert {n: (r.warp_start, r.warp_stop, r.regs) for n, r in k.roles.items()} == {
        n: (r.warp_start, r.warp_stop, r.regs) for n, r in seed.roles.items()}
    assert sum(a.nbytes for a in k.smem) == sum(a.nbytes for a in seed.smem)
    dist = k.roles["dist"]
    accs = {op.results[0].name for op in _ops(dist.body, "fragment")
            if op.results[0].type.layout is FragLayout.WGMMA_ACC}  # type: ignore[attr-defined]
    assert accs == {"d0", "d1"}
    (loop,) = [n for n in dist.body if isinstance(n, ForOp) and _ops(n.body, "release")]
    waits = [op.args["n"].sym.const for op in _ops(loop.body, "wgmma_wait")]  # type: ignore[union-attr]
    assert waits == [2, 2]
    assert len(_ops(loop.body, "release")) == 2 and len(_ops(loop.body, "wait")) == 2
    assert 0 in [op.args["n"].sym.const for op in _ops(dist.body, "wgmma_wait")]  # type: ignore[union-attr]


def test_kmeans_assign_pingpong_design() -> None:
    """The ping-pong k-means: the seed's producer, and two one-warpgroup consumer roles of
    the same pipeline, each with a 64-row tile and the seed's register budget, handing the
    turn to issue wgmmas over by named barriers 1 and 2 (both sides' 8 warps)."""
    seed, k = _kernel("kmeans_assign_sm90.cake"), _kernel("kmeans_assign_sm90_pingpong.cake")
    assert (k.roles["load"].warp_start, k.roles["load"].warp_stop, k.roles["load"].regs) == (
        seed.roles["load"].warp_start, seed.roles["load"].warp_stop, seed.roles["load"].regs)
    assert {n: (r.warp_start, r.warp_stop, r.regs) for n, r in k.roles.items() if n != "load"} \
        == {"dist0": (4, 8, 232), "dist1": (8, 12, 232)}
    assert sum(a.nbytes for a in k.smem) == sum(a.nbytes for a in seed.smem)
    for name, sync, arrive in (("dist0", 2, 1), ("dist1", 1, 2)):
        body = k.roles[name].body
        assert [op.args["id"].sym.const for op in _ops(body, "barrier_sync")] == [sync]  # type: ignore[union-attr]
        assert [op.args["id"].sym.const for op in _ops(body, "barrier_arrive")] == [arrive]  # type: ignore[union-attr]
        assert all(op.args["warps"].sym.const == 8  # type: ignore[union-attr]
                   for op in _ops(body, "barrier_sync") + _ops(body, "barrier_arrive"))


def test_kmeans_assign_pingpong128_design() -> None:
    """The ping-pong k-means with 128 rows per consumer warpgroup: the ping-pong's roles
    and named barriers, each role's accumulator two 64-row slabs (256 points a block), the
    distance as one `fma`, and the running argmin as one `argmin_update`."""
    pp, k = (_kernel("kmeans_assign_sm90_pingpong.cake"),
             _kernel("kmeans_assign_sm90_pingpong128.cake"))
    assert {n: (r.warp_start, r.warp_stop, r.regs) for n, r in k.roles.items()} == {
        n: (r.warp_start, r.warp_stop, r.regs) for n, r in pp.roles.items()}
    assert _smem(k)["sx"].nbytes == 256 * 128 * 2  # the block's X tile, 256 rows
    assert _smem(k)["sc"].nbytes == _smem(pp)["sc"].nbytes
    for name in ("dist0", "dist1"):
        body = k.roles[name].body
        accs = [op.args["acc"].type for op in _ops(body, "wgmma")]
        assert accs and all(t.shape[0].const == 128 for t in accs)  # type: ignore[attr-defined]
        assert len(_ops(body, "fma")) == 1 and len(_ops(body, "argmin_update")) == 1
        assert not _ops(body, "row_argmin") and not _ops(body, "mul")
        assert len(_ops(body, "barrier_sync")) == 1 and len(_ops(body, "barrier_arrive")) == 1
