"""The model sees what an editor user sees: diagnostics with their fixes, the primitives'
hover text and the tactics offered as code actions, all from `cake lsp`; and a safe fix
is applied by the repairer without asking the model."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agent_support import GEMM, MISSING_BAR, NO_TRANSPOSE, TYPO, fenced, run, store

from cake_agents.context import content_hash
from cake_agents.editor_view import (
    call_sites,
    condense_hover,
    parent_view,
    render,
    tactic_lines,
)
from cake_agents.models import ScriptedModel


def test_the_editor_view_of_a_kernel(lsp: Any) -> None:
    uri = lsp.uri_for("editor-view-gemm")
    view = parent_view(lsp, uri, GEMM)
    assert view.diagnostics == []
    assert view.hovers["tma_load"].startswith("tma_load(dst, src, bar, multicast=0): ")
    assert view.hovers["wgmma"].startswith("wgmma(acc, a, b, accumulate=True): ")
    assert any(t.startswith("CAKE stages ") for t in view.tactics)
    text = render(view, GEMM)
    assert "(the editor's hover text)" in text and "offers as code actions" in text
    # a name in a comment is not a call site; the first call of each name is
    assert all(name != "is" for name, _, _ in call_sites("x = 1  # this is (a comment)\n"))
    assert condense_hover("```cake\nkernel gemm\n```\nfacts") == ""


def test_coder_prompt_carries_hovers_and_tactic_actions(run_dir: Path, lsp: Any) -> None:
    variant = GEMM.replace("STAGES = 4", "STAGES = 3", 1)
    model = ScriptedModel([fenced(variant, "A shallower ring.")])
    run(run_dir, lsp, client=model, budget_evals=2, batch=1, patience=1)
    prompt = model.calls[0][-1]["content"]
    assert "What the editor shows for the parent kernel." in prompt
    assert "- tma_load(dst, src, bar, multicast=0): " in prompt and "- wgmma_wait(n=0): " in prompt
    assert "\n- stages {\"stages\"=" in prompt
    assert "Begin with one or two sentences stating your intent" in model.calls[0][0]["content"]


def test_safe_fix_is_applied_without_a_model_call(run_dir: Path, lsp: Any) -> None:
    variant = GEMM.replace("STAGES = 4", "STAGES = 3", 1)
    broken = NO_TRANSPOSE.replace("STAGES = 4", "STAGES = 3", 1)
    model = ScriptedModel([fenced(broken)])
    summary = run(run_dir, lsp, client=model, budget_evals=2, batch=1, max_repairs=1,
                  patience=1)
    s = store(run_dir)
    diags = s.diagnostics(summary.run_id, content_hash(broken))
    assert {d["code"] for d in diags} == {"CK105"} and all(d["has_fix"] for d in diags)
    fixed = s.candidate(summary.run_id, content_hash(variant))
    assert fixed is not None and fixed["origin"] == "repairer"
    assert {r["gate"]: r["status"] for r in s.evaluations(summary.run_id,
                                                          content_hash(variant))}["sim"] == "pass"
    assert len(model.calls) == 1  # the coder's; the repair cost no model call
    assert [u["node"] for u in s.usage(summary.run_id)] == ["coder"]


def test_repair_prompt_offers_the_unsafe_fix_to_the_model(run_dir: Path, lsp: Any) -> None:
    broken = TYPO.replace("STAGES = 4", "STAGES = 3", 1)
    better = GEMM.replace("STAGES = 4", "STAGES = 3", 1)
    model = ScriptedModel([fenced(broken), fenced(better, "Call wgmma_wait, as the server says.")])
    summary = run(run_dir, lsp, client=model, budget_evals=2, batch=1, max_repairs=1,
                  patience=1)
    prompt = model.calls[1][-1]["content"]
    assert "[CK102]" in prompt and "quick fixes offered: call `wgmma_wait`" in prompt
    fixed = store(run_dir).candidate(summary.run_id, content_hash(better))
    assert fixed is not None and fixed["intent"] == "Call wgmma_wait, as the server says."


def test_repair_prompt_carries_the_hover_of_the_failing_line(run_dir: Path, lsp: Any) -> None:
    better = GEMM.replace("STAGES = 4", "STAGES = 3", 1)
    broken = MISSING_BAR.replace("STAGES = 4", "STAGES = 3", 1)
    model = ScriptedModel([fenced(broken), fenced(better)])
    run(run_dir, lsp, client=model, budget_evals=2, batch=1, max_repairs=1, patience=1)
    prompt = model.calls[1][-1]["content"]
    assert "The primitives on those lines (the editor's hover text):" in prompt
    assert "- tma_load(dst, src, bar, multicast=0): " in prompt
    # only the failing line's calls: the wgmma on another line is not described
    assert "wgmma(acc, a, b" not in prompt


def test_tactic_offers_are_grouped_per_tactic() -> None:
    titles = ['CAKE stages {"stages"=2}: the copy ring has 4 stages; depth trades',
              'CAKE stages {"stages"=3}: the copy ring has 4 stages; depth tr',
              'CAKE swizzle {"buffer"="sa","swizzle"=0}: buffers whose layout',
              "an offer in another form"]
    assert tactic_lines(titles) == [
        '- stages {"stages"=2}, {"stages"=3}: the copy ring has 4 stages; depth trades',
        '- swizzle {"buffer"="sa","swizzle"=0}: buffers whose layout',
        "- an offer in another form"]
