"""The litellm path, offline: `mock_response` answers without any network."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path
from typing import Any

import pytest
from agent_support import GEMM, fenced, run, store


@pytest.mark.skipif(importlib.util.find_spec("litellm") is None, reason="needs litellm")
@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_litellm_mock_response_drives_a_run(run_dir: Path, lsp: Any,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    imported_before = "litellm" in sys.modules
    monkeypatch.delenv("LITELLM_LOCAL_MODEL_COST_MAP", raising=False)
    from cake_agents.models import LiteLLMClient

    better = GEMM.replace("STAGES = 4", "STAGES = 3", 1)
    client = LiteLLMClient("openai/gpt-4o-mini",
                           completion_kwargs={"mock_response": fenced(better)})
    # set before litellm was imported, so it never fetched its price table
    assert os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] == "True"
    assert imported_before or "litellm" in sys.modules
    summary = run(run_dir, lsp, client=client, budget_evals=2, batch=1, patience=1,
                  budget_usd=1.0, model="openai/gpt-4o-mini")
    s = store(run_dir)
    (call, *_) = s.usage(summary.run_id)
    assert call["ok"] and call["model"] == "openai/gpt-4o-mini"
    assert call["tokens_in"] > 0 and call["tokens_out"] > 0 and call["usd"] > 0
    assert call["hash"] == s.candidate(summary.run_id, call["hash"])["hash"]
    assert summary.usage["usd"] == pytest.approx(sum(u["usd"] for u in s.usage(summary.run_id)))
    assert summary.evals == 2
