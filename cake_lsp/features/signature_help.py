"""Signature help: the primitive (or builder form) being called, its active parameter."""

from __future__ import annotations

from typing import TYPE_CHECKING

from lsprotocol import types as lsp

from cake_core.ide.cursor import call_at_cursor, receiver_type
from cake_core.ide.forms import FORMS
from cake_core.primitives.registry import Primitive
from cake_lsp.convert import markup

if TYPE_CHECKING:
    from cake_lsp.server import CakeLanguageServer


async def signature_help(ls: CakeLanguageServer,
                         params: lsp.SignatureHelpParams) -> lsp.SignatureHelp | None:
    doc, result = await ls.current(params.text_document.uri)
    source = result.source
    offset = ls.offset(source, params.position)
    call = call_at_cursor(source.text, len(source.data[:offset].decode("utf-8", "replace")))
    if call is None:
        return None
    names: list[str]
    if call.receiver is not None:
        t = receiver_type(call.receiver + ".", await ls.index(doc, result), offset)
        prim = ls.registry.method(t, call.name) if t is not None else None
        if prim is None:
            return None
        prefix, names, text = f"{call.receiver}.", _param_names(prim), _doc(prim)
    elif (prim := ls.registry.function(call.name)) is not None:
        prefix, names, text = "", _param_names(prim), _doc(prim)
    elif call.name in FORMS:
        form = FORMS[call.name]
        prefix, names, text = "", list(form.params), form.doc
    else:
        return None
    label, spans = _label(prefix + call.name, names)
    active = _active(names, call.arg_index, call.keyword)
    info = lsp.SignatureInformation(
        label=label, documentation=markup(text, ls.markdown("hover")),
        parameters=[lsp.ParameterInformation(label=s if _offsets(ls) else label[s[0]:s[1]])
                    for s in spans],
        active_parameter=active)
    return lsp.SignatureHelp(signatures=[info], active_signature=0, active_parameter=active)


def _offsets(ls: CakeLanguageServer) -> bool:
    """Whether the client takes parameter labels as offsets (unambiguous) or strings."""
    td = ls.client_capabilities.text_document
    sh = td.signature_help if td is not None else None
    si = sh.signature_information if sh is not None else None
    pi = si.parameter_information if si is not None else None
    return pi is not None and bool(pi.label_offset_support)


def _param_names(p: Primitive) -> list[str]:
    return [q.name if q.required else f"{q.name}={q.default!r}" for q in p.params
            if q.name != "self"]


def _doc(p: Primitive) -> str:
    return "\n\n".join(x for x in (p.signature_doc, p.doc.strip()) if x)


def _label(name: str, params: list[str]) -> tuple[str, list[tuple[int, int]]]:
    """The signature text and each parameter's [start, end) within it."""
    label = name + "("
    spans = []
    for i, p in enumerate(params):
        if i:
            label += ", "
        spans.append((len(label), len(label) + len(p)))
        label += p
    return label + ")", spans


def _active(params: list[str], index: int, keyword: str | None) -> int | None:
    names = [p.split("=")[0] for p in params]
    if keyword is not None:
        return names.index(keyword) if keyword in names else None
    if not params:
        return None
    return min(index, len(params) - 1)


def register(server: CakeLanguageServer) -> None:
    server.feature(lsp.TEXT_DOCUMENT_SIGNATURE_HELP, lsp.SignatureHelpOptions(
        trigger_characters=["(", ","], retrigger_characters=[","]))(signature_help)
