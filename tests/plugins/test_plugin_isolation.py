"""Faulty third-party plugins, installed for real (entry points in a private folder), are
isolated in `cake check`: a rule that raises, one that loops forever and one that
allocates without bound are each reported once, by name, and disabled, while the healthy
plugin and CAKE's own rules go on.  Third-party rules run in a worker process with a
memory limit (`cake_core.plugins.sandbox`); plugins given in process are not isolated."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from faulty_plugins import FAULTY, MEMORY_MB, write_site

from cake_core.plugins import Plugin, RuleItem, load_plugins
from cake_core.plugins.sandbox import MEMORY_ENV

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
CAKE = [sys.executable, "-m", "cake"]
KERNEL = """
M = dim("M")

@kernel(arch="sm_90a", grid=(cdiv(M, 128),), warps=4)
def {name}(A: Tensor[f32, (M, 64)], B: Tensor[f32, (M, 64)]):
    x = load(A.tile((128, 64), (block.x, 0)))
    store(B.tile((128, 64), (block.x, 0)), x)
"""


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_site(tmp_path_factory.mktemp("plugins") / "site")


def _env(site: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(ROOT)]),
            MEMORY_ENV: MEMORY_MB}


def test_each_faulty_plugin_is_reported_once_and_the_check_goes_on(site: Path,
                                                                   tmp_path: Path) -> None:
    for i in range(3):  # three files, two kernels each: one report per plugin, not per file
        (tmp_path / f"k{i}.cake").write_text(KERNEL.format(name=f"a{i}")
                                             + KERNEL.format(name=f"b{i}").split("\n", 2)[2])
    t0 = time.perf_counter()
    r = subprocess.run([*CAKE, "check", str(tmp_path), "--format", "json"], env=_env(site),
                       capture_output=True, text=True, cwd=tmp_path, timeout=300)
    elapsed = time.perf_counter() - t0
    assert "Traceback" not in r.stdout + r.stderr
    diags = json.loads(r.stdout)["diagnostics"]
    failures = [d["message"] for d in diags if d["code"] == "CK902"]
    assert len(failures) == len(FAULTY), failures
    by_plugin = {p: [m for m in failures if f"plugin rule {p}:" in m] for p in FAULTY}
    assert all(len(v) == 1 for v in by_plugin.values()), by_plugin
    assert "raised RuntimeError: plugin bug" in by_plugin["faulty-raise"][0]
    assert "ran longer than 1 s" in by_plugin["faulty-loop"][0]
    assert f"exceeded its memory limit ({MEMORY_MB} MiB)" in by_plugin["faulty-alloc"][0]
    notes = [d for d in diags if d["code"] == "GP101"]
    assert len(notes) == 6 and all(d["source"] == "good-plugin" for d in notes)
    assert elapsed < 120, "bounded: the loop and the allocation are stopped"


def test_plugins_given_in_process_are_not_isolated() -> None:
    p = Plugin("in-process", "1.0", rules=(RuleItem("r", (), lambda prog, src: []),))
    ps = load_plugins(include_installed=False, extra=[p])
    assert ps.isolated == set()
    assert ps.rules()[-1][1].check is p.rules[0].check


def test_first_party_plugins_run_in_process_and_start_no_worker() -> None:
    """The shipped plugins are entry points of CAKE's own distribution: trusted, so a
    check with only them pays nothing for isolation."""
    from cake_core.plugins.sandbox import worker_starts

    before = worker_starts()
    ps = load_plugins()
    assert {"cake-kmeans", "cake-tactics"} <= {p.name for p in ps.plugins}
    assert ps.isolated == set() and worker_starts() == before
