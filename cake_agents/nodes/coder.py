"""The coder: writes the generation's candidate kernels.

Offline it applies the planner's tactic moves to their parents (a tactic that declines is
a recorded failure).  With a model it asks for a full kernel in a ```python block; an
answer without a usable block (none, cut off, empty, garbage) is a recorded failure and
the request is repeated with a note saying what was wrong, within the retry and budget
limits.  Every candidate's text goes to the runs store before the node returns, with what
a reader needs to follow it: a chain's steps (each with the kernel after it), a model's
stated intent.

The model's prompt carries what the editor shows for the parent (`editor_view.py`), read
from the same language server the checker talks to; when the server is not available,
the prompt goes without it.
"""

from __future__ import annotations

from typing import Any

from cake_agents import cuda_arm
from cake_agents.context import AgentContext
from cake_agents.editor_view import parent_view, render
from cake_agents.extract import MalformedOutput, extract_kernel, intent_of
from cake_agents.lsp_client import LspError
from cake_agents.nodes.common import Node, failure, merge_usage, new_candidate, spent, usage_delta
from cake_agents.prompts import RETRY_NOTES, coder_messages, memory_text
from cake_agents.records import Candidate, Json, Plan
from cake_agents.state import EvolveState, StateUpdate
from cake_agents.tactic_lab import CHAIN, Move, TacticLab


def make_coder(ctx: AgentContext) -> Node:
    def coder(state: EvolveState) -> StateUpdate:
        ctx.emit("node", name="coder", step=state.step)
        plan = state.plan
        kind = plan.get("kind")
        if kind == "seed":
            cand = new_candidate(ctx, step=state.step, idx=0, text=ctx.info.seed_text,
                                 parent=None, tactic="seed", params={}, origin="seed",
                                 rationale=f"the seed kernel ({ctx.info.seed_path})")
            return {"batch": [cand], "proposed": state.proposed + 1}
        if kind == "tactics":
            return _tactics(ctx, state, plan)
        if kind == "model":
            return _model(ctx, state, plan)
        return {"batch": []}

    return coder


def _tactics(ctx: AgentContext, state: EvolveState, plan: Plan) -> StateUpdate:
    lab = ctx.policy.lab
    batch: list[Candidate] = []
    failures: list[Json] = []
    for i, m in enumerate(plan.get("moves", [])):
        parent_text = ctx.text_of(m["parent"])
        move = Move(m["tactic"], dict(m["params"]))
        applied = lab.apply(parent_text, move) if parent_text is not None else None
        if applied is None:
            failures.append(failure(ctx, step=state.step, hash_=m["parent"], gate="coder",
                                    code="E-TACTIC", message=f"tactic {m['move']} declined "
                                    "to rewrite this kernel", move_class=m["move_class"],
                                    ordinal=i))
            continue
        text, why = applied
        steps = _chain_steps(lab, parent_text or "", move) if move.tactic == CHAIN else None
        batch.append(new_candidate(ctx, step=state.step, idx=i, text=text, parent=m["parent"],
                                   tactic=m["tactic"], params=m["params"], origin="coder",
                                   rationale=why, move=m["move"], move_class=m["move_class"],
                                   steps=steps))
    return {"batch": batch, "pending_failures": failures, "proposed": state.proposed +
            len(batch)}


def _chain_steps(lab: TacticLab, text: str, chain: Move) -> list[dict[str, Any]] | None:
    """A chain's steps, each with its rationale and the kernel it leaves (the lab caches
    every application, so this costs what building the chain did)."""
    out: list[dict[str, Any]] = []
    for step in chain.steps:
        got = lab.apply(text, step)
        if got is None:
            return None
        text, why = got
        out.append({"tactic": step.tactic, "params": step.params, "rationale": why,
                    "text": text})
    return out


