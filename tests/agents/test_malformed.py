"""Malformed model output is a recorded failure and a retry, never a crash."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from agent_support import GEMM, fenced, run, store

from cake_agents.context import content_hash
from cake_agents.extract import MalformedOutput, extract_kernel
from cake_agents.models import ModelError, ScriptedModel


@pytest.mark.parametrize(("answer", "finish", "reason"), [
    ("", "stop", "empty"),
    ("I cannot write that kernel.", "stop", "no-code-block"),
    ("```python\n@kernel(arch='sm_90a')\ndef k(", "length", "truncated"),
    ("```python\nx = 1\n```", "stop", "no-kernel"),
    ("```python\n@kernel()\x00\x00\n```", "stop", "garbage"),
])
def test_extract_rejects(answer: str, finish: str, reason: str) -> None:
    with pytest.raises(MalformedOutput) as err:
        extract_kernel(answer, finish)
    assert err.value.reason == reason


def test_extract_takes_the_longest_python_block() -> None:
    got = extract_kernel("```bash\nls\n```\n```python\nx = 1\n```\n" + fenced(GEMM))
    assert got.text == GEMM


DOCUMENTED = GEMM + '\nUSAGE = """\n```\ngemm(A, B, C)\n```\n"""\n'
"""A kernel whose text holds a fence line: only a longer fence can hold it whole."""


def _indented(text: str, prefix: str) -> str:
    return "".join(prefix.rstrip() + line if line == "\n" else prefix + line
                   for line in text.splitlines(keepends=True))


@pytest.mark.parametrize(("answer", "kernel"), [
    ("Here:\n\n~~~python\n" + GEMM + "~~~\n", GEMM),
    ("1. The kernel:\n\n   ```python\n" + _indented(GEMM, "   ") + "   ```\n", GEMM),
    ("````python\n" + DOCUMENTED + "````\n", DOCUMENTED),
    (fenced(GEMM).replace("\n", "\r\n"), GEMM),
    ("> ```python\n" + _indented(GEMM, "> ") + "> ```\n", GEMM),
], ids=["tildes", "in-a-list", "longer-fence", "crlf", "in-a-quote"])
def test_extract_reads_every_markdown_fence(answer: str, kernel: str) -> None:
    assert extract_kernel(answer, "stop").text == kernel


def test_a_closed_block_of_another_language_is_not_a_truncated_answer() -> None:
    with pytest.raises(MalformedOutput) as err:
        extract_kernel("```bash\nls\n```\n", "stop")
    assert err.value.reason == "no-code-block"


def test_garbage_then_a_kernel(run_dir: Path, lsp: Any) -> None:
    better = GEMM.replace("STAGES = 4", "STAGES = 3", 1)
    model = ScriptedModel(["Sorry, I can't help with that.",
                           "```python\n@kernel(arch='sm_90a', grid=(1,), warps=4)\ndef k(",
                           ModelError("RateLimitError: slow down", transient=True),
                           "\x00\x01\x02 garbage \xff",
                           fenced(better)],
                          finish_reasons=["stop", "length", "stop", "stop", "stop"])
    summary = run(run_dir, lsp, client=model, budget_evals=2, batch=1, patience=1,
                  model_retries=4)
    s = store(run_dir)
    codes = [f["code"] for f in s.failures(summary.run_id) if f["gate"] == "model"]
    assert codes == ["E-NO-CODE-BLOCK", "E-TRUNCATED", "E-NO-CODE-BLOCK"]
    usage = s.usage(summary.run_id)
    assert [u["ok"] for u in usage[:5]] == [1, 1, 0, 1, 1]
    assert "RateLimitError" in usage[2]["error"]
    assert s.candidate(summary.run_id, content_hash(better)) is not None
    assert summary.evals == 2
    # the retry told the model what was wrong with its previous answer
    assert "no ```python code block" in model.calls[1][-1]["content"]
