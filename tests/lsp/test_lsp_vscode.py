"""The server as VS Code (1.65, recorded capabilities) sees it: pushed diagnostics,
UTF-16 columns, quick fixes, hovers, completion and the other editor features."""

from __future__ import annotations

import pytest
from lsp_support import (
    GEMM,
    ROOT,
    RecordingClient,
    change,
    editor_client,
    new_uri,
    open_doc,
    pos,
    published,
)
from lsprotocol import types as lsp

from cake_core.check import check_text

pytestmark = [pytest.mark.asyncio(loop_scope="module"),
              pytest.mark.filterwarnings("error::pytest_lsp.LspSpecificationWarning")]


client = editor_client("visual-studio-code")


async def opened(client: RecordingClient, text: str) -> tuple[str, list[lsp.Diagnostic]]:
    uri = new_uri()
    open_doc(client, uri, text)
    return uri, await published(client, uri, 1)


def apply(text: str, edits: list[lsp.TextEdit]) -> str:
    """What an editor does with a workspace edit (UTF-16 columns)."""
    lines = text.split("\n")

    def offset(p: lsp.Position) -> int:
        line = lines[p.line].encode("utf-16-le")[: 2 * p.character].decode("utf-16-le")
        return sum(len(x) + 1 for x in lines[: p.line]) + len(line)

    for e in sorted(edits, key=lambda e: (e.range.start.line, e.range.start.character),
                    reverse=True):
        text = text[: offset(e.range.start)] + e.new_text + text[offset(e.range.end):]
    return text


# --- diagnostics -----------------------------------------------------------------------------
async def test_the_sample_kernel_is_clean(client: RecordingClient) -> None:
    _, diags = await opened(client, GEMM)
    assert diags == []


async def test_a_diagnostic_carries_code_docs_source_and_fix_data(client: RecordingClient):
    _, diags = await opened(client, GEMM.replace("warps=12)", "warp=12)"))
    [d] = diags
    assert d.code == "CK109"
    assert d.source == "cake"
    assert d.severity == lsp.DiagnosticSeverity.Error
    assert d.code_description is not None
    assert d.code_description.href.endswith("docs/rules/CK109.md")
    assert d.range.start == pos(GEMM, "warps=12)")
    assert d.data["version"] == 1
    assert d.data["fixes"][0]["title"] == "rename to `warps`"


async def test_related_information_points_at_the_other_place(client: RecordingClient):
    text = GEMM.replace('    with role("mma", warps=range(4, 12)', '    with role("mma", '
                        'warps=range(2, 12)')
    uri, diags = await opened(client, text)
    [d] = [d for d in diags if d.code == "CK112"]
    assert d.related_information
    assert d.related_information[0].location.uri == uri
    assert d.related_information[0].location.range.start == pos(text, 'role("load"', 5)


async def test_diagnostics_follow_incremental_edits(client: RecordingClient) -> None:
    uri, diags = await opened(client, GEMM)
    assert diags == []
    at = pos(GEMM, "STAGES, BM, BK)", 6)  # just after the first STAGES in `sa`
    change(client, uri, 2, [(lsp.Range(start=lsp.Position(line=at.line, character=at.character
                                                                       - 1), end=at), "")])
    [d] = await published(client, uri, 2)
    assert d.code == "CK101" and "STAGE" in d.message
    change(client, uri, 3, [(lsp.Range(start=lsp.Position(line=at.line, character=at.character
                                                                       - 1),
                                       end=lsp.Position(line=at.line, character=at.character
                                                        - 1)), "S")])
    assert await published(client, uri, 3) == []


async def test_rapid_edits_never_publish_an_older_result_after_a_newer(client: RecordingClient):
    uri, _ = await opened(client, GEMM)
    start = len(client.published)
    comment = "# one edit per keystroke"
    for i, ch in enumerate(comment):
        p = lsp.Position(line=2, character=i)
        change(client, uri, 2 + i, [(lsp.Range(start=p, end=p), ch)])
    last = 1 + len(comment)
    assert await published(client, uri, last) == []
    versions = [p.version for p in client.published[start:] if p.uri == uri]
    assert versions == sorted(versions) and versions[-1] == last


async def test_closing_a_document_clears_its_diagnostics(client: RecordingClient) -> None:
    uri, diags = await opened(client, GEMM.replace("regs=40", "reg=40"))
    assert diags
    start = len(client.published)
    client.text_document_did_close(lsp.DidCloseTextDocumentParams(
        text_document=lsp.TextDocumentIdentifier(uri=uri)))
    assert await published(client, uri, after=start) == []


