"""Budgets are checked before anything is spent and never exceeded."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agent_support import GEMM, fenced, run, store

from cake_agents.budget import MIN_COMPLETION, Budget, Spent, allow_call
from cake_agents.models import ScriptedModel


def _price(p: int, c: int) -> float:
    return p * 1e-6 + c * 4e-6


def test_allow_call_shrinks_the_completion_to_what_is_left() -> None:
    assert allow_call(Budget(), Spent(), 1000, 4096, _price).max_tokens == 4096
    a = allow_call(Budget(tokens=3000), Spent(tokens=0), 1000, 4096, _price)
    assert a.ok and a.max_tokens == 2000
    a = allow_call(Budget(tokens=3000), Spent(tokens=2000), 900, 4096, _price)
    assert not a.ok and "token budget" in a.reason
    a = allow_call(Budget(usd=0.01), Spent(usd=0.0), 1000, 4096, _price)
    assert a.ok and _price(1000, a.max_tokens) <= 0.01 and a.max_tokens >= MIN_COMPLETION
    a = allow_call(Budget(usd=0.01), Spent(usd=0.0095), 1000, 4096, _price)
    assert not a.ok and "dollar budget" in a.reason
    a = allow_call(Budget(usd=1.0), Spent(), 10, 100, lambda p, c: None)
    assert not a.ok and "price is unknown" in a.reason


def test_token_and_dollar_budgets_stop_the_run(run_dir: Path, lsp: Any) -> None:
    model = ScriptedModel([fenced(GEMM.replace("STAGES = 4", f"STAGES = {n}", 1))
                           for n in (3, 2, 4)] + [fenced(GEMM)], price_per_token=(1e-6, 2e-6))
    budget_tokens = 5000
    summary = run(run_dir, lsp, client=model, budget_evals=50, budget_tokens=budget_tokens,
                  budget_usd=0.5, batch=1, max_tokens=1500, patience=50)
    s = store(run_dir)
    rows = s.usage(summary.run_id)
    used = sum(r["tokens_in"] + r["tokens_out"] for r in rows)
    assert rows and used <= budget_tokens
    assert sum(r["usd"] for r in rows) <= 0.5
    assert int(summary.usage["tokens_in"] + summary.usage["tokens_out"]) == used
    assert "token budget" in summary.stop_reason
    assert len(model.calls) == len(rows)


def test_eval_budget_is_never_exceeded(run_dir: Path, lsp: Any) -> None:
    summary = run(run_dir, lsp, budget_evals=3, batch=2, patience=50)
    s = store(run_dir)
    results = [r for r in s.evaluations(summary.run_id) if r["gate"] == "_result"]
    assert summary.evals == len(results) == 3
    assert [p["seq"] for p in s.progress(summary.run_id)] == [1, 2, 3]
    assert "evaluation budget" in summary.stop_reason
