"""Code actions: every fix of a diagnostic as a quick fix, every tactic as a refactoring.

The edits come from `Diagnostic.data`, where they were put when the diagnostic was sent
(already in protocol ranges, with the document version they apply to).  A fix computed
for an older version of the text is not offered: its ranges may no longer point at the
right characters.  Clients that do not send `data` back get the fixes of the current
check result for the same code and range.  A fix is the preferred action when it is
safe and the only safe one; display-only fixes are never offered as edits.
`source.fixAll` applies every safe fix that one pass of `cake check --fix` would
(`cake_core.fix.fixes_to_apply`), so the editor and the command line agree.

Tactics that apply to the kernel under the cursor are offered as `refactor.rewrite`
actions (a few parameter sets each).  Their rewrite is computed only when one is chosen,
in `codeAction/resolve`, which re-verifies the rewritten kernel (as `cake.applyTactic`
does): a move that would not verify comes back disabled, with the reason.
"""

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING, Any

from lsprotocol import types as lsp

from cake_core.diagnostics.model import Applicability
from cake_core.fix import fixes_to_apply, merged_edits
from cake_lsp.convert import FixData, fix_data, range_key, read_fix_data

if TYPE_CHECKING:
    from cake_lsp.documents import OpenDocument
    from cake_lsp.server import CakeLanguageServer

_QUICKFIX = lsp.CodeActionKind.QuickFix
_FIX_ALL = lsp.CodeActionKind.SourceFixAll
_REFACTOR = lsp.CodeActionKind.RefactorRewrite
#: Parameter sets offered per tactic (the rest stay reachable through cake.applyTactic).
VARIANTS_PER_TACTIC = 3


async def code_action(ls: CakeLanguageServer,
                      params: lsp.CodeActionParams) -> list[lsp.CodeAction]:
    actions = _fix_actions(ls, params)
    only = params.context.only
    if only is None or any(_REFACTOR.value.startswith(k) for k in only):
        actions.extend(await _tactic_actions(ls, ls.document(params.text_document.uri),
                                             params.range.start.line))
    return actions


async def _tactic_actions(ls: CakeLanguageServer, doc: OpenDocument,
                          line: int) -> list[lsp.CodeAction]:
    result = doc.result
    if result is None or result.errors or doc.stamp is None or doc.stamp[0] != doc.version:
        return []  # rewrite only kernels that verify: a tactic's output must verify too
    program = await ls.program(result)
    if program is None:
        return []
    kernel = next((k for k in program.kernels
                   if k.span.start.line <= line <= k.span.end.line), None)
    if kernel is None:
        return []
    key = (doc.version, kernel.name)
    cached = getattr(doc, "_tactics", None)
    if cached is None or cached[0] != key:
        def work() -> list[tuple[str, str, list[dict[str, Any]]]]:
            out = []
            for _, t in ls.plugins.tactics():
                try:
                    why = t.applies(kernel, result.source)
                    variants = list(t.variants(kernel, result.source))[:VARIANTS_PER_TACTIC] \
                        if why else []
                except Exception:  # a faulty plugin tactic is left out, not fatal
                    continue
                if why and variants:
                    out.append((t.name, why, variants))
            return out

        found = await asyncio.get_running_loop().run_in_executor(ls.checker.executor, work)
        cached = (key, found)
        doc._tactics = cached  # type: ignore[attr-defined]
    actions = []
    for name, why, variants in cached[1]:
        for v in variants:
            data = {"cake_tactic": {"uri": doc.uri, "tactic": name, "params": v,
                                    "kernel": kernel.name}}
            title = f"CAKE {name} {json.dumps(v, separators=(',', '='))}: {why}"
            actions.append(lsp.CodeAction(title=title[:120], kind=_REFACTOR, data=data))
    return actions


