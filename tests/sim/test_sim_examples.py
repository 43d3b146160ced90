"""The example kernels compute what their tasks say, on regular and ragged shapes.

Each example runs through its task exactly as `cake run --sim` does: the task's seeded
inputs, its numpy reference and tolerances, the round-robin and the adversarial schedule.
A kernel that is not written yet is skipped with the reason.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from cake_core.sim import SimKernel
from cake_core.sim.tasks_run import run_task
from cake_core.tasks import load_task

ROOT = Path(__file__).resolve().parents[2]

EXAMPLES = [
    ("gemm_bf16", "examples/gemm_sm90.cake", "gemm_sm90"),
    ("gemm_bf16", "examples/gemm_sm90_tma_epilogue.cake", "gemm_sm90_tma_epilogue"),
    ("gemm_bf16", "examples/gemm_sm90_persistent.cake", "gemm_sm90_persistent"),
    ("gemm_bf16", "examples/tinygemm_sm90.cake", "tinygemm_sm90"),
    ("gemm_fp8", "examples/gemm_fp8_sm90.cake", "gemm_fp8_sm90"),
    ("grouped_gemm", "examples/grouped_gemm_sm90.cake", "grouped_gemm_sm90"),
    ("grouped_gemm_routed", "examples/grouped_gemm_sm90_routed.cake",
     "grouped_gemm_sm90_routed"),
    ("attention_fwd_varlen", "examples/attention_fwd_sm90_varlen.cake",
     "attention_fwd_sm90_varlen"),
    ("gemm_f16_sm80", "examples/gemm_sm80.cake", "gemm_sm80"),
    ("kmeans_assign", "examples/kmeans_assign_sm90.cake", "kmeans_assign_sm90"),
    ("kmeans_assign", "examples/kmeans_assign_sm90_dbuf.cake", "kmeans_assign_sm90_dbuf"),
    ("kmeans_assign", "examples/kmeans_assign_sm90_pingpong.cake", "kmeans_assign_sm90_pingpong"),
    ("attention_fwd", "examples/attention_fwd_sm90.cake", "attention_fwd_sm90"),
    ("attention_fwd", "examples/attention_fwd_sm90_pingpong.cake", "attention_fwd_sm90_pingpong"),
    ("attention_fwd", "examples/attention_fwd_sm90_persistent.cake",
     "attention_fwd_sm90_persistent"),
    ("attention_fwd_causal", "examples/attention_fwd_sm90_causal.cake",
     "attention_fwd_sm90_causal"),
    ("attention_fwd_d64", "examples/attention_fwd_sm90_d64.cake", "attention_fwd_sm90_d64"),
    ("attention_fwd_d256", "examples/attention_fwd_sm90_d256.cake", "attention_fwd_sm90_d256"),
    ("attention_decode_split", "examples/attention_decode_split_sm90.cake",
     "attention_decode_split_sm90"),
    ("attention_decode_paged", "examples/attention_decode_split_sm90_paged.cake",
     "attention_decode_split_sm90_paged"),
    # attention_decode_combine_sm90 has no tile edge to be ragged on (its dims are the
    # batch and the split count); tests/test_attention_decode.py runs it on the split
    # kernel's outputs.
]
#: Query tiles other than the 128 of _ragged: the D = 64 kernel's block owns 192 rows, and
#: its S is a multiple of its 128-key tile, so its ragged shape is S = 256.
QUERY_TILE = {"attention_fwd_sm90_d64": 192}
#: Kernels no shape they take can be ragged for, with why.
NO_RAGGED_SHAPE = {
    "attention_fwd_sm90_pingpong": "S is a multiple of its 128-key tile, and its blocks own "
                                   "128 query rows: every tile edge falls on S",
    "attention_fwd_sm90_persistent": "as attention_fwd_sm90_pingpong: 128-key tiles, "
                                     "128-row work items",
    "attention_fwd_sm90_varlen": "its ragged edges are the sequences' lengths (read from "
                                 "memory), not its dims: every sim shape is ragged that way",
    "attention_decode_split_sm90_paged": "its ragged edges are data, not dims: the task's "
                                         "SeqLens hold lengths of 297, 169 and 0 keys",
}


def _ragged(dims: dict[str, int], query_tile: int = 128) -> bool:
    """Whether some dim is not a multiple of the smallest tile the examples use for it."""
    tiles = {"M": 64, "N": 32, "K": 64, "S": query_tile}   # S: the attention query tile
    return any(dims[d] % t for d, t in tiles.items() if d in dims)


@pytest.mark.parametrize(("task_name", "source", "kernel"), EXAMPLES,
                         ids=[e[2] for e in EXAMPLES])
def test_example_matches_task_reference(task_name: str, source: str, kernel: str) -> None:
    path = ROOT / source
    if not path.is_file():
        pytest.skip(f"{source} is not written yet")
    task = load_task(task_name)
    sk = SimKernel.from_file(path, kernel)
    report = run_task(task, sk, n_schedules=2)
    assert len(report.shapes) >= 2
    query_tile = QUERY_TILE.get(kernel, 128)
    if kernel not in NO_RAGGED_SHAPE:
        assert any(_ragged(s.dims, query_tile) for s in report.shapes), \
            "no ragged shape was tested"
    for s in report.shapes:
        assert s.error is None, s.error
        assert s.passed, (s.dims, [(o.schedule, {n: (c.bad, c.max_abs) for n, c in
                                                 o.comparisons.items()})
                                   for o in s.outcomes])
        assert len(s.outcomes) == 2
    assert [d for d in report.diagnostics if d.severity.value == "error"] == []


def test_sm90_gemm_block_subset_and_ragged_edges() -> None:
    """The warp-specialised GEMM of tests/sim/data (a copy of the first sample kernel)
    matches on a ragged shape, also when only some blocks run."""
    import numpy as np

    from cake_core.sim import simulate
    from cake_core.tasks import as_dtype

    sk = SimKernel.from_file(Path(__file__).parent / "data" / "gemm_ws.cake")
    rng = np.random.default_rng(3)
    m, n, k = 136, 264, 192  # K must be a multiple of 64 in this kernel
    a = as_dtype(rng.standard_normal((m, k)), "bf16")
    b = as_dtype(rng.standard_normal((n, k)), "bf16")
    want = as_dtype(a.astype(np.float64) @ b.astype(np.float64).T, "bf16")
    full = simulate(sk, {"M": m, "N": n, "K": k}, {"A": a, "B": b})
    assert full.diagnostics == []
    assert full.blocks == 4
    np.testing.assert_allclose(full.outputs["C"], want, rtol=1.6e-2, atol=2e-2)
    one = simulate(sk, {"M": m, "N": n, "K": k}, {"A": a, "B": b}, blocks=[(1, 1)])
    assert one.blocks == 1
    np.testing.assert_allclose(one.outputs["C"][128:, 256:], want[128:, 256:], rtol=1.6e-2,
                               atol=2e-2)
    assert np.isnan(one.outputs["C"][:128, :256]).all(), "unwritten output must stay poisoned"