# --- quick fixes -------------------------------------------------------------------------------
FIXABLE = {
    "unused-buffer": ("    ab = pipeline", "    sc = smem(f32, (64, 64))\n    ab = pipeline"),
    "unknown-name": ("(STAGES, BM, BK)", "(STAGE, BM, BK)"),
    "kernel-keyword": ("warps=12)", "warp=12)"),
    "role-keyword": ("regs=40", "reg=40"),
    "swizzle-span": ("BK), layout=swizzle(128))\n    sb", "BK), layout=swizzle(100))\n    sb"),
    "missing-colon": ("range(cdiv(K, BK)):\n            s = ab.acquire()",
                      "range(cdiv(K, BK))\n            s = ab.acquire()"),
    "int-division": ("range(cdiv(K, BK))", "range(K // BK / 1)"),
    "unclosed-paren": ("ab.commit()", "ab.commit("),
}


@pytest.mark.parametrize("case", sorted(FIXABLE))
async def test_each_fix_applied_gives_a_clean_document(client: RecordingClient, case: str):
    old, new = FIXABLE[case]
    text = GEMM.replace(old, new, 1)
    uri, diags = await opened(client, text)
    assert len(diags) == 1
    actions = await client.text_document_code_action_async(lsp.CodeActionParams(
        text_document=lsp.TextDocumentIdentifier(uri=uri), range=diags[0].range,
        context=lsp.CodeActionContext(diagnostics=diags)))
    fixes = [a for a in actions if a.kind == lsp.CodeActionKind.QuickFix]
    assert fixes, "no quick fix offered"
    [action] = fixes
    assert isinstance(action, lsp.CodeAction) and action.kind == lsp.CodeActionKind.QuickFix
    assert action.edit is not None and action.edit.document_changes
    doc_edit = action.edit.document_changes[0]
    assert isinstance(doc_edit, lsp.TextDocumentEdit) and doc_edit.text_document.version == 1
    safe = diags[0].data["fixes"][0]["applicability"] == "safe"
    assert bool(action.is_preferred) == safe
    edits = sorted(doc_edit.edits, key=lambda e: (e.range.start.line, e.range.start.character),
                   reverse=True)  # as editors apply them: later edits first
    change(client, uri, 2, [(e.range, e.new_text) for e in edits])
    assert await published(client, uri, 2) == []
    assert check_text(apply(text, list(doc_edit.edits))).diagnostics == []


async def test_a_fix_for_an_older_version_is_not_offered(client: RecordingClient) -> None:
    uri, diags = await opened(client, GEMM.replace("regs=40", "reg=40"))
    p = lsp.Position(line=2, character=0)
    change(client, uri, 2, [(lsp.Range(start=p, end=p), "# moved\n")])
    await published(client, uri, 2)
    actions = await client.text_document_code_action_async(lsp.CodeActionParams(
        text_document=lsp.TextDocumentIdentifier(uri=uri), range=diags[0].range,
        context=lsp.CodeActionContext(diagnostics=diags)))
    assert not actions


async def test_fix_all_applies_every_safe_fix(client: RecordingClient) -> None:
    text = GEMM.replace("regs=40", "reg=40").replace(
        "    ab = pipeline", "    sc = smem(f32, (64, 64))\n    ab = pipeline")
    uri, diags = await opened(client, text)
    assert len(diags) == 2
    [action] = await client.text_document_code_action_async(lsp.CodeActionParams(
        text_document=lsp.TextDocumentIdentifier(uri=uri), range=diags[0].range,
        context=lsp.CodeActionContext(diagnostics=[],
                                      only=[lsp.CodeActionKind.SourceFixAll])))
    assert isinstance(action, lsp.CodeAction) and action.edit is not None
    assert apply(text, list(action.edit.document_changes[0].edits)) == GEMM


# --- non-ASCII text: UTF-16 columns ------------------------------------------------------------
async def test_columns_after_non_ascii_text_are_utf16(client: RecordingClient) -> None:
    text = GEMM.replace('"load"', '"lõad🚀"').replace("regs=40", "reg=40")
    uri, [d] = await opened(client, text)
    assert d.range.start == pos(text, "reg=40")
    edits = d.data["fixes"][0]["edits"]
    assert edits[0]["range"]["start"]["character"] == pos(text, "reg=40").character
    r = lsp.Range(start=pos(text, "reg=40"), end=pos(text, "reg=40", 3))
    change(client, uri, 2, [(r, "regs")])
    assert await published(client, uri, 2) == []