def editor_text(ctx: AgentContext, hash_: str, text: str) -> str:
    """What the editor shows for a kernel, rendered for a prompt ("" without a server)."""
    if ctx.lsp is None:
        return ""
    try:
        view = parent_view(ctx.lsp, ctx.lsp.uri_for(f"{ctx.run_id}-parent-{hash_[:12]}"),
                           text)
    except LspError as exc:
        ctx.emit("warning", message=f"no editor view for the prompt: {exc}")
        return ""
    return render(view, text)


def _model(ctx: AgentContext, state: EvolveState, plan: Plan) -> StateUpdate:
    assert ctx.caller is not None
    parent = plan["parent"]
    parent_text = ctx.text_of(parent) or ctx.info.seed_text
    bucket = plan.get("bucket")
    shapes = [f"{s.key} (weight {s.weight:g})" for s in ctx.target_shapes(bucket)]
    entry = state.population.get(parent, {})
    usage: dict[str, dict[str, float]] = {}
    failures: list[Json] = []
    batch: list[Candidate] = []
    attempt = 0
    note = ""
    tries = ctx.config.model_retries + 1
    cuda = ctx.config.arm == "cuda"  # the controlled experiment's other arm (cuda_arm.py)
    editor = "" if cuda else editor_text(ctx, parent, parent_text)
    extract = cuda_arm.extract_cuda if cuda else extract_kernel
    for idx in range(int(plan.get("n", 1))):
        for _ in range(tries):
            messages = cuda_arm.messages(
                task_name=ctx.info.name, description=ctx.info.task.description,
                shapes=shapes, arch=ctx.info.arch, parent_text=parent_text,
                memory_text=memory_text(state.memory), retry_note=note) if cuda else \
                coder_messages(
                task_name=ctx.info.name, description=ctx.info.task.description,
                shapes=shapes, parent_text=parent_text,
                bottleneck=plan.get("bottleneck", ""), hot_lines=entry.get("hot_lines", []),
                hints=plan.get("hints", []), memory=state.memory, retry_note=note,
                editor=editor)
            outcome = ctx.caller.call(messages, node="coder", step=state.step,
                                      first_attempt=attempt,
                                      spent=spent(ctx, merge_usage(state.usage, usage),
                                                  state.evals))
            attempt += max(1, len(outcome.records))
            usage = merge_usage(usage, usage_delta("coder", outcome))
            if outcome.reply is None:
                failures.append(failure(ctx, step=state.step, hash_=parent, gate="model",
                                        code="E-MODEL", message=outcome.stopped,
                                        ordinal=attempt))
                done = _done(state, batch, failures, usage)
                if outcome.budget_spent:
                    done["done"], done["stop_reason"] = True, outcome.stopped
                return done
            try:
                got = extract(outcome.reply.text, outcome.reply.finish_reason)
            except MalformedOutput as exc:
                ctx.caller.judge(False, exc.reason)
                failures.append(failure(ctx, step=state.step, hash_=parent, gate="model",
                                        code=f"E-{exc.reason.upper()}", message=exc.detail,
                                        ordinal=outcome.reply.attempt))
                note = cuda_arm.RETRY_NOTE if cuda else \
                    RETRY_NOTES.get(exc.reason, RETRY_NOTES["no-code-block"])
                continue
            ctx.caller.judge(True)
            cand = new_candidate(ctx, step=state.step, idx=idx, text=got.text, parent=parent,
                                 tactic="model", params={"model": ctx.caller.client.name},
                                 origin="coder", rationale=plan.get("reason", ""),
                                 intent=intent_of(outcome.reply.text))
            ctx.store.set_usage_hash(ctx.run_id, state.step, "coder",
                                     outcome.reply.attempt, cand["hash"])
            batch.append(cand)
            note = ""
            break
    return _done(state, batch, failures, usage)


def _done(state: EvolveState, batch: list[Candidate], failures: list[Json],
          usage: dict[str, dict[str, float]]) -> StateUpdate:
    return {"batch": batch, "pending_failures": failures, "usage": usage,
            "proposed": state.proposed + len(batch)}
