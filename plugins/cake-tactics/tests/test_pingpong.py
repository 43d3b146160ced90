"""consumer-pingpong: its output verifies, computes the task's reference on the task's
small shapes (ragged N, one chunk) and on longer loops, orders the two roles' wgmma issue
with named barriers, and is predicted faster; kernels not in the form are left alone."""

from __future__ import annotations

from pathlib import Path

import pytest
from cake_tactics.pingpong import CONSUMER_PINGPONG
from cake_tactics.tactics import TILE_SIZE

from cake_core.check import check_text
from cake_core.diagnostics.model import apply_edits
from cake_core.sim import SimKernel
from cake_core.sim.tasks_run import run_task
from cake_core.tasks import load_task

ROOT = Path(__file__).resolve().parents[3]
SEED = ROOT / "examples" / "kmeans_assign_sm90.cake"


def _rewritten() -> tuple[str, object]:
    text = SEED.read_text(encoding="utf-8")
    res = check_text(text, SEED.name)
    assert res.errors == []
    assert res.program is not None
    kernel = res.program.kernels[0]
    assert CONSUMER_PINGPONG.applies(kernel, res.source) is not None
    out = CONSUMER_PINGPONG.apply(kernel, res.source, {})
    assert out is not None
    return apply_edits(text, out.edits), out


def test_the_seed_becomes_two_roles_taking_turns_and_verifies() -> None:
    new, out = _rewritten()
    res = check_text(new, SEED.name)
    assert res.diagnostics == [], [d.message for d in res.diagnostics]
    assert res.program is not None
    k = res.program.kernels[0]
    assert {n: (r.warp_start, r.warp_stop) for n, r in k.roles.items() if n != "load"} == {
        "dist0": (4, 8), "dist1": (8, 12)}
    assert 'consumer=("dist0", "dist1")' in new
    assert new.count("barrier_sync(") == 2 and new.count("barrier_arrive(") == 2
    # the halves are written in the accumulator's row constant, so BM can change later
    assert "sx[h].tile((BM // 2, 64), (0, 0))" in new and "sx[h].tile((BM // 2, 64), (1, 0))" in new
    pred = out.params["predicted"]  # type: ignore[attr-defined]
    assert pred["after_us"] < pred["before_us"]


def test_the_rewrite_matches_the_task_reference() -> None:
    new, _ = _rewritten()
    task = load_task("kmeans_assign")
    sk = SimKernel.from_text(new, "kmeans_pingpong.cake")
    shapes = [*(s.dims for s in task.sim_shapes), {"B": 1, "N": 50, "K": 512},
              {"B": 2, "N": 200, "K": 640}]
    report = run_task(task, sk, n_schedules=2, shapes=shapes)
    for s in report.shapes:
        assert s.error is None and s.passed, (s.dims, s.error)
    assert [d for d in report.diagnostics if d.severity.value == "error"] == []


def test_two_slabs_per_warpgroup_compose_with_the_tile_size() -> None:
    """BM 128 -> 256 after the split: each role owns 128 rows, two m64 wgmmas per K step
    sharing the B tile (CK211 accepts whole 64-row slabs); it still computes the
    reference, and the halved per-row synchronization and centroid traffic is predicted
    faster than the 64-row ping-pong."""
    new, out = _rewritten()
    res = check_text(new, SEED.name)
    assert res.program is not None
    kernel = res.program.kernels[0]
    moved = TILE_SIZE.apply(kernel, res.source, {"name": "BM", "value": 256})
    assert moved is not None
    wide = apply_edits(new, moved.edits)
    res2 = check_text(wide, SEED.name)
    assert res2.diagnostics == [], [d.message for d in res2.diagnostics]
    assert res2.program is not None
    accs = [op.args["acc"].type for op in res2.program.kernels[0].ops() if op.name == "wgmma"]
    assert accs and all(t.shape[0].const == 128 for t in accs)  # type: ignore[attr-defined]
    before = out.params["predicted"]["after_us"]  # type: ignore[attr-defined]
    assert moved.params["predicted"]["after_us"] < before
    task = load_task("kmeans_assign")
    sk = SimKernel.from_text(wide, "kmeans_pingpong_two_slabs.cake")
    shapes = [*(s.dims for s in task.sim_shapes), {"B": 1, "N": 300, "K": 512}]
    report = run_task(task, sk, n_schedules=2, shapes=shapes)
    for s in report.shapes:
        assert s.error is None and s.passed, (s.dims, s.error)
    assert [d for d in report.diagnostics if d.severity.value == "error"] == []


@pytest.mark.parametrize("name", ["gemm_sm90.cake", "kmeans_assign_sm90_dbuf.cake",
                                  "kmeans_assign_sm90_pingpong.cake", "gemm_sm80.cake"])
def test_kernels_not_in_the_form_are_left_alone(name: str) -> None:
    path = ROOT / "examples" / name
    res = check_text(path.read_text(encoding="utf-8"), path.name)
    assert res.program is not None
    kernel = res.program.kernels[0]
    assert CONSUMER_PINGPONG.applies(kernel, res.source) is None
    assert CONSUMER_PINGPONG.apply(kernel, res.source, {}) is None
