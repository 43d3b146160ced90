"""API keys never reach the runs store, the logs or the HTML report."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from agent_support import GEMM, fenced, run, store

from cake_agents.models import ModelError, ScriptedModel
from cake_agents.redact import REDACTED, scrub, scrub_obj

KEY = "sk-test-1234567890abcdefABCDEF0987654321"


def test_scrub_env_values_and_key_shapes() -> None:
    env = {"OPENAI_API_KEY": "hunter2-hunter2", "HOME": "/root", "SHORT_TOKEN": "abc"}
    text = "auth failed for hunter2-hunter2 at /root (abc)"
    assert scrub(text, env) == f"auth failed for {REDACTED} at /root (abc)"
    assert KEY not in scrub(f"Incorrect API key provided: {KEY}", {})
    assert "AKIAABCDEFGHIJKLMNOP" not in scrub("id AKIAABCDEFGHIJKLMNOP", {})
    assert scrub("Authorization: Bearer abcdefghijklmnop123", {}).endswith(REDACTED)
    assert scrub("url?api_key=supersecretvalue&x=1", {}) == f"url?api_key={REDACTED}&x=1"
    assert scrub_obj({"a": [f"x {KEY}"], "n": 3}, {}) == {"a": [f"x {REDACTED}"], "n": 3}


def test_keys_stay_out_of_store_and_report(run_dir: Path, lsp: Any,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    secret = "my-provider-secret-value-42"
    monkeypatch.setenv("ACME_API_KEY", secret)
    model = ScriptedModel([
        ModelError(f"AuthenticationError: bad key {secret} (also {KEY})", transient=False),
        fenced(GEMM.replace("STAGES = 4", "STAGES = 3", 1), f"using key {secret}")])
    summary = run(run_dir, lsp, client=model, budget_evals=2, batch=1, patience=1,
                  write_report=True)
    s = store(run_dir)
    assert any("AuthenticationError" in u["error"] for u in s.usage(summary.run_id))
    dump = "\n".join(str(row) for table in ("runs", "candidates", "usage", "failures",
                                            "evaluations", "diagnostics", "artifacts")
                     for row in s._rows(f"SELECT * FROM {table}"))
    assert REDACTED in dump
    assert secret not in dump and KEY not in dump
    assert summary.report is not None
    page = summary.report.read_text()
    assert secret not in page and KEY not in page
