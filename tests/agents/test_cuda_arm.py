"""The controlled experiment: the cuda arm (the model writes CUDA, gated by nvcc and the
GPU runner only) and `cake experiment`, end to end with a scripted model."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from agent_support import FAST_GATES, GEMM, config, fenced, store
from click.testing import CliRunner

from cake_agents.cuda_arm import extract_cuda
from cake_agents.executor import InlineExecutor
from cake_agents.extract import MalformedOutput
from cake_agents.models import ScriptedModel
from cake_cli.main import main

needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
VARIANT = GEMM.replace("STAGES = 4", "STAGES = 3", 1)


def _parent_cu(messages: list[dict[str, str]]) -> str:
    return messages[-1]["content"].split("```cuda\n", 1)[1].split("\n```", 1)[0] + "\n"


def _answers(broken_first: bool = False) -> Any:
    """Answers either arm's prompt: a CAKE variant, or the parent .cu with a change (the
    first one not C++ at all, when `broken_first`)."""
    seen: list[int] = []

    def answer(messages: list[dict[str, str]]) -> str:
        if "```cuda" not in messages[-1]["content"]:
            return fenced(VARIANT, "A 3-stage ring.")
        seen.append(1)
        body = _parent_cu(messages)
        if broken_first and len(seen) == 1:
            return f"Intent: break it.\n\n```cuda\nthis is not C++;\n{body}```\n"
        return f"Intent: note the tile.\n\n```cuda\n// tile {len(seen)}\n{body}```\n"
    return answer


def test_the_cuda_arm_needs_a_model(tmp_path: Path) -> None:
    r = CliRunner().invoke(main, ["evolve", "gemm_bf16", "--arm", "cuda", "--run-dir",
                                  str(tmp_path)])
    assert r.exit_code == 2 and "the cuda arm has no offline policy" in r.output
    r = CliRunner().invoke(main, ["experiment", "gemm_bf16", "--arms", "cake,cuda",
                                  "--run-dir", str(tmp_path)])
    assert r.exit_code == 2 and "the cuda arm has no offline policy" in r.output
    r = CliRunner().invoke(main, ["experiment", "gemm_bf16", "--arms", "cake,triton"])
    assert r.exit_code == 2 and "unknown arm(s) triton" in r.output


def test_cuda_answers_are_extracted_or_refused() -> None:
    got = extract_cuda("Intent.\n```cuda\n__global__ void k() {}\n```\n")
    assert got.text == "__global__ void k() {}\n" and got.language == "cuda"
    with pytest.raises(MalformedOutput) as exc:
        extract_cuda("```cuda\nint x;\n```\n")
    assert exc.value.reason == "no-kernel"
    with pytest.raises(MalformedOutput) as exc:
        extract_cuda("```cuda\n__global__ void k() {\n", "length")
    assert exc.value.reason == "truncated"


@needs_nvcc
def test_cuda_arm_compiles_the_models_cuda(run_dir: Path) -> None:
    from cake_agents.run import evolve

    model = ScriptedModel([_answers(broken_first=True)])
    summary = evolve(config(run_dir, arm="cuda", budget_evals=3, batch=1, patience=2),
                     model=model, executor=InlineExecutor(), use_lsp=False,
                     write_report=False)
    s = store(run_dir)
    rows = s.evaluations(summary.run_id)
    by = {(r["hash"], r["gate"]): r for r in rows}
    compiled = [r for r in rows if r["gate"] == "cuda-compile"]
    assert [r["status"] for r in compiled].count("pass") == 2  # the seed and a good answer
    bad = [r for r in compiled if r["status"] == "fail"]
    assert len(bad) == 1 and bad[0]["detail"]["findings"][0]["code"] == "E-NVCC"
    # no IR, no verifier, no simulator: only the arm's gates ran
    assert {g for _, g in by} <= {"cuda-compile", "cuda-gpu", "_result"}
    assert s.diagnostics(summary.run_id) == []
    first = model.calls[0]
    assert "CUDA C++" in first[0]["content"] and "extern \"C\"" in first[-1]["content"]
    assert "\n#line " not in first[-1]["content"] and "do not edit" not in first[-1]["content"]
    good = [c for c in s.candidates(summary.run_id) if c["origin"] == "coder"]
    assert any((s.candidate(summary.run_id, c["hash"]) or {}).get("intent")
               == "Intent: note the tile." for c in good)


@needs_nvcc
def test_experiment_runs_both_arms_and_writes_one_table(run_dir: Path, lsp: Any) -> None:
    from cake_agents.experiment import markdown, run_experiment

    model = ScriptedModel([_answers()])
    cfg = config(run_dir, model="scripted", budget_evals=2, batch=1, patience=1,
                 budget_tokens=200_000, gates=(*FAST_GATES, "ptxas"))
    result = run_experiment(cfg, ["cake", "cuda"], 1,
                            evolve_kw={"model": model, "executor": InlineExecutor(),
                                       "lsp": lsp, "write_report": False})
    cake, cuda = result["arms"]
    assert (cake["arm"], cuda["arm"]) == ("cake", "cuda") and result["runs"][1]["arm"] == "cuda"
    assert cake["best_predicted"] is not None and cuda["best_predicted"] is None
    assert cake["compiled"] == cake["compile_tried"] == 2
    assert cuda["compiled"] >= 1 and cuda["tokens"] > 0 and cake["tokens"] > 0
    table = markdown(result)
    assert "| cake | " in table and "| cuda | - | " in table
    if not result["gpu"]:
        assert "could only compile" in table


def test_measured_speedup_is_the_geomean_over_timed_shapes() -> None:
    from cake_agents.experiment import measured_speedup

    got = measured_speedup({"measured": {"a": 1.0, "b": 4.0, "c": 1.0},
                            "measured_baseline": {"a": 2.0, "b": 4.0}})
    assert got is not None and abs(got - 2 ** 0.5) < 1e-12
    assert measured_speedup({"measured": {"a": 1.0}}) is None


def _gpu_ready() -> bool:
    from cake_core.run.device import available_backends, probe_gpu

    return probe_gpu().present and bool(available_backends())


@pytest.mark.gpu
@pytest.mark.skipif(shutil.which("nvcc") is None or not _gpu_ready(),
                    reason="needs nvcc, an NVIDIA GPU and pycuda or torch")
def test_cuda_arm_runs_the_models_cuda_on_the_gpu(run_dir: Path) -> None:
    from cake_agents.run import evolve

    small = [{"M": 256, "N": 256, "K": 256}]
    summary = evolve(config(run_dir, arm="cuda", budget_evals=2, batch=1, patience=1,
                            extra={"gpu": {"shapes": small,
                                           "timing": {"warmup": 1, "rounds": 2,
                                                      "calls": 2}}}),
                     model=ScriptedModel([_answers()]), executor=InlineExecutor(),
                     use_lsp=False, write_report=False)
    rows = store(run_dir).evaluations(summary.run_id)
    gpu = [r for r in rows if r["gate"] == "cuda-gpu"]
    assert gpu and all(r["status"] == "pass" for r in gpu)
    # timed on the small shape only: measured, though no score over every target shape
    results = [r["detail"] for r in rows if r["gate"] == "_result"]
    assert all(d["measured"].get("M=256,N=256,K=256", 0) > 0 for d in results)
