"""Every tactic, on every example and test kernel it applies to: each offered variant
verifies, says what it did, and reports the cost model's before/after."""

from __future__ import annotations

from pathlib import Path

import pytest
from cake_tactics import plugin
from tactics_support import KERNELS, ROOT, TEST_KERNELS, applies, offered_variants

from cake_core.check import check_text
from cake_core.diagnostics.model import apply_edits
from cake_core.plugins import load_plugins


@pytest.mark.parametrize("path", KERNELS, ids=lambda p: p.stem)
@pytest.mark.parametrize("tactic", plugin.tactics, ids=lambda t: t.name)
def test_every_offered_rewrite_verifies(path: Path, tactic) -> None:
    if not applies(tactic, path):
        pytest.skip(f"{tactic.name} does not apply to {path.name}")
    text = path.read_text(encoding="utf-8")
    for v in offered_variants(tactic, path):  # a variant that would not verify is never offered
        out = v.out
        assert v.text != text
        assert out.rationale
        assert check_text(v.text, path.name).errors == [], (tactic.name, v.params)
        pred = out.params["predicted"]
        assert pred["dims"] and pred["dims_from"]
        assert "error" in pred or (pred["before_us"] > 0 and pred["after_us"] > 0), pred


@pytest.mark.parametrize("tactic", plugin.tactics, ids=lambda t: t.name)
def test_every_tactic_offers_a_rewrite_on_some_kernel(tactic) -> None:
    offered = []
    for path in KERNELS:
        res = check_text(path.read_text(encoding="utf-8"), path.name)
        kernel = res.program.kernels[0]
        if tactic.applies(kernel, res.source) is None:
            continue
        for params in tactic.variants(kernel, res.source):
            if tactic.apply(kernel, res.source, params) is not None:
                offered.append((path.name, params))
                break
    assert offered, f"{tactic.name} offered nothing on any example or test kernel"


def test_stage_count_max_is_the_deepest_that_fits() -> None:
    path = ROOT / "examples" / "gemm_sm90.cake"
    text = path.read_text(encoding="utf-8")
    res = check_text(text, path.name)
    stages = next(t for t in plugin.tactics if t.name == "stages")
    out = stages.apply(res.program.kernels[0], res.source, {"stages": "max"})
    # 128x64 + 256x64 bf16 per stage = 48 KB; 227 KB opt-in -> 4 stages is already the most
    assert out is None
    three = stages.apply(res.program.kernels[0], res.source, {"stages": 3})
    assert three is not None and "stages 4 -> 3" in three.rationale
    assert stages.apply(res.program.kernels[0], res.source, {"stages": 5}) is None


def test_register_split_stays_within_the_register_file() -> None:
    path = ROOT / "examples" / "gemm_sm90.cake"
    res = check_text(path.read_text(encoding="utf-8"), path.name)
    regs = next(t for t in plugin.tactics if t.name == "rebalance-registers")
    for params in regs.variants(res.program.kernels[0], res.source):
        split = params["regs"]
        assert 128 * split["load"] + 256 * split["mma"] <= 65536


def test_plugin_loads_through_its_entry_point() -> None:
    ps = load_plugins()
    assert "cake-tactics" in [p.name for p in ps.plugins]
    assert {t.name for _, t in ps.tactics()} >= {"tile-size", "stages", "swizzle",
                                                 "rebalance-registers", "warp-specialize",
                                                 "async-copy", "persistent-tiles",
                                                 "accumulator-double-buffer", "consumer-pingpong",
                                                 "fuse-multiply-add"}


def test_retuning_reports_the_cost_models_verdict_at_the_tasks_headline_shape() -> None:
    from cake_core.cost.model import predict

    path = ROOT / "examples" / "gemm_sm90.cake"
    text = path.read_text(encoding="utf-8")
    res = check_text(text, "examples/gemm_sm90.cake")
    kernel = res.program.kernels[0]
    stages = next(t for t in plugin.tactics if t.name == "stages")
    out = stages.apply(kernel, res.source, {"stages": 2})
    assert out is not None
    pred = out.params["predicted"]
    # gemm_sm90 implements the gemm_bf16 task, whose headline shape is 4096^3
    assert pred["dims"] == {"M": 4096, "N": 4096, "K": 4096}
    assert "gemm_bf16" in pred["dims_from"]
    assert pred["before_us"] == pytest.approx(predict(kernel, pred["dims"]).seconds * 1e6)
    after = check_text(apply_edits(text, out.edits), "x.cake").program.kernels[0]
    assert pred["after_us"] == pytest.approx(predict(after, pred["dims"]).seconds * 1e6)
    # two stages hide less latency than four: the model must not call that a win
    assert pred["after_us"] >= pred["before_us"]


def test_kernels_no_task_lists_are_priced_at_a_documented_default() -> None:
    from cake_core.rewrite_cost import DEFAULT_EXTENT, headline_dims

    path = next(p for p in TEST_KERNELS if p.name == "gemm_mbarrier_sm90.cake")
    res = check_text(path.read_text(encoding="utf-8"), path.name)
    dims, origin = headline_dims(res.program.kernels[0], res.source)
    assert set(dims) == {"M", "N", "K"} and all(v == DEFAULT_EXTENT for v in dims.values())
    assert "default" in origin


@pytest.mark.parametrize("name", ["gemm_sm80", "kmeans_assign_sm90", "tinygemm_sm90"])
def test_stage_count_max_equals_the_exhaustive_search(name: str) -> None:
    """`max` skips depths that fail the cheap resource check; the full verifier, tried on
    every depth from the deepest down, must pick the same one."""
    from cake_tactics.tactics import _stage_site

    from cake_core.diagnostics.model import TextEdit
    from cake_core.rewrite import verified

    path = ROOT / "examples" / f"{name}.cake"
    res = check_text(path.read_text(encoding="utf-8"), path.name)
    kernel = res.program.kernels[0]
    stages = next(t for t in plugin.tactics if t.name == "stages")
    out = stages.apply(kernel, res.source, {"stages": "max"})
    span, old = _stage_site(kernel, res.source)
    deepest = next(n for n in range(16, 1, -1)
                   if verified(res.source, (TextEdit(span, str(n)),)) is not None)
    if deepest == old:
        assert out is None
    else:
        assert out is not None and out.params["stages"] == deepest


def test_tile_size_keeps_the_warp_grid_covering_the_block_tile() -> None:
    """gemm_sm80 splits its 128x128 tile among 2x2 warps of 64x64: BM 256 (or WM 32) would
    verify yet leave part of C unwritten (the emulated and simulated runs both find it), so
    only BK is retuned there."""
    path = ROOT / "examples" / "gemm_sm80.cake"
    res = check_text(path.read_text(encoding="utf-8"), path.name)
    kernel = res.program.kernels[0]
    tiles = next(t for t in plugin.tactics if t.name == "tile-size")
    assert {p["name"] for p in tiles.variants(kernel, res.source)} == {"BK"}
    for name, value in (("BM", 256), ("BN", 64), ("WM", 32), ("WN", 128)):
        assert tiles.apply(kernel, res.source, {"name": name, "value": value}) is None
    assert tiles.apply(kernel, res.source, {"name": "BK", "value": 64}) is not None
