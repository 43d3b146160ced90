"""cake-kmeans: the argmin_update primitive (types, simulation, cost, lowering) and the
fuse-online-argmin tactic on the k-means example."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from cake_kmeans import plugin
from cake_kmeans.fuse import find_online_argmins
from cake_kmeans.simulate import online_argmin

from cake_core.check import check_text
from cake_core.cost.model import cost_context
from cake_core.diagnostics.model import apply_edits
from cake_core.plugins import load_plugins
from cake_core.primitives.facets import check_facet
from cake_core.sim import SimKernel, simulate
from cake_core.sim.tasks_run import run_task
from cake_core.tasks import load_task

ROOT = Path(__file__).resolve().parents[3]
KMEANS = ROOT / "examples" / "kmeans_assign_sm90.cake"
FUSE = next(t for t in plugin.tactics if t.name == "fuse-online-argmin")

#: Chunked argmin over the rows of D, fused.  Small enough for the simulator.
FUSED = '''R, C = 16, 32
N = dim("N", multiple_of=C)

@kernel(arch="sm_80", grid=(1,), warps=1)
def argmin_rows(D: Tensor[f32, (R, N)], idx: Tensor[i32, (R,)], val: Tensor[f32, (R,)]):
    best_v = fragment(f32, (R,), fill=inf)
    best_i = fragment(i32, (R,))
    for j in range(N // C):
        dist = load(D.tile((R, C), (0, j)))
        argmin_update(best_v, best_i, dist, j * C)
    store(idx.tile((R,), (0,)), best_i)
    store(val.tile((R,), (0,)), best_v)
'''

UNFUSED = FUSED.replace(
    "        argmin_update(best_v, best_i, dist, j * C)\n",
    "        v, i = row_argmin(dist)\n"
    "        closer = lt(v, best_v)\n"
    "        best_i = where(closer, i + j * C, best_i)\n"
    "        best_v = where(closer, v, best_v)\n")


def _check(text: str, path: str = "t.cake"):
    return check_text(text, path)


def _codes_at(text: str) -> list[tuple[str, str]]:
    res = _check(text)
    return [(d.code, res.source.snippet(d.span)) for d in res.errors]


# --- type rule --------------------------------------------------------------------------
def test_argmin_update_checks_clean() -> None:
    res = _check(FUSED)
    assert res.errors == [], [d.message for d in res.errors]
    op = next(o for o in res.program.kernels[0].ops() if o.name == "argmin_update")
    assert op.prim.plugin == "cake-kmeans"
    eff = op.prim.effects
    assert set(eff.reads) == {"dist", "best_v", "best_i"}
    assert set(eff.writes) == {"best_v", "best_i"}


@pytest.mark.parametrize(("old", "new", "code", "at"), [
    ("best_v = fragment(f32, (R,), fill=inf)", "best_v = fragment(f32, (C,), fill=inf)",
     "CK105", "best_v"),
    ("best_i = fragment(i32, (R,))", "best_i = fragment(i32, (R, 2))", "CK105", "best_i"),
    ("best_i = fragment(i32, (R,))", "best_i = fragment(f32, (R,))", "CK106", "best_i"),
    ("best_v = fragment(f32, (R,), fill=inf)", "best_v = fragment(i32, (R,))", "CK106",
     "best_v"),
    ("argmin_update(best_v, best_i, dist, j * C)",
     "argmin_update(best_v, best_i, best_v, j * C)", "CK105", "best_v"),
], ids=["values-length", "index-rank", "index-dtype", "values-dtype", "dist-rank"])
def test_bad_operands_are_rejected_at_the_argument(old: str, new: str, code: str, at: str
                                                   ) -> None:
    text = FUSED.replace(old, new)
    assert text != FUSED
    found = _codes_at(text)
    assert found, "the broken call was accepted"
    assert found[0][0] == code, found
    # the finding sits on the argument of the call a person would edit
    res = _check(text)
    d = res.errors[0]
    line = res.source.line_text(d.span.start.line)
    assert "argmin_update" in line and res.source.snippet(d.span) == at


def test_a_non_fragment_offset_is_a_type_mismatch() -> None:
    found = _codes_at(FUSED.replace("dist, j * C)", "dist, dist)"))
    assert [c for c, _ in found] == ["CK104"]


# --- simulation ---------------------------------------------------------------------------
def test_online_argmin_is_numpy_argmin_over_chunks_with_ties() -> None:
    rng = np.random.default_rng(1)
    d = rng.integers(0, 3, size=(64, 96)).astype(np.float32)  # ties everywhere
    d[5] = 7.0  # a whole row of ties: column 0 wins
    d[6, 40] = d[6, 70] = -1.0  # a tie across chunks: the earlier chunk wins
    best_v = np.full(64, np.inf, dtype=np.float32)
    best_i = np.zeros(64, dtype=np.int32)
    for j in range(3):
        best_v, best_i = online_argmin(best_v, best_i, d[:, j * 32:(j + 1) * 32], j * 32)
    np.testing.assert_array_equal(best_i, d.argmin(axis=1))
    np.testing.assert_array_equal(best_v, d.min(axis=1))
    assert best_i[5] == 0 and best_i[6] == 40


def _simulate(text: str, d: np.ndarray) -> dict[str, np.ndarray]:
    sk = SimKernel.from_text(text, "t.cake")
    res = simulate(sk, {"N": d.shape[1]}, {"D": d})
    assert res.ok, [x.message for x in res.diagnostics]
    return res.outputs


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_simulated_kernel_matches_numpy_argmin(seed: int) -> None:
    rng = np.random.default_rng(seed)
    d = rng.integers(-2, 3, size=(16, 128)).astype(np.float32)
    d[3, 100] = d[3, 20] = -5.0  # the earlier of two equal minima in different chunks
    out = _simulate(FUSED, d)
    np.testing.assert_array_equal(out["idx"], d.argmin(axis=1))
    np.testing.assert_array_equal(out["val"], d.min(axis=1))
    assert out["idx"][3] == 20


def test_fused_and_unfused_kernels_simulate_identically() -> None:
    assert _check(UNFUSED).errors == []
    d = np.random.default_rng(3).standard_normal((16, 96)).astype(np.float32)
    d[:, 33] = d[:, 1]  # exact ties across chunks in every row
    a, b = _simulate(FUSED, d), _simulate(UNFUSED, d)
    np.testing.assert_array_equal(a["idx"], b["idx"])
    np.testing.assert_array_equal(a["val"], b["val"])


# --- cost -----------------------------------------------------------------------------------
def test_fused_update_costs_less_cuda_work_than_the_unfused_sequence() -> None:
    fused, unfused = _check(FUSED).program.kernels[0], _check(UNFUSED).program.kernels[0]
    ctx_f, ctx_u = cost_context(fused, {"N": 128}), cost_context(unfused, {"N": 128})
    op = next(o for o in fused.ops() if o.name == "argmin_update")
    fused_ops = op.prim.facet("cost")(op, ctx_f).cuda_ops
    names = {"row_argmin", "lt", "add", "where"}
    unfused_ops = sum(o.prim.facet("cost")(o, ctx_u).cuda_ops for o in unfused.ops()
                      if o.name in names)
    # the row scan dominates both: 2 ops per element of the (16, 32) tile
    assert 2 * 16 * 32 < fused_ops < unfused_ops


# --- the tactic ---------------------------------------------------------------------------
def _kmeans():
    text = KMEANS.read_text(encoding="utf-8")
    res = check_text(text, "examples/kmeans_assign_sm90.cake")
    assert res.errors == []
    return text, res


def test_tactic_recognises_the_kmeans_epilogue_on_the_ir() -> None:
    _, res = _kmeans()
    kernel = res.program.kernels[0]
    found = find_online_argmins(kernel, res.source)
    assert len(found) == 1
    m = found[0]
    assert [op.name for op in m.ops] == ["row_argmin", "lt", "add", "where", "where"]
    assert (m.best_v, m.best_i, m.dist, m.offset) == ("best_v", "best_i", "dist", "j * BN")
    assert "argmin_update" in FUSE.applies(kernel, res.source)


def test_tactic_output_verifies_and_simulates_like_the_task_reference() -> None:
    text, res = _kmeans()
    kernel = res.program.kernels[0]
    (params,) = FUSE.variants(kernel, res.source)
    out = FUSE.apply(kernel, res.source, params)
    assert out is not None
    new = apply_edits(text, out.edits)
    assert "argmin_update(best_v, best_i, dist, j * BN)" in new
    assert "row_argmin" not in new and "closer" not in new
    assert "# Strict `<`" in new  # the comment between the statements is kept
    assert check_text(new, "kmeans_fused.cake").errors == []
    sk = SimKernel.from_text(new, "kmeans_fused.cake")
    report = run_task(load_task("kmeans_assign"), sk, n_schedules=1)
    assert report.passed, [d.message for d in report.diagnostics]
    pred = out.params["predicted"]
    assert pred["dims"] == {"B": 32, "N": 65536, "K": 1024}
    assert "kmeans_assign" in pred["dims_from"]
    assert 0 < pred["after_us"] <= pred["before_us"]


def test_fused_kmeans_gives_the_same_outputs_as_the_original() -> None:
    text, res = _kmeans()
    out = FUSE.apply(res.program.kernels[0], res.source, {})
    assert out is not None
    task = load_task("kmeans_assign")
    dims = {"B": 1, "N": 200, "K": 256}
    data = task.inputs(dims, np.random.default_rng(7))
    got = [simulate(SimKernel.from_text(t, "k.cake"), dims, data).outputs["out"]
           for t in (text, apply_edits(text, out.edits))]
    np.testing.assert_array_equal(got[0], got[1])


@pytest.mark.parametrize(("old", "new"), [
    ("closer = lt(v, best_v)", "closer = le(v, best_v)"),  # later chunks would win ties
    ("best_v = where(closer, v, best_v)",
     "best_v = where(closer, v, best_v)\n            best_v = best_v + v"),  # v read again
    ("best_i = where(closer, i + j * BN, best_i)\n",
     # an operation names best_i (a bare `best_i = best_j` would not carry: CK332)
     "best_j = where(closer, i + j * BN, best_i)\n            best_i = best_j + 0\n"),
])
def test_tactic_leaves_lookalikes_alone(old: str, new: str) -> None:
    text = KMEANS.read_text(encoding="utf-8")
    changed = text.replace(old, new)
    assert changed != text
    res = check_text(changed, "k.cake")
    assert res.errors == [], [d.message for d in res.errors]
    kernel = res.program.kernels[0]
    assert FUSE.applies(kernel, res.source) is None
    assert FUSE.apply(kernel, res.source, {}) is None


def test_tactic_accepts_the_operator_spelling_and_a_zero_offset() -> None:
    text = UNFUSED.replace("lt(v, best_v)", "v < best_v").replace("i + j * C", "i")
    res = _check(text)
    assert res.errors == []
    out = FUSE.apply(res.program.kernels[0], res.source, {})
    assert out is not None
    assert "argmin_update(best_v, best_i, dist, 0)" in apply_edits(text, out.edits)


# --- lowering -------------------------------------------------------------------------------
def _lower(text: str, path: str = "kmeans_fused.cake"):
    from cake_core.lower import lower_source
    from cake_core.source import SourceFile

    low = lower_source(SourceFile(text, path))
    assert low.ok, [d.message for d in low.diagnostics]
    return low


def _fused_kmeans() -> str:
    text, res = _kmeans()
    return apply_edits(text, FUSE.apply(res.program.kernels[0], res.source, {}).edits)


def test_lowering_shuffles_across_the_row_lanes_then_selects() -> None:
    low = _lower(_fused_kmeans())
    line = next(ln for ln in low.cu.splitlines() if "chunk_col" in ln)
    # the two lanes-sharing-a-row steps of the wgmma accumulator layout, then the select
    assert "cake_argmin_xor(chunk_v, chunk_col, 1)" in line
    assert "cake_argmin_xor(chunk_v, chunk_col, 2)" in line
    assert "best_i[i] = chunk_col + j * 128" in line and "< best_v[i]" in line
    # the running pair lives in the rows of the accumulator: two rows per thread
    assert "float best_v[2]" in low.cu and "int best_i[2]" in low.cu


def test_layout_hook_ties_the_running_pair_to_the_rows_of_dist() -> None:
    low = _lower(FUSED, "t.cake")
    line = next(ln for ln in low.cu.splitlines() if "chunk_col" in ln)
    # one warp, generic rows layout: a row is spread over all 32 lanes
    for mask in (16, 8, 4, 2, 1):
        assert f"cake_argmin_xor(chunk_v, chunk_col, {mask})" in line


@pytest.mark.nvcc
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
@pytest.mark.parametrize(("which", "arch"), [("kmeans", "90a"), ("small", "80")])
def test_lowered_argmin_update_compiles(which: str, arch: str, tmp_path: Path) -> None:
    low = _lower(_fused_kmeans()) if which == "kmeans" else _lower(FUSED, "t.cake")
    cu = tmp_path / "k.cu"
    cu.write_text(low.cu, encoding="utf-8")
    proc = subprocess.run(["nvcc", "-std=c++17", "-gencode",
                           f"arch=compute_{arch},code=sm_{arch}", "-c", "-o",
                           str(tmp_path / "k.o"), str(cu)],
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]


# --- packaging ------------------------------------------------------------------------------
def test_plugin_loads_through_its_entry_point() -> None:
    ps = load_plugins()
    assert "cake-kmeans" in [p.name for p in ps.plugins]
    assert ps.registry.function("argmin_update") is not None
    assert "fuse-online-argmin" in {t.name for _, t in ps.tactics()}
    assert not [f for f in ps.failures if f.plugin == "cake-kmeans"]
    prim = ps.registry.function("argmin_update")
    for kind in ("cost", "simulate", "lower"):
        assert check_facet(prim.facets.ref(kind)) is None, kind
    assert prim.provenance.origin == "hand-written"
    assert "examples/kmeans_assign_sm90.cake" in prim.provenance.examples