# --- hover ---------------------------------------------------------------------------------------
async def hover_text(client: RecordingClient, text: str, needle: str, delta: int = 1) -> str:
    uri, _ = await opened(client, text)
    h = await client.text_document_hover_async(lsp.HoverParams(
        text_document=lsp.TextDocumentIdentifier(uri=uri), position=pos(text, needle, delta)))
    assert h is not None and isinstance(h.contents, lsp.MarkupContent)
    return h.contents.value


async def test_hover_on_a_buffer_shows_layout_and_bytes(client: RecordingClient) -> None:
    text = await hover_text(client, GEMM, "tma_load(sa", len("tma_load(") + 1)
    assert "smem[bf16, (4, 128, 64), swizzle(128)]" in text
    assert "65,536 bytes" in text and "swizzle(128)" in text


async def test_hover_on_a_primitive_shows_signature_and_doc(client: RecordingClient) -> None:
    text = await hover_text(client, GEMM, "tma_load(sa")
    assert "tma_load(dst, src, bar, multicast=0)" in text
    assert "requires: tma" in text


async def test_hover_on_a_role_shows_warps_and_registers(client: RecordingClient) -> None:
    text = await hover_text(client, GEMM, 'role("load"', len('role("'))
    assert "warps 0..3" in text and "40 per thread" in text


async def test_hover_on_constants_pipelines_and_dtypes(client: RecordingClient) -> None:
    assert "= `4`" in await hover_text(client, GEMM, "STAGES, BM, BK)")
    assert "4 stages" in await hover_text(client, GEMM, "ab = pipeline")
    assert "16-bit" in await hover_text(client, GEMM, "bf16, (STAGES")
    assert "kernel gemm" in await hover_text(client, GEMM, "gemm(")


async def test_hover_on_nothing_is_null(client: RecordingClient) -> None:
    uri, _ = await opened(client, GEMM)
    h = await client.text_document_hover_async(lsp.HoverParams(
        text_document=lsp.TextDocumentIdentifier(uri=uri), position=lsp.Position(line=2,
                                                                                   character=0)))
    assert h is None


# --- completion and signature help ------------------------------------------------------------
async def completion_labels(client: RecordingClient, text: str, at: lsp.Position) -> list[str]:
    uri = new_uri()
    open_doc(client, uri, text)
    result = await client.text_document_completion_async(lsp.CompletionParams(
        text_document=lsp.TextDocumentIdentifier(uri=uri), position=at))
    assert isinstance(result, lsp.CompletionList)
    return [i.label for i in result.items]


async def test_completion_after_a_pipeline_offers_its_methods(client: RecordingClient):
    text = GEMM.replace("            ab.commit()", "            ab.")
    labels = await completion_labels(client, text, pos(text, "ab.\n", 3))
    assert {"acquire", "commit", "wait", "release"} <= set(labels)
    assert "tma_load" not in labels


async def test_completion_after_a_buffer_and_an_index_space(client: RecordingClient):
    text = GEMM.replace("            ab.commit()", "            x = sa[s].")
    assert "T" in await completion_labels(client, text, pos(text, "sa[s].", 6))
    text = GEMM.replace("            ab.commit()", "            x = block.")
    assert {"x", "y", "z"} <= set(await completion_labels(client, text, pos(text, "block.", 6)))


async def test_completion_offers_names_primitives_and_keywords(client: RecordingClient):
    text = GEMM.replace("            ab.commit()", "            ab.commit()\n            ")
    labels = await completion_labels(client, text, pos(text, "ab.commit()\n", 24))
    assert {"tma_load", "wgmma", "sa", "ab", "STAGES", "bf16", "swizzle", "range", "block",
            "s", "k"} <= set(labels)
    assert "acc" not in labels  # defined later, in another role


async def test_completion_offers_the_keyword_arguments_of_the_call(client: RecordingClient):
    text = GEMM.replace("BK), layout=swizzle(128))\n    sb", "BK), \n    sb", 1)
    labels = await completion_labels(client, text, pos(text, "BK), \n", len("BK), ")))
    assert labels[:3] == ["dtype=", "shape=", "layout="]