async def resolve(ls: CakeLanguageServer, action: lsp.CodeAction) -> lsp.CodeAction:
    """Compute a tactic action's edit (quick fixes arrive already resolved)."""
    spec = action.data.get("cake_tactic") if isinstance(action.data, dict) else None
    if not isinstance(spec, dict):
        return action
    from cake_lsp.features.commands import run_apply_tactic

    try:
        out = await run_apply_tactic(ls, [spec])
    except Exception as exc:  # does not apply any more, or would not verify
        action.disabled = lsp.CodeActionDisabled(reason=str(exc))
        return action
    action.edit = out["edit"]
    return action


def _fix_actions(ls: CakeLanguageServer, params: lsp.CodeActionParams) -> list[lsp.CodeAction]:
    doc = ls.document(params.text_document.uri)
    only = params.context.only
    actions: list[lsp.CodeAction] = []
    if only is None or any(_QUICKFIX.value.startswith(k) for k in only):
        for d in params.context.diagnostics:
            fixes = _fixes(ls, doc, d)
            safe = [f for f in fixes if f.applicability is Applicability.SAFE]
            for f in fixes:
                if f.applicability is Applicability.DISPLAY_ONLY:
                    continue
                preferred = f.applicability is Applicability.SAFE and len(safe) == 1
                actions.append(lsp.CodeAction(
                    title=f.title, kind=_QUICKFIX, diagnostics=[d],
                    edit=_edit(ls, doc, f.edits),
                    is_preferred=True if preferred and _preferred_support(ls) else None))
    if only is not None and any(_FIX_ALL.value.startswith(k) for k in only):
        action = _fix_all(ls, doc)
        if action is not None:
            actions.append(action)
    return actions


def _fixes(ls: CakeLanguageServer, doc: OpenDocument, d: lsp.Diagnostic) -> list[FixData]:
    version, fixes = read_fix_data(d.data)
    if d.data is not None:
        return fixes if version == doc.version else []
    result = doc.result
    if result is None or doc.stamp is None or doc.stamp[0] != doc.version:
        return []
    for mine in result.diagnostics:
        if mine.code == d.code and mine.fixes and range_key(
                ls.codec.range(result.source, mine.span)) == range_key(d.range):
            return read_fix_data(fix_data(mine.fixes, result.source, ls.codec, doc.version))[1]
    return []


def _fix_all(ls: CakeLanguageServer, doc: OpenDocument) -> lsp.CodeAction | None:
    result = doc.result
    if result is None or doc.stamp is None or doc.stamp[0] != doc.version:
        return None
    # one pass of `cake check --fix`: a fix left out for an overlap is offered again by the
    # next check
    edits = [lsp.TextEdit(range=ls.codec.range(result.source, e.span), new_text=e.new_text)
             for e in merged_edits(fixes_to_apply(result.diagnostics))]
    if not edits:
        return None
    return lsp.CodeAction(title="Apply all safe CAKE fixes", kind=_FIX_ALL,
                          edit=_edit(ls, doc, edits))


def _edit(ls: CakeLanguageServer, doc: OpenDocument,
          edits: list[lsp.TextEdit]) -> lsp.WorkspaceEdit:
    """Versioned document changes where the client takes them (it then refuses to apply
    them to a newer text), a plain change map otherwise."""
    ws = ls.client_capabilities.workspace
    we = ws.workspace_edit if ws is not None else None
    if we is not None and we.document_changes:
        return lsp.WorkspaceEdit(document_changes=[lsp.TextDocumentEdit(
            text_document=lsp.OptionalVersionedTextDocumentIdentifier(uri=doc.uri,
                                                                      version=doc.version),
            edits=list(edits))])
    return lsp.WorkspaceEdit(changes={doc.uri: list(edits)})


def _preferred_support(ls: CakeLanguageServer) -> bool:
    td = ls.client_capabilities.text_document
    ca = td.code_action if td is not None else None
    return ca is not None and bool(ca.is_preferred_support)


def register(server: CakeLanguageServer) -> None:
    server.feature(lsp.TEXT_DOCUMENT_CODE_ACTION, lsp.CodeActionOptions(
        code_action_kinds=[_QUICKFIX, _FIX_ALL, _REFACTOR], resolve_provider=True))(code_action)
    server.feature(lsp.CODE_ACTION_RESOLVE)(resolve)
