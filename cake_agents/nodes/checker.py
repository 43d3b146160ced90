"""The checker: reads each candidate's diagnostics from `cake lsp`, as an editor does.

The candidate is opened in the language server (or changed, after a repair), its
diagnostics are pulled, and for every error the server's quick fixes are fetched with a
code-action request, with the server's `source.fixAll` action (every safe fix) beside
them; with a model, the hover text of the primitives on the failing lines is read too,
for the repair prompt.  Errors become recorded failures (gate `check`); a candidate with
errors is marked repairable when the server offers a fix or a model can be asked.  If the
server cannot be started at all, the same check runs in-process and the run records that
it did.
"""

from __future__ import annotations

from cake_agents.context import AgentContext
from cake_agents.editor_view import hovers
from cake_agents.lsp_client import LspDiagnostic, LspError
from cake_agents.nodes.common import Node, failure
from cake_agents.records import Candidate, Json
from cake_agents.state import EvolveState, StateUpdate


def make_checker(ctx: AgentContext) -> Node:
    def checker(state: EvolveState) -> StateUpdate:
        ctx.emit("node", name="checker", step=state.step)
        if ctx.lsp is not None:
            while ctx.lsp.messages:
                ctx.emit("warning", message=f"cake lsp: {ctx.lsp.messages.popleft()}")
        batch: list[Candidate] = []
        failures: list[Json] = []
        for checked in state.batch:
            cand = Candidate(**checked)
            if ctx.config.arm == "cuda":  # no IR, no verifier: nvcc is the first gate
                cand["diagnostics"], cand["errors"], cand["quick_fixes"] = [], 0, []
                cand["checked_by"], cand["repairable"] = "none", False
                batch.append(cand)
                continue
            diags, fixes, source, extra = _check(ctx, cand)
            errors = [d for d in diags if d["severity"] == "error"]
            ctx.store.add_diagnostics(ctx.run_id, cand["hash"], state.step,
                                      state.repair_round, source, diags)
            lines = cand["text"].splitlines()
            for i, d in enumerate(errors):
                ln = d["line"]
                failures.append(failure(
                    ctx, step=state.step, hash_=cand["hash"], gate="check", code=d["code"],
                    message=d["message"], line_text=lines[ln] if 0 <= ln < len(lines) else "",
                    move_class=cand.get("move_class", ""),
                    ordinal=1000 * state.repair_round + i))
            cand["diagnostics"], cand["errors"] = diags, len(errors)
            cand["quick_fixes"], cand["checked_by"] = fixes, source
            cand.update(extra)  # type: ignore[typeddict-item]
            # both bounds: a candidate's repairs, and the rounds of this generation (a
            # candidate the repairer gave up on comes back unchanged, its count unchanged)
            cand["repairable"] = bool(errors) and \
                cand.get("repairs", 0) < ctx.config.max_repairs and \
                state.repair_round < ctx.config.max_repairs and \
                (bool(fixes) or ctx.caller is not None)
            batch.append(cand)
        return {"batch": batch, "pending_failures": failures}

    return checker


def _check(ctx: AgentContext, cand: Candidate
           ) -> tuple[list[Json], list[Json], str, dict[str, object]]:
    if ctx.lsp is not None:
        for attempt in range(2):
            try:
                diags, fixes, extra = _via_lsp(ctx, cand)
                return diags, fixes, "lsp", extra
            except LspError as exc:
                ctx.lsp_problem = str(exc)
                if attempt == 0:
                    try:
                        ctx.lsp.start()  # the server died: one restart, then give up
                    except LspError as again:
                        ctx.lsp_problem = str(again)
                        break
        ctx.emit("warning", message=f"language server unavailable ({ctx.lsp_problem}); "
                                    "checking in-process")
    return (*_in_process(cand), "in-process", {"safe_fixes": [], "hovers": {}})


def _via_lsp(ctx: AgentContext, cand: Candidate
             ) -> tuple[list[Json], list[Json], dict[str, object]]:
    assert ctx.lsp is not None
    uri = cand["uri"]
    got: list[LspDiagnostic] = ctx.lsp.open(uri, cand["text"])
    diags: list[Json] = []
    fixes: list[Json] = []
    for i, d in enumerate(got):
        entry = d.to_json()
        if d.is_error:
            qf = ctx.lsp.quick_fixes(uri, d)
            entry["has_fix"] = bool(qf)
            fixes.extend({"diag": i, "title": f.title, "preferred": f.preferred,
                          "edits": [list(e) for e in f.edits]} for f in qf)
        diags.append(entry)
    extra: dict[str, object] = {"safe_fixes": [], "hovers": {}}
    if fixes:
        # the safe fixes go first only when one of them is an error's fix: fixing a
        # warning alone would spend a repair round and leave the errors as they were
        safe = [list(e) for e in ctx.lsp.safe_fixes(uri)]
        offered = {tuple(e) for f in fixes for e in f["edits"]}
        if any(tuple(e) in offered for e in safe):
            extra["safe_fixes"] = safe
    if ctx.caller is not None and any(d.is_error for d in got):
        extra["hovers"] = hovers(ctx.lsp, uri, cand["text"],
                                 {d.line for d in got if d.is_error})
    return diags, fixes, extra


def _in_process(cand: Candidate) -> tuple[list[Json], list[Json]]:
    from cake_core.check import check_text

    res = check_text(cand["text"], f"{cand['hash']}.cake")
    diags = [{"code": d.code, "severity": d.severity.value, "message": d.message,
              "line": d.span.start.line, "col": d.span.start.col_utf16,
              "end_line": d.span.end.line, "end_col": d.span.end.col_utf16,
              "has_fix": bool(d.fixes)} for d in res.diagnostics]
    return diags, []