async def test_document_highlight_marks_definition_and_uses(client: RecordingClient):
    uri, _ = await opened(client, GEMM)
    marks = await client.text_document_document_highlight_async(lsp.DocumentHighlightParams(
        text_document=lsp.TextDocumentIdentifier(uri=uri), position=pos(GEMM, "acc =")))
    assert marks is not None
    kinds = [m.kind for m in marks]
    assert kinds == [lsp.DocumentHighlightKind.Write] + [lsp.DocumentHighlightKind.Read] * 2


async def test_signature_help_marks_the_active_parameter(client: RecordingClient) -> None:
    uri, _ = await opened(client, GEMM)
    help_ = await client.text_document_signature_help_async(lsp.SignatureHelpParams(
        text_document=lsp.TextDocumentIdentifier(uri=uri),
        position=pos(GEMM, "tma_load(sb[s], ", len("tma_load(sb[s], "))))
    assert help_ is not None
    sig = help_.signatures[0]
    assert sig.label == "tma_load(dst, src, bar, multicast=0)"
    assert help_.active_parameter == 1
    start, end = sig.parameters[1].label
    assert sig.label[start:end] == "src"


# --- navigation ---------------------------------------------------------------------------------
async def test_definition_of_a_buffer_use(client: RecordingClient) -> None:
    uri, _ = await opened(client, GEMM)
    loc = await client.text_document_definition_async(lsp.DefinitionParams(
        text_document=lsp.TextDocumentIdentifier(uri=uri),
        position=pos(GEMM, "wgmma(acc, sa", len("wgmma(acc, s"))))
    assert isinstance(loc, lsp.Location)
    assert loc.range == lsp.Range(start=pos(GEMM, "sa ="), end=pos(GEMM, "sa =", 2))


@pytest.mark.parametrize(("needle", "delta", "count"), [
    ("ab = pipeline", 0, 7),        # a pipeline: its definition and six uses
    ('producer="load"', 10, 2),     # a role, from the pipeline that names it
    ("STAGES = ", 0, 4),            # a constant
    ("sb = smem", 0, 3),            # a buffer
])
async def test_references(client: RecordingClient, needle: str, delta: int, count: int):
    uri, _ = await opened(client, GEMM)
    refs = await client.text_document_references_async(lsp.ReferenceParams(
        text_document=lsp.TextDocumentIdentifier(uri=uri), position=pos(GEMM, needle, delta),
        context=lsp.ReferenceContext(include_declaration=True)))
    assert refs is not None and len(refs) == count
    assert all(r.uri == uri for r in refs)


async def test_document_symbols_outline_kernels_roles_buffers(client: RecordingClient):
    uri, _ = await opened(client, GEMM)
    symbols = await client.text_document_document_symbol_async(lsp.DocumentSymbolParams(
        text_document=lsp.TextDocumentIdentifier(uri=uri)))
    assert symbols is not None
    names = [s.name for s in symbols]
    assert names == ["BM", "BN", "BK", "STAGES", "M", "N", "K", "gemm"]
    gemm = symbols[-1]
    assert isinstance(gemm, lsp.DocumentSymbol) and gemm.kind == lsp.SymbolKind.Function
    assert [c.name for c in gemm.children or []] == [
        "A", "B", "C", "sa", "sb", "ab", 'role "load"', 'role "mma"']
    mma = gemm.children[-1]
    assert [c.name for c in mma.children or []] == ["acc"]


async def test_inlay_hints_show_bytes_stages_and_registers(client: RecordingClient) -> None:
    uri, _ = await opened(client, GEMM)
    hints = await client.text_document_inlay_hint_async(lsp.InlayHintParams(
        text_document=lsp.TextDocumentIdentifier(uri=uri),
        range=lsp.Range(start=lsp.Position(line=0, character=0),
                        end=lsp.Position(line=30, character=0))))
    assert hints is not None
    labels = {h.position.line: h.label for h in hints}
    assert labels[5] == "64 KiB" and labels[6] == "128 KiB"
    assert labels[7] == "4 stages, 8 mbarriers (64 B)"
    assert labels[8] == "4 warps, 40 regs x 128 threads = 5,120 regs"
    assert labels[3].startswith("smem 192.1 KiB")


