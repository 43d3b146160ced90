"""Helpers for the agent tests (importable because conftest puts this folder on the path)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
GEMM = (ROOT / "examples" / "gemm_sm90.cake").read_text()
TASK = "gemm_bf16"
FAST_GATES = ("static", "sim", "cost")
"""Tests leave out the compile gate (seconds per kernel with nvcc); test_gates covers it."""

#: A kernel the language server flags (CK102) and offers a quick fix for.
TYPO = GEMM.replace("wgmma_wait(0)", "wgmma_wiat(0)", 1)
#: A kernel with an error the server has no fix for (CK103: a missing argument).
MISSING_BAR = GEMM.replace("tma_load(sa[s], A.tile((BM, BK), (block.x, k)), ab)",
                           "tma_load(sa[s], A.tile((BM, BK), (block.x, k)))", 1)
#: A kernel whose errors (CK105: wgmma's `b` not transposed) the server fixes safely.
NO_TRANSPOSE = GEMM.replace("wgmma(acc, sa[s], sb[s].T)", "wgmma(acc, sa[s], sb[s])")
assert TYPO != GEMM and MISSING_BAR != GEMM and NO_TRANSPOSE != GEMM


def fenced(text: str, prose: str = "Here is the kernel.") -> str:
    return f"{prose}\n\n```python\n{text}```\n"


def config(run_dir: Path, **kw: Any) -> Any:
    from cake_agents.config import EvolveConfig

    base: dict[str, Any] = {"task": TASK, "run_dir": str(run_dir), "executor": "inline",
                            "budget_evals": 4, "sim_schedules": 1,
                            "model_backoff_s": 0.0, "gates": FAST_GATES}
    base.update(kw)
    return EvolveConfig(**base)


def run(run_dir: Path, lsp: Any, *, client: Any = None, write_report: bool = False,
        **kw: Any) -> Any:
    """One small run in-process with the shared language server."""
    from cake_agents.executor import InlineExecutor
    from cake_agents.run import evolve

    return evolve(config(run_dir, **kw), model=client, executor=InlineExecutor(), lsp=lsp,
                  write_report=write_report)


def store(run_dir: Path) -> Any:
    from cake_agents.store import RunsStore

    return RunsStore(run_dir / "runs.sqlite")
