"""A scripted model writes kernels; the language server finds what is wrong; it is fixed.

Ways out of a diagnostic: the server's safe fixes (applied without a model call, see
test_editor_view.py), the model's answer given the diagnostics and the fixes offered, or,
when that changes nothing, the server's own (unsafe) quick fix.  Either way the fixed
kernel must pass the simulator against the task's reference.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agent_support import GEMM, MISSING_BAR, TYPO, fenced, run, store

from cake_agents.context import content_hash
from cake_agents.models import ScriptedModel


def _result(s: Any, run_id: str, hash_: str) -> dict[str, Any]:
    return {r["gate"]: r for r in s.evaluations(run_id, hash_)}


def test_quick_fix_from_the_server_repairs_the_model_kernel(run_dir: Path, lsp: Any) -> None:
    # the model answers the repair request with the same broken kernel: the server's
    # quick fix (not a safe one, so offered to the model first) is applied then
    model = ScriptedModel([fenced(TYPO)])
    summary = run(run_dir, lsp, client=model, budget_evals=2, batch=1, patience=1)
    s = store(run_dir)
    bad, good = content_hash(TYPO), content_hash(GEMM)
    diags = s.diagnostics(summary.run_id, bad)
    first = [d for d in diags if d["step"] == diags[0]["step"]]
    assert [(d["code"], d["source"], d["round"]) for d in first] == [("CK102", "lsp", 0)]
    assert diags[0]["has_fix"] == 1
    fixed = s.candidate(summary.run_id, good)
    assert fixed is not None and fixed["origin"] in ("seed", "repairer")
    # the repaired kernel is the original GEMM again: evaluated once (as the seed), and the
    # repair produced no second evaluation of the same text
    gates = _result(s, summary.run_id, good)
    assert gates["sim"]["status"] == "pass"
    usage = s.usage(summary.run_id)
    assert usage and usage[0]["node"] == "coder" and usage[0]["tokens_out"] > 0
    assert [u["node"] for u in usage] == ["coder", "repairer"]
    failures = s.failures(summary.run_id)
    assert any(f["gate"] == "check" and f["code"] == "CK102" for f in failures)


def test_model_repairs_when_the_server_has_no_fix(run_dir: Path, lsp: Any) -> None:
    better = GEMM.replace("STAGES = 4", "STAGES = 3", 1) if "STAGES = 4" in GEMM else \
        GEMM + "\n"
    broken = MISSING_BAR.replace("STAGES = 4", "STAGES = 3", 1)
    model = ScriptedModel([fenced(broken), fenced(better, "Fixed: the copy needs its barrier.")])
    summary = run(run_dir, lsp, client=model, budget_evals=2, batch=1, max_repairs=1,
                  patience=1)
    s = store(run_dir)
    diags = s.diagnostics(summary.run_id, content_hash(broken))
    assert diags and {d["code"] for d in diags} == {"CK103"} and diags[0]["has_fix"] == 0
    repaired = s.candidate(summary.run_id, content_hash(better))
    assert repaired is not None and repaired["origin"] == "repairer"
    assert _result(s, summary.run_id, content_hash(better))["sim"]["status"] == "pass"
    nodes = [u["node"] for u in s.usage(summary.run_id)]
    assert nodes[:2] == ["coder", "repairer"]
    # the repair prompt carried the server's diagnostic
    assert "CK103" in model.calls[1][-1]["content"]