async def test_semantic_tokens_tell_roles_buffers_pipelines_primitives(client: RecordingClient):
    uri, _ = await opened(client, GEMM)
    result = await client.text_document_semantic_tokens_full_async(lsp.SemanticTokensParams(
        text_document=lsp.TextDocumentIdentifier(uri=uri)))
    provider = client.init_result.capabilities.semantic_tokens_provider
    types, mods = provider.legend.token_types, provider.legend.token_modifiers
    assert result is not None
    line = col = 0
    found: dict[tuple[int, int], tuple[str, set[str]]] = {}
    data = result.data
    for i in range(0, len(data), 5):
        line += data[i]
        col = data[i + 1] if data[i] else col + data[i + 1]
        found[(line, col)] = (types[data[i + 3]],
                              {m for b, m in enumerate(mods) if data[i + 4] >> b & 1})

    def at(needle: str, delta: int = 0) -> tuple[int, int]:
        p = pos(GEMM, needle, delta)
        return p.line, p.character

    assert found[at('role("load"', 5)] == ("namespace", {"declaration"})
    assert found[at("sa = smem")] == ("variable", {"buffer", "declaration"})
    assert found[at("ab.acquire")] == ("event", {"pipeline"})
    assert found[at("tma_load(sa")] == ("function", {"defaultLibrary"})
    assert found[at("acquire()")] == ("method", {"defaultLibrary"})


# --- commands -------------------------------------------------------------------------------------
async def test_cake_check_returns_json_diagnostics_with_progress(client: RecordingClient):
    uri, _ = await opened(client, GEMM.replace("regs=40", "reg=40"))
    client.progress_reports["check-1"] = []  # a client-made token: the client knows it
    report = await client.workspace_execute_command_async(lsp.ExecuteCommandParams(
        command="cake.check", arguments=[uri], work_done_token="check-1"))
    assert report["summary"]["error"] == 1
    assert report["diagnostics"][0]["code"] == "CK103"
    kinds = [type(p).__name__ for p in client.progress_reports["check-1"]]
    assert kinds == ["WorkDoneProgressBegin", "WorkDoneProgressEnd"]


async def test_cake_check_of_a_file_on_disk(client: RecordingClient) -> None:
    report = await client.workspace_execute_command_async(lsp.ExecuteCommandParams(
        command="cake.check", arguments=[(ROOT / "tests/lsp/data/gemm.cake").as_uri()]))
    assert report["diagnostics"] == []


@pytest.mark.parametrize("command", ["cake.lower", "cake.cost", "cake.simulate"])
async def test_compiler_commands_reject_missing_arguments(client: RecordingClient,
                                                          command: str) -> None:
    with pytest.raises(Exception, match="takes"):
        await client.workspace_execute_command_async(lsp.ExecuteCommandParams(
            command=command, arguments=[]))


async def test_cake_lower_returns_the_cuda_of_the_document(client: RecordingClient) -> None:
    uri, _ = await opened(client, GEMM)
    out = await client.workspace_execute_command_async(lsp.ExecuteCommandParams(
        command="cake.lower", arguments=[{"uri": uri}]))
    assert out["ok"] is True
    assert "__global__" in out["cuda"] and "wgmma" in out["cuda"]
    assert out["meta"]["kernels"][0]["kernel"] == "gemm"


async def test_cake_cost_predicts_at_the_given_dims(client: RecordingClient) -> None:
    uri, _ = await opened(client, GEMM)
    out = await client.workspace_execute_command_async(lsp.ExecuteCommandParams(
        command="cake.cost", arguments=[{"uri": uri, "dims": "M=4096,N=4096,K=4096"}]))
    (pred,) = out["predictions"]
    assert pred["time_s"] > 0 and pred["bottleneck"] == "compute"
    assert out["markdown"].startswith("```text")


async def test_cake_simulate_runs_the_document_on_the_cpu(client: RecordingClient) -> None:
    uri, _ = await opened(client, GEMM)
    out = await client.workspace_execute_command_async(lsp.ExecuteCommandParams(
        command="cake.simulate", arguments=[{"uri": uri, "dims": {"M": 128, "N": 256,
                                                                   "K": 128}}]))
    assert out["ok"] is True and out["diagnostics"]["diagnostics"] == []
    assert out["dims"] == {"M": 128, "N": 256, "K": 128}


async def test_compiler_commands_on_a_broken_document_return_its_errors(
        client: RecordingClient) -> None:
    uri, _ = await opened(client, GEMM.replace("wgmma_wait(0)", "wgmma_wait(0"))
    out = await client.workspace_execute_command_async(lsp.ExecuteCommandParams(
        command="cake.cost", arguments=[{"uri": uri}]))
    assert out["ok"] is False
    assert out["diagnostics"]["diagnostics"][0]["code"] == "CK001"


