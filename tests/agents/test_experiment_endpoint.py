"""`cake experiment` end to end: both arms, as a real subprocess, against a model server.

The loopback server (`model_server.py`) answers each arm in its own language, as a model
would: the cake arm's prompt gets a small edit of the task's seed kernel, the cuda arm's
(recognised by its ```cuda parent file) gets the parent .cu back with a change.  What is
checked is what a user sees: the table, the JSON file, the exit code, and that no arm
spent more tokens than its budget.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from agent_support import GEMM, fenced
from model_server import KEY, ModelServer, Reply

pytestmark = [pytest.mark.skipif(importlib.util.find_spec("litellm") is None,
                                 reason="needs litellm"), pytest.mark.slow]

VARIANT = GEMM.replace("STAGES = 4", "STAGES = 3", 1)
BUDGET = 120_000
"""Room for a few cuda-arm calls: each one reads and writes the whole lowered GEMM."""


def _answer(body: dict[str, Any]) -> Reply:
    """A valid kernel in the language the prompt asks for."""
    prompt = str(body["messages"][-1]["content"])
    if "```cuda\n" not in prompt:
        return Reply(fenced(VARIANT, "A 3-stage ring: less shared memory, more blocks."))
    parent = prompt.split("```cuda\n", 1)[1].split("\n```", 1)[0]
    return Reply(f"Name the tile.\n\n```cuda\n// tile 128x128\n{parent}\n```\n")


def _env(tmp: Path, key: str = KEY) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("OPENAI_API_BASE", "OPENAI_BASE_URL", "CAKE_API_BASE")}
    return {**env, "OPENAI_API_KEY": key, "CAKE_CACHE_DIR": str(tmp / "cache")}


def _cake() -> list[str]:
    """The installed `cake` script, beside this interpreter."""
    exe = Path(sys.executable).parent / "cake"
    if not exe.exists():
        pytest.skip("the `cake` script is not installed beside this interpreter")
    return [str(exe)]


@pytest.mark.skipif(shutil.which("nvcc") is None,
                    reason="the cuda arm compiles the model's CUDA with nvcc, not installed")
def test_experiment_runs_both_arms_against_the_server(tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]
                                                     ) -> None:
    out = tmp_path / "experiment.json"
    with ModelServer(respond=_answer) as server:
        r = subprocess.run(
            [*_cake(), "experiment", "gemm_bf16", "--arms", "cake,cuda", "--repeats", "2",
             "--budget-tokens", str(BUDGET), "--budget-evals", "2", "--model", "openai/test",
             "--api-base", server.api_base, "--gates", "static,sim,cost,ptxas",
             "--executor", "inline", "--run-dir", str(tmp_path / "runs"), "--json", str(out)],
            env=_env(tmp_path), capture_output=True, text=True, timeout=900, cwd=tmp_path)
    with capsys.disabled():
        print(f"\n{r.stdout}{len(server.requests)} requests")
    assert r.returncode == 0, r.stdout + r.stderr
    result = json.loads(out.read_text())
    cake, cuda = result["arms"]
    assert (cake["arm"], cake["runs"], cuda["arm"], cuda["runs"]) == ("cake", 2, "cuda", 2)
    runs = result["runs"]
    assert [(x["arm"], x["repeat"]) for x in runs] == [("cake", 0), ("cake", 1),
                                                      ("cuda", 0), ("cuda", 1)]
    # each run asked the server, was charged, and stayed within its budget
    assert all(0 < x["tokens"] <= BUDGET for x in runs)
    assert len(server.requests) >= 4
    cuda_calls = [b for b in server.requests if "```cuda\n" in b["messages"][-1]["content"]]
    assert cuda_calls and len(cuda_calls) < len(server.requests)
    # the model's kernels passed: the CAKE variant checks, the CUDA compiles
    assert cake["passed"] >= 2 and cake["compiled"] == cake["compile_tried"] == 2
    assert cuda["compiled"] == cuda["compile_tried"] and cuda["compiled"] >= 2
    assert cake["best_predicted"] is not None and cuda["best_predicted"] is None
    table = r.stdout
    assert "median of 2 runs per arm" in table and f"token budget {BUDGET}" in table
    row = {line.split("|")[1].strip(): line for line in table.splitlines()
           if line.startswith("| cake |") or line.startswith("| cuda |")}
    assert set(row) == {"cake", "cuda"}
    assert f"| {cake['best_predicted']:.3f}x |" in row["cake"]
    assert row["cake"].endswith("| - |")  # litellm knows no price for openai/test
    assert f"| {cake['tokens']:.0f} |" in row["cake"] and f"| {cuda['tokens']:.0f} |" in row["cuda"]
    if not result["gpu"]:
        assert "could only compile" in table and "no GPU" in row["cuda"]
    assert f"wrote {out}" in r.stderr and "cuda #2: run " in r.stderr


def test_experiment_stops_at_a_refused_key(tmp_path: Path) -> None:
    out = tmp_path / "experiment.json"
    with ModelServer(respond=_answer) as server:
        r = subprocess.run(
            [*_cake(), "experiment", "gemm_bf16", "--arms", "cake", "--repeats", "3",
             "--model", "openai/test", "--api-base", server.api_base,
             "--gates", "static,sim,cost", "--executor", "inline",
             "--run-dir", str(tmp_path / "runs"), "--json", str(out)],
            env=_env(tmp_path, "sk-wrong-key-1234567890"), capture_output=True, text=True,
            timeout=300, cwd=tmp_path)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "refused the key" in r.stderr and "Traceback" not in r.stderr
    assert len(server.requests) == 1
    assert [x["repeat"] for x in json.loads(out.read_text())["runs"]] == [0]
