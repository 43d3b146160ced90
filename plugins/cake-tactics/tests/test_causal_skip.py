"""causal-tile-skip: a causal kernel that walks every key tile is rewritten to stop at
the block's diagonal; the result verifies, matches the causal reference, and is cheaper."""

from __future__ import annotations

from pathlib import Path

from cake_tactics.causal_skip import CAUSAL_TILE_SKIP

from cake_core.check import check_text
from cake_core.diagnostics.model import apply_edits
from cake_core.plugins import TacticResult
from cake_core.sim import SimKernel
from cake_core.sim.tasks_run import run_task
from cake_core.source import SourceFile
from cake_core.tasks import load_task

ROOT = Path(__file__).resolve().parents[3]
CAUSAL = (ROOT / "examples" / "attention_fwd_sm90_causal.cake").read_text()
SKIP = "    NT = min(cdiv(S, BN), cdiv((qt + 1) * 2 * BM, BN))"
# the same kernel before anyone thought of skipping: every block walks every key tile
NO_SKIP = (Path(__file__).parent / "data" / "attention_causal_noskip_sm90.cake").read_text()


def _result(text: str) -> TacticResult | None:
    res = check_text(text, "causal.cake")
    assert res.errors == [] and res.program is not None
    kernel, source = res.program.kernels[0], SourceFile(text, "causal.cake")
    if not CAUSAL_TILE_SKIP.variants(kernel, source):
        return None
    return CAUSAL_TILE_SKIP.apply(kernel, source, {})


def _apply(text: str) -> str | None:
    out = _result(text)
    return None if out is None else apply_edits(text, out.edits)


def test_the_seed_is_the_causal_example_walking_every_tile() -> None:
    differ = [(a, b) for a, b in zip(CAUSAL.split("\n"), NO_SKIP.split("\n"), strict=True)
              if a != b]
    assert len(differ) == 1 and differ[0][0].startswith(SKIP)
    assert differ[0][1].startswith("    NT = cdiv(S, BN) ")


def test_every_key_loop_stops_at_the_diagonal_and_the_result_is_right() -> None:
    after = _apply(NO_SKIP)
    assert after is not None
    assert check_text(after, "causal.cake").diagnostics == []
    # producer and both consumers walk the new bound; the hand-off counts it too
    assert after.count("for j in range(n_tiles):") == 3
    assert "if j < n_tiles - 1:" in after
    report = run_task(load_task("attention_fwd_causal"), SimKernel.from_text(after, "c.cake"),
                      n_schedules=1)
    assert report.passed, [(s.dims, s.error) for s in report.shapes]


def test_the_cost_model_sees_about_half_the_tiles_go() -> None:
    out = _result(NO_SKIP)
    assert out is not None
    # 33 of 64 key tiles per block on average at the headline S = 4096: about 64 / 33.
    # Less for what does not shrink (the Q loads, the epilogue); a little more because the
    # seed also runs the causal mask on every tile past the diagonal, which goes too.
    assert 1.4 < out.params["predicted"]["speedup"] < 2.1, out.params["predicted"]


def test_it_is_not_offered_where_the_loops_already_stop() -> None:
    assert _apply(CAUSAL) is None


def test_a_mask_on_another_loop_variable_is_not_a_causal_mask() -> None:
    """The mask must move with the loop's own variable: `0 * BN` is not a key index."""
    text = NO_SKIP.replace("col_index(s) + j * BN", "col_index(s) + 0 * BN")
    assert _apply(text) is None