async def test_apply_tactic_returns_an_edit_and_its_rationale(client: RecordingClient):
    pytest.importorskip("cake_tactics")  # the tactics ship as a plugin of their own
    uri, _ = await opened(client, GEMM)
    out = await client.workspace_execute_command_async(lsp.ExecuteCommandParams(
        command="cake.applyTactic",
        arguments=[{"uri": uri, "tactic": "stages", "params": {"stages": 2}}]))
    assert out["rationale"].startswith("stages 4 -> 2")
    assert out["params"]["stages"] == 2 and out["kernel"] == "gemm"
    assert "predicted" in out["params"]
    edits = [lsp.TextEdit(range=lsp.Range(
        start=lsp.Position(**e["range"]["start"]), end=lsp.Position(**e["range"]["end"])),
        new_text=e["newText"]) for e in out["edit"]["changes"][uri]]
    rewritten = apply(GEMM, edits)
    assert rewritten.startswith("BM, BN, BK, STAGES = 128, 256, 64, 2\n")
    assert check_text(rewritten).diagnostics == []


async def test_tactics_are_offered_as_refactorings(client: RecordingClient) -> None:
    pytest.importorskip("cake_tactics")
    uri, diags = await opened(client, GEMM)
    assert diags == []
    actions = await client.text_document_code_action_async(lsp.CodeActionParams(
        text_document=lsp.TextDocumentIdentifier(uri=uri),
        range=lsp.Range(start=lsp.Position(line=10, character=0),
                        end=lsp.Position(line=10, character=0)),
        context=lsp.CodeActionContext(diagnostics=[], only=[lsp.CodeActionKind.Refactor])))
    assert actions and all(a.kind == lsp.CodeActionKind.RefactorRewrite for a in actions)
    stages = [a for a in actions if a.data["cake_tactic"]["tactic"] == "stages"]
    assert stages, [a.title for a in actions]
    assert stages[0].edit is None  # computed only when chosen
    resolved = await client.code_action_resolve_async(stages[0])
    edits = resolved.edit.changes[uri] if resolved.edit.changes else \
        resolved.edit.document_changes[0].edits
    rewritten = apply(GEMM, list(edits))
    assert rewritten != GEMM and check_text(rewritten).diagnostics == []


async def test_apply_tactic_without_a_tactic_lists_what_applies(client: RecordingClient):
    pytest.importorskip("cake_tactics")
    uri, _ = await opened(client, GEMM)
    out = await client.workspace_execute_command_async(lsp.ExecuteCommandParams(
        command="cake.applyTactic", arguments=[{"uri": uri}]))
    names = {t["name"] for t in out["tactics"]}
    assert {"stages", "tile-size", "swizzle"} <= names
    stages = next(t for t in out["tactics"] if t["name"] == "stages")
    assert {"stages": 2} in stages["variants"] and stages["description"]


async def test_apply_tactic_rejects_unknown_tactics(client: RecordingClient) -> None:
    uri, _ = await opened(client, GEMM)
    with pytest.raises(Exception, match="unknown tactic 'nope'"):
        await client.workspace_execute_command_async(lsp.ExecuteCommandParams(
            command="cake.applyTactic", arguments=[{"uri": uri, "tactic": "nope"}]))
    with pytest.raises(Exception, match="takes"):
        await client.workspace_execute_command_async(lsp.ExecuteCommandParams(
            command="cake.applyTactic", arguments=[uri]))


async def test_the_server_announces_its_capabilities(client: RecordingClient) -> None:
    caps = client.init_result.capabilities
    assert caps.position_encoding == lsp.PositionEncodingKind.Utf16
    assert caps.text_document_sync.change == lsp.TextDocumentSyncKind.Incremental
    assert set(caps.execute_command_provider.commands) == {
        "cake.check", "cake.lower", "cake.cost", "cake.applyTactic", "cake.simulate"}
    assert list(caps.completion_provider.trigger_characters) == ["."]
    for provider in ("hover_provider", "definition_provider", "references_provider",
                     "document_symbol_provider", "inlay_hint_provider",
                     "code_action_provider", "signature_help_provider",
                     "semantic_tokens_provider", "diagnostic_provider"):
        assert getattr(caps, provider), provider


async def test_an_unknown_command_is_an_invalid_request(client: RecordingClient) -> None:
    with pytest.raises(Exception, match="unknown command"):
        await client.workspace_execute_command_async(lsp.ExecuteCommandParams(
            command="cake.nope", arguments=[]))
