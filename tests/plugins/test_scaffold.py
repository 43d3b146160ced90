"""`cake plugins new` scaffolds a plugin that installs, passes its own tests, and whose rule
fires in `cake check` — installed into a private target folder, never into the test env."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from cake_core.plugins.scaffold import ScaffoldError, scaffold

pytestmark = pytest.mark.slow

CAKE = [sys.executable, "-m", "cake"]


def _env(site: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(site), env.get("PYTHONPATH", "")])
    return env


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    base = tmp_path_factory.mktemp("plugin")
    root = scaffold("cake-demo", base)
    site = base / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps",
                    "--target", str(site), str(root)], check=True)
    return root, site


def test_scaffolded_plugin_passes_its_own_tests(installed: tuple[Path, Path]) -> None:
    root, site = installed
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                        str(root / "tests")], env=_env(site), capture_output=True, text=True,
                       cwd=root)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "4 passed" in r.stdout


def test_its_rule_fires_in_cake_check(installed: tuple[Path, Path], tmp_path: Path) -> None:
    _, site = installed
    k = tmp_path / "k.cake"
    k.write_text(
        'M = dim("M")\n\n'
        '@kernel(arch="sm_90a", grid=(cdiv(M, 64),), warps=8)\n'
        'def k(A: Tensor[bf16, (M, 64)]):\n'
        '    sa = smem(bf16, (1, 64, 64), layout=swizzle(128))\n'
        '    p = pipeline(stages=1, producer="load", consumer="use")\n'
        '    with role("load", warps=range(0, 4)):\n'
        '        for i in range(4):\n'
        '            s = p.acquire()\n'
        '            tma_load(sa[s], A.tile((64, 64), (block.x, 0)), p)\n'
        '            p.commit()\n'
        '    with role("use", warps=range(4, 8)):\n'
        '        for i in range(4):\n'
        '            s = p.wait()\n'
        '            x = load(sa[s])\n'
        '            p.release()\n')
    r = subprocess.run([*CAKE, "check", str(k), "--format", "json"], env=_env(site),
                       capture_output=True, text=True, cwd=tmp_path)
    assert '"code": "DE101"' in r.stdout, r.stdout + r.stderr
    assert '"source": "cake-demo"' in r.stdout


def test_list_verbose_prints_provenance(installed: tuple[Path, Path]) -> None:
    _, site = installed
    r = subprocess.run([*CAKE, "plugins", "list", "--verbose"], env=_env(site),
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "cake-demo 0.1.0 (plugin API 1)" in r.stdout
    assert "single-stage-pipeline" in r.stdout and "origin: hand-written" in r.stdout
    assert "examples: tests/test_plugin.py" in r.stdout


def test_scaffold_refuses_bad_names_and_existing_folders(tmp_path: Path) -> None:
    with pytest.raises(ScaffoldError):
        scaffold("Bad Name", tmp_path)
    scaffold("cake-x", tmp_path)
    with pytest.raises(ScaffoldError):
        scaffold("cake-x", tmp_path)
