"""`workspace/executeCommand`: the compiler's actions, for editors and agents.

Every command is one row of `COMMANDS`.  A row without a runner is announced (so clients
can list it) and answers with a RequestFailed error saying it is not available in this
version; giving it a runner is the only change needed once the compiler part exists.

Long commands report work-done progress: on the client's token when it sends one,
otherwise on one the server creates, if the client accepts server-initiated progress.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lsprotocol import types as lsp
from pygls.exceptions import JsonRpcException, JsonRpcInvalidParams

from cake_core.check import CheckResult, check_source
from cake_core.diagnostics.json_format import to_json_obj
from cake_core.source import SourceFile
from cake_lsp.convert import path_of_uri
from cake_lsp.features.compiler_commands import run_cost, run_lower, run_simulate

if TYPE_CHECKING:
    from cake_lsp.server import CakeLanguageServer

Runner = Callable[["CakeLanguageServer", list[Any]], Awaitable[Any]]
REQUEST_FAILED = lsp.LSPErrorCodes.RequestFailed.value


@dataclass(frozen=True, slots=True)
class Command:
    name: str
    title: str
    run: Runner | None
    """None: announced, but not available in this version."""
    long: bool = True
    """Reports progress even when the client did not ask for it."""


async def run_check(ls: CakeLanguageServer, args: list[Any]) -> dict[str, Any]:
    """`cake.check [uri]`: the diagnostics of an open document or a file, as JSON."""
    uri = _uri_argument(args)
    try:
        doc = ls.documents.get(uri)
    except KeyError:
        result = await _check_file(ls, uri)
    else:
        result = await ls.checker.current(doc)
    return to_json_obj(result.diagnostics, {result.source.path: result.source})


async def run_apply_tactic(ls: CakeLanguageServer, args: list[Any]) -> dict[str, Any]:
    """`cake.applyTactic {uri, tactic, params?, kernel?, apply?}`: a tactic's rewrite of
    an open document as a workspace edit, with its rationale; `apply: true` also asks the
    client to apply it (`workspace/applyEdit`)."""
    spec = args[0] if args and isinstance(args[0], dict) else None
    if spec is not None and isinstance(spec.get("uri"), str) and "tactic" not in spec:
        return await _list_tactics(ls, spec)
    if spec is None or not isinstance(spec.get("uri"), str) or \
            not isinstance(spec.get("tactic"), str):
        raise JsonRpcInvalidParams('cake.applyTactic takes {"uri": ..., "tactic": ..., '
                                   '"params": {...}, "kernel": ...}')
    params = spec.get("params") or {}
    if not isinstance(params, dict):
        raise JsonRpcInvalidParams("cake.applyTactic: params must be an object")
    tactics = {t.name: t for _, t in ls.plugins.tactics()}
    tactic = tactics.get(spec["tactic"])
    if tactic is None:
        raise JsonRpcInvalidParams(f"unknown tactic {spec['tactic']!r}; known: "
                                   + ", ".join(sorted(tactics)))
    doc, result = await ls.current(spec["uri"])
    program = await ls.program(result)
    kernels = program.kernels if program is not None else []
    kernel = next((k for k in kernels if spec.get("kernel") in (None, k.name)), None)
    if kernel is None:
        raise JsonRpcException("no kernel to rewrite (does the file check?)",
                               code=REQUEST_FAILED)
    loop = asyncio.get_running_loop()
    try:
        rewrite = await loop.run_in_executor(ls.checker.executor, tactic.apply, kernel,
                                             result.source, params)
    except Exception as exc:  # a plugin's tactic failing is the plugin's fault, not ours
        raise JsonRpcException(f"tactic {tactic.name} failed: {type(exc).__name__}: {exc}",
                               code=REQUEST_FAILED) from None
    if rewrite is None:
        raise JsonRpcException(f"tactic {tactic.name} does not apply to {kernel.name} with "
                               f"these parameters", code=REQUEST_FAILED)
    edits = [lsp.TextEdit(range=ls.codec.range(result.source, e.span), new_text=e.new_text)
             for e in rewrite.edits]
    edit = lsp.WorkspaceEdit(changes={doc.uri: edits})
    out: dict[str, Any] = {"edit": edit, "rationale": rewrite.rationale,
                           "params": rewrite.params, "kernel": kernel.name}
    if spec.get("apply"):
        applied = await ls.workspace_apply_edit_async(lsp.ApplyWorkspaceEditParams(
            edit=edit, label=f"{tactic.name}: {rewrite.rationale}"))
        out["applied"] = applied.applied
    return out


async def _list_tactics(ls: CakeLanguageServer, spec: dict[str, Any]) -> dict[str, Any]:
    """`cake.applyTactic {uri}` without a tactic: the tactics that apply, with why and the
    parameter sets worth trying (what a client offers in a picker)."""
    doc, result = await ls.current(spec["uri"])
    program = await ls.program(result)
    kernels = program.kernels if program is not None else []

    def work() -> list[dict[str, Any]]:
        out = []
        for k in kernels:
            for _, t in ls.plugins.tactics():
                try:
                    why = t.applies(k, result.source)
                    variants = list(t.variants(k, result.source)) if why else []
                except Exception:  # a faulty plugin tactic is skipped, not fatal
                    continue
                if why:
                    out.append({"name": t.name, "title": t.summary, "description": why,
                                "kernel": k.name, "variants": variants})
        return out

    tactics = await asyncio.get_running_loop().run_in_executor(ls.checker.executor, work)
    return {"uri": doc.uri, "tactics": tactics}


COMMANDS: tuple[Command, ...] = (
    Command("cake.check", "Checking", run_check, long=False),
    Command("cake.lower", "Lowering to CUDA", run_lower),
    Command("cake.cost", "Estimating cost", run_cost),
    Command("cake.applyTactic", "Applying tactic", run_apply_tactic),
    Command("cake.simulate", "Simulating", run_simulate),
)


async def execute(ls: CakeLanguageServer, params: lsp.ExecuteCommandParams) -> Any:
    command = next(c for c in COMMANDS if c.name == params.command)
    if command.run is None:
        raise JsonRpcException(f"{command.name} is not available in this version of cake",
                               code=REQUEST_FAILED)
    async with progress(ls, params.work_done_token, command):
        return await command.run(ls, list(params.arguments or []))


@asynccontextmanager
async def progress(ls: CakeLanguageServer, token: lsp.ProgressToken | None,
                   command: Command) -> AsyncIterator[None]:
    if token is None and command.long and _server_progress(ls):
        token = f"cake-{uuid.uuid4()}"
        try:
            await ls.work_done_progress.create_async(token)
        except Exception:  # the client refused: run without progress
            token = None
    if token is not None:
        ls.work_done_progress.begin(token, lsp.WorkDoneProgressBegin(title=command.title))
    try:
        yield
    finally:
        if token is not None:
            ls.work_done_progress.end(token, lsp.WorkDoneProgressEnd())
            ls.work_done_progress.tokens.pop(token, None)


def _server_progress(ls: CakeLanguageServer) -> bool:
    w = ls.client_capabilities.window
    return w is not None and bool(w.work_done_progress)


def _uri_argument(args: list[Any]) -> str:
    first = args[0] if args else None
    if isinstance(first, dict):
        first = first.get("uri")
    if not isinstance(first, str) or not first:
        raise JsonRpcInvalidParams("cake.check takes a document URI")
    return first


async def _check_file(ls: CakeLanguageServer, uri: str) -> CheckResult:
    path = Path(path_of_uri(uri))
    if not uri.startswith("file:") or not path.is_file():
        raise JsonRpcInvalidParams(f"{uri} is neither open nor a readable file")
    options = ls.check_options()

    def work() -> CheckResult:
        return check_source(SourceFile.read(path), arch=options.arch, passes=options.passes)

    return await asyncio.get_running_loop().run_in_executor(ls.checker.executor, work)


def register(server: CakeLanguageServer) -> None:
    for command in COMMANDS:
        server.command(command.name)(execute)
