"""Tasks load and judge correctly, and `cake run --sim` reports them."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from cake_cli.main import main
from cake_core.tasks import TaskError, Tolerance, allclose, load_task, task_names

ROOT = Path(__file__).resolve().parents[2]


def test_every_task_loads_and_describes_itself() -> None:
    names = task_names()
    assert {"gemm_bf16", "gemm_f16_sm80", "kmeans_assign"} <= set(names)
    for name in names:
        t = load_task(name)
        assert t.name == name and t.kernels and t.shapes and t.sim_shapes and t.baseline
        for e in t.kernels:
            for s in t.shapes_for(e, sim=True):
                data = t.inputs(s.dims, np.random.default_rng(0))
                ref = t.reference(data, s.dims)
                assert set(ref) == set(t.outputs)


def test_task_by_path_and_unknown_task(tmp_path: Path) -> None:
    t = load_task(ROOT / "examples" / "tasks" / "gemm_bf16.py")
    assert t.name == "gemm_bf16"
    with pytest.raises(TaskError, match="no task"):
        load_task("no_such_task")
    bad = tmp_path / "broken.py"
    bad.write_text("TASK = 3\n")
    with pytest.raises(TaskError, match="does not define TASK"):
        load_task(bad)


def test_allclose() -> None:
    want = np.array([1.0, 2.0, 100.0])
    ok = allclose(want * (1 + 1e-3), want, Tolerance(0.0, 1e-2))
    assert ok.passed and ok.max_rel == pytest.approx(1e-3)
    bad = allclose(np.array([1.0, 2.5, np.nan]), want, Tolerance(0.0, 1e-2))
    assert not bad.passed and bad.bad == 2 and bad.first_bad == (1,)


def test_kmeans_accepts_near_ties_only() -> None:
    t = load_task("kmeans_assign")
    dims = {"B": 1, "N": 64, "K": 128}
    data = t.inputs(dims, np.random.default_rng(0))
    ref = t.reference(data, dims)["out"]
    assert t.judge("out", ref, ref, data, dims, "i32").passed
    # make centroid 1 an exact copy of centroid 0: either index is right for its points
    c = data["C"].copy()
    c[0, 1] = c[0, 0]
    data2 = {**data, "C": c, "Cn": (c.astype(np.float64) ** 2).sum(-1).astype(np.float32)}
    ref2 = t.reference(data2, dims)["out"]
    swapped = np.where(ref2 == 0, 1, ref2).astype(np.int32)
    if (ref2 == 0).any():
        assert t.judge("out", swapped, ref2, data2, dims, "i32").passed
    wrong = (ref + 1) % 128
    res = t.judge("out", wrong.astype(np.int32), ref, data, dims, "i32")
    assert not res.passed and res.bad > 0


def test_cake_run_sim_text() -> None:
    r = CliRunner().invoke(main, ["run", str(ROOT / "examples" / "gemm_sm90.cake"),
                                  "--task", "gemm_bf16", "--sim", "--schedules", "1"])
    assert r.exit_code == 0, r.output
    assert "M=256,N=256,K=128  PASS" in r.output
    assert "M=200,N=136,K=72   PASS" in r.output
    assert r.output.endswith("2/2 shapes match the reference\n")


def test_cake_run_sim_json_with_dims() -> None:
    r = CliRunner().invoke(main, ["run", str(ROOT / "examples" / "tinygemm_sm90.cake"),
                                  "--task", "gemm_bf16", "--sim", "--dims", "M=8,N=40,K=64",
                                  "--format", "json"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.output)
    assert doc["schema"] == "cake.run/1" and doc["passed"] is True
    (shape,) = doc["shapes"]
    assert shape["dims"] == {"M": 8, "N": 40, "K": 64} and shape["blocks"] == 2
    assert [s["schedule"] for s in shape["schedules"]] == [
        "round-robin", "adversarial (starving role 'mma')"]
    assert doc["report"]["diagnostics"] == []


def test_cake_run_reports_a_wrong_kernel(tmp_path: Path) -> None:
    page = (ROOT / "docs" / "rules" / "CK507.md").read_text()
    example = page.split("## Example")[1].split("```python\n")[1].split("```")[0]
    f = tmp_path / "floor.cake"
    f.write_text(example)
    r = CliRunner().invoke(main, ["run", str(f), "--task", "gemm_bf16", "--sim",
                                  "--schedules", "1", "--format", "json"])
    assert r.exit_code == 1, r.output
    doc = json.loads(r.output)
    verdicts = {json.dumps(s["dims"]): s["passed"] for s in doc["shapes"]}
    assert verdicts == {'{"M": 256, "N": 256, "K": 128}': True,
                        '{"M": 200, "N": 136, "K": 72}': False}
    (d,) = [d for d in doc["report"]["diagnostics"] if d["code"] == "CK507"]
    assert "differs from the reference" in d["message"]


def test_cake_run_usage_errors() -> None:
    gemm = str(ROOT / "examples" / "gemm_sm90.cake")
    r = CliRunner().invoke(main, ["run", gemm, "--task", "gemm_bf16"])
    assert r.exit_code == 2 and "only --sim is available" in r.output
    r = CliRunner().invoke(main, ["run", gemm, "--task", "nope", "--sim"])
    assert r.exit_code == 2 and "no task 'nope'" in r.output
    r = CliRunner().invoke(main, ["run", gemm, "--task", "gemm_bf16", "--sim",
                                  "--dims", "M=100,N=100"])
    assert r.exit_code == 2 and "missing dims: K" in r.output
    r = CliRunner().invoke(main, ["run", gemm, "--task", "gemm_bf16", "--sim",
                                  "--dims", "M=64,N=60,K=64"])
    assert r.exit_code == 2 and "multiple of 8" in r.output
