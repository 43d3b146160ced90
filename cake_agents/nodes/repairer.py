"""The repairer: fixes what the checker found, preferring the server's own fixes.

For each candidate with errors it first applies the language server's safe fixes (its
`source.fixAll` code action, the same edits as `cake check --fix`): a safe fix never
needs a model call.  Then, with a model, the model gets the kernel with its diagnostics,
the quick fixes the server offers for them (unsafe ones: a suggestion, not a certainty)
and the hover text of the primitives on the failing lines, and answers with a corrected
file.  Without a model, or when the model gives nothing usable, the server's quick fixes
are applied (the preferred one per diagnostic, else the first; overlapping edits are left
for the next round, where the server offers them again).  The repaired text is a new
candidate (new hash, same parent) that goes back to the checker.
"""

from __future__ import annotations

from typing import Any

from cake_agents.context import AgentContext
from cake_agents.extract import MalformedOutput, extract_kernel, intent_of
from cake_agents.lsp_client import apply_lsp_edits
from cake_agents.nodes.common import Node, failure, merge_usage, new_candidate, spent, usage_delta
from cake_agents.prompts import RETRY_NOTES, repair_messages
from cake_agents.records import Candidate, Json
from cake_agents.state import EvolveState, StateUpdate


def apply_quick_fixes(text: str, fixes: list[dict[str, Any]]) -> tuple[str, list[str]]:
    """One fix per diagnostic (preferred first), skipping edits that overlap a taken one."""
    by_diag: dict[int, dict[str, Any]] = {}
    for f in fixes:
        cur = by_diag.get(f["diag"])
        if cur is None or (f["preferred"] and not cur["preferred"]):
            by_diag[f["diag"]] = f
    taken: list[tuple[tuple[int, int], tuple[int, int]]] = []
    edits: list[tuple[int, int, int, int, str]] = []
    titles: list[str] = []
    for f in by_diag.values():
        spans = [((e[0], e[1]), (e[2], e[3])) for e in f["edits"]]
        if any(a < y and x < b for a, b in spans for x, y in taken):
            continue
        taken.extend(spans)
        edits.extend(tuple(e) for e in f["edits"])
        titles.append(f["title"])
    return (apply_lsp_edits(text, edits) if edits else text), titles


def make_repairer(ctx: AgentContext) -> Node:
    def repairer(state: EvolveState) -> StateUpdate:
        ctx.emit("node", name="repairer", step=state.step)
        batch: list[Candidate] = []
        failures: list[Json] = []
        usage: dict[str, dict[str, float]] = {}
        attempt = 100 * (state.repair_round + 1)
        repaired = 0
        for idx, cand in enumerate(state.batch):
            if not cand.get("repairable"):
                batch.append(cand)
                continue
            text, how, intent = cand["text"], list[str](), ""
            if cand.get("safe_fixes"):
                text = apply_lsp_edits(cand["text"], [tuple(e) for e in cand["safe_fixes"]])
                titles = sorted({f["title"] for f in cand.get("quick_fixes", [])
                                 if f["preferred"]})
                how = [f"safe fix: {t}" for t in titles] or ["safe fixes (source.fixAll)"]
            if text == cand["text"] and ctx.caller is not None:
                new_text, used, fails, attempt, answered = _ask_model(ctx, state, cand, usage,
                                                                      attempt)
                usage = used
                failures.extend(fails)
                if new_text is not None:
                    (text, intent), how = new_text, ["model repair"]
            if text == cand["text"] and cand.get("quick_fixes"):
                text, titles = apply_quick_fixes(cand["text"], cand["quick_fixes"])
                how = [f"quick fix: {t}" for t in titles]
            if text == cand["text"]:
                given_up: Candidate = {**cand, "repairable": False}
                batch.append(given_up)
                continue
            fixed = new_candidate(
                ctx, step=state.step, idx=idx, text=text, parent=cand["parent"],
                tactic=cand["tactic"], params=cand["params"], origin="repairer",
                rationale=cand.get("rationale", ""), move=cand.get("move", ""),
                move_class=cand.get("move_class", ""), repairs=cand.get("repairs", 0) + 1,
                uri=cand["uri"], intent=intent or cand.get("intent", ""))
            fixed["fixes"] = [*cand.get("fixes", []), *how]
            fixed["repaired_from"] = cand["hash"]
            if how == ["model repair"]:
                ctx.store.set_usage_hash(ctx.run_id, state.step, "repairer", answered,
                                         fixed["hash"])
            batch.append(fixed)
            repaired += 1
        return {"batch": batch, "repair_round": state.repair_round + 1,
                "pending_failures": failures, "usage": usage,
                "proposed": state.proposed + repaired}

    return repairer


def _ask_model(ctx: AgentContext, state: EvolveState, cand: Candidate,
               usage: dict[str, dict[str, float]], attempt: int
               ) -> tuple[tuple[str, str] | None, dict[str, dict[str, float]],
                          list[dict[str, Any]], int, int]:
    """((fixed text, the model's stated intent) or None, usage, failures, next attempt
    number, the answering attempt)"""
    assert ctx.caller is not None
    failures: list[dict[str, Any]] = []
    note = ""
    offered: dict[int, list[str]] = {}
    for f in cand.get("quick_fixes", []):
        offered.setdefault(int(f["diag"]), []).append(str(f["title"]))
    errors = [{**d, "fixes": offered.get(i, [])} for i, d in enumerate(cand["diagnostics"])
              if d["severity"] == "error"]
    for _ in range(ctx.config.model_retries + 1):
        messages = repair_messages(text=cand["text"], diagnostics=errors, memory=state.memory,
                                   retry_note=note, hovers=cand.get("hovers"))
        outcome = ctx.caller.call(messages, node="repairer", step=state.step,
                                  first_attempt=attempt,
                                  spent=spent(ctx, merge_usage(state.usage, usage),
                                              state.evals))
        attempt += max(1, len(outcome.records))
        usage = merge_usage(usage, usage_delta("repairer", outcome))
        if outcome.reply is None:
            failures.append(failure(ctx, step=state.step, hash_=cand["hash"], gate="model",
                                    code="E-MODEL", message=outcome.stopped, ordinal=attempt))
            return None, usage, failures, attempt, -1
        try:
            got = extract_kernel(outcome.reply.text, outcome.reply.finish_reason)
        except MalformedOutput as exc:
            ctx.caller.judge(False, exc.reason)
            failures.append(failure(ctx, step=state.step, hash_=cand["hash"], gate="model",
                                    code=f"E-{exc.reason.upper()}", message=exc.detail,
                                    ordinal=outcome.reply.attempt))
            note = RETRY_NOTES.get(exc.reason, RETRY_NOTES["no-code-block"])
            continue
        ctx.caller.judge(True)
        return ((got.text, intent_of(outcome.reply.text)), usage, failures, attempt,
                outcome.reply.attempt)
    return None, usage, failures, attempt, -1
