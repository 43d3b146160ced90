"""The GPU and the CPU emulation write the same bytes for the same lowered kernels.

`bench/gpu_vs_emulation.py` does the work (each kernel shape in its own subprocess); these
tests run it.  The GPU comparison needs a GPU; the emulation side alone runs anywhere a host
compiler is, so the script itself stays tested where there is none.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from run_support import ROOT

from cake_core.emulate.build import host_compiler_present
from cake_core.run.device import available_backends, probe_gpu
from cake_core.tasks import load_task

SCRIPT = ROOT / "bench" / "gpu_vs_emulation.py"
sys.path.insert(0, str(SCRIPT.parent))
from gpu_vs_emulation import SmallIntegers  # noqa: E402

needs_cxx = pytest.mark.skipif(not host_compiler_present(), reason="needs a host C++ compiler")


def _run(tmp_path: Path, *args: str) -> dict:
    out = tmp_path / "r.json"
    proc = subprocess.run([sys.executable, str(SCRIPT), "--out", str(out), *args],
                          capture_output=True, text=True, timeout=1200, check=False)
    assert out.exists(), proc.stdout + proc.stderr
    data = json.loads(out.read_text(encoding="utf-8"))
    assert proc.returncode == (0 if all(r["status"] == "ok" for r in data["results"]) else 1)
    return data


def test_small_integer_inputs_keep_derived_inputs_consistent_and_exact() -> None:
    task = load_task("kmeans_assign")
    dims = {"B": 1, "N": 40, "K": 16}
    host = task.inputs(dims, SmallIntegers(np.random.default_rng(0)))
    x, c, cn = (np.asarray(host[k], dtype=np.float64) for k in ("X", "C", "Cn"))
    assert np.array_equal(c, np.round(c)) and np.array_equal(x * 2, np.round(x * 2))
    assert np.array_equal(cn, (c ** 2).sum(-1))  # still the centroids' norms


@needs_cxx
@pytest.mark.slow
def test_the_emulation_side_alone_passes_on_an_example(tmp_path: Path) -> None:
    data = _run(tmp_path, "--no-gpu", "--no-tactics", "--only", "tinygemm", "--jobs", "2")
    (first, second) = data["results"]
    assert first["status"] == second["status"] == "ok", data
    for run in first["runs"]:
        (o,) = run["outputs"].values()
        assert o["lazy_correct"] and o["eager_correct"] and o["lazy_vs_eager"]["equal"]
        assert "gpu_vs_emulation" not in o


@needs_cxx
@pytest.mark.gpu
@pytest.mark.slow
@pytest.mark.skipif(not (probe_gpu().present and available_backends()),
                    reason="needs an NVIDIA GPU and pycuda or torch")
def test_every_example_writes_the_same_bytes_on_the_gpu_and_under_emulation(
        tmp_path: Path) -> None:
    data = _run(tmp_path, "--no-tactics")
    bad = [(r["label"], r["dims"], r["status"]) for r in data["results"] if r["status"] != "ok"]
    assert not bad
    exact = [o["gpu_vs_emulation"] for r in data["results"] for run in r["runs"]
             if run["inputs"] == "exact" for o in run["outputs"].values()]
    assert exact and all(c["equal"] for c in exact)
