"""accumulator-double-buffer: its output verifies, computes the task's reference on every
small shape (both tails of the peeled loop), keeps one iteration's wgmmas in flight, and
is predicted faster; it leaves alone the loops that are not the drained form."""

from __future__ import annotations

from pathlib import Path

import pytest
from cake_tactics.double_buffer import ACC_DOUBLE_BUFFER

from cake_core.check import check_text
from cake_core.diagnostics.model import apply_edits
from cake_core.sim import SimKernel
from cake_core.sim.tasks_run import run_task
from cake_core.tasks import load_task

ROOT = Path(__file__).resolve().parents[3]
SEED = ROOT / "examples" / "kmeans_assign_sm90.cake"


def _rewritten(path: Path = SEED, text: str | None = None) -> tuple[str, object]:
    text = path.read_text(encoding="utf-8") if text is None else text
    res = check_text(text, path.name)
    assert res.errors == []
    kernel = res.program.kernels[0]
    assert ACC_DOUBLE_BUFFER.applies(kernel, res.source) is not None
    out = ACC_DOUBLE_BUFFER.apply(kernel, res.source, {})
    assert out is not None
    return apply_edits(text, out.edits), out


def test_the_seed_becomes_double_buffered_and_verifies() -> None:
    new, out = _rewritten()
    res = check_text(new, SEED.name)
    assert res.diagnostics == [], [d.message for d in res.diagnostics]
    assert new.count("wgmma_wait(2)") == 3 and new.count("wgmma_wait(0)") == 2
    assert "dot0 = fragment(" in new and "dot1 = fragment(" in new
    pred = out.params["predicted"]  # type: ignore[attr-defined]
    assert pred["dims"] == {"B": 32, "N": 65536, "K": 1024}
    assert pred["after_us"] < pred["before_us"]


def test_the_rewrite_matches_the_task_reference() -> None:
    new, _ = _rewritten()
    task = load_task("kmeans_assign")
    sk = SimKernel.from_text(new, "kmeans_dbuf.cake")
    # the task's small shapes (one chunk: the odd tail only) and loops of 4 and 5 chunks
    shapes = [*(s.dims for s in task.sim_shapes), {"B": 1, "N": 200, "K": 512},
              {"B": 1, "N": 200, "K": 640}]
    report = run_task(task, sk, n_schedules=2, shapes=shapes)
    for s in report.shapes:
        assert s.error is None and s.passed, (s.dims, s.error)
    assert [d for d in report.diagnostics if d.severity.value == "error"] == []


@pytest.mark.parametrize("name", ["gemm_sm90.cake", "kmeans_assign_sm90_dbuf.cake",
                                  "gemm_sm80.cake"])
def test_loops_not_in_the_drained_form_are_left_alone(name: str) -> None:
    path = ROOT / "examples" / name
    res = check_text(path.read_text(encoding="utf-8"), name)
    assert ACC_DOUBLE_BUFFER.applies(res.program.kernels[0], res.source) is None


def test_a_rewrite_that_the_simulator_rejects_is_not_offered(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Verified is not enough: the tactic runs both kernels in the simulator and offers
    the rewrite only when the outputs agree."""
    import cake_tactics.double_buffer as db

    text = SEED.read_text(encoding="utf-8")
    res = check_text(text, SEED.name)
    real = db._rewrite
    monkeypatch.setattr(db, "_rewrite", lambda source, f: real(source, f).replace(
        "best_i = where(closer, i + (2 * p + 1) * BN, best_i)",
        "best_i = where(closer, i + (2 * p) * BN, best_i)"))
    assert ACC_DOUBLE_BUFFER.apply(res.program.kernels[0], res.source, {}) is None
