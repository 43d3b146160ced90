"""What an editor shows for a kernel, read from `cake lsp` for a model's prompt.

A person editing a kernel in VS Code sees the diagnostics with their quick fixes, the
hover text of every primitive (signature, documentation, effects) and the tactics offered
in the lightbulb menu.  A model asked to improve or repair the kernel gets the same,
through the same language-server connection the checker uses (`lsp_client.py`): not a
second, in-process checker call whose findings could drift from what the editor shows.

Hovers are requested at the first call of each name in the kernel (comments left out);
only answers that describe a callable (a signature in the hover's code block) are kept,
each cut to its signature and first paragraph, so that the prompt stays short.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from cake_agents.lsp_client import CakeLspClient

_CALL = re.compile(r"\b([A-Za-z_]\w*)\s*\(")
_OFFER = re.compile(r"^CAKE (\S+) (\{.*?\}): (.*)$")
_KEYWORDS = frozenset({"def", "if", "for", "while", "with", "return", "and", "or", "not",
                       "in", "elif", "print", "lambda"})
MAX_HOVERS = 16
HOVER_CHARS = 320
MAX_TACTICS = 16


@dataclass
class EditorView:
    diagnostics: list[dict[str, Any]] = field(default_factory=list)
    """{code, severity, message, line, col, fixes: [quick-fix titles]}."""
    hovers: dict[str, str] = field(default_factory=dict)
    """Called name -> its hover (signature and first paragraph)."""
    tactics: list[str] = field(default_factory=list)
    """Titles of the tactics offered as `refactor.rewrite` code actions."""

    def to_json(self) -> dict[str, Any]:
        return {"diagnostics": self.diagnostics, "hovers": self.hovers,
                "tactics": self.tactics}


def call_sites(text: str, lines: Iterable[int] | None = None) -> list[tuple[str, int, int]]:
    """(name, line, column) of the first call of each name, comments left out; only on
    `lines` when given.  Columns are UTF-16 units, as the protocol counts them."""
    wanted = None if lines is None else set(lines)
    seen: set[str] = set()
    out = []
    for i, line in enumerate(text.splitlines()):
        if wanted is not None and i not in wanted:
            continue
        code = line.split("#", 1)[0]
        for m in _CALL.finditer(code):
            name = m.group(1)
            if name in seen or name in _KEYWORDS:
                continue
            seen.add(name)
            col = len(code[:m.start(1)].encode("utf-16-le")) // 2
            out.append((name, i, col))
    return out


def condense_hover(text: str) -> str:
    """The signature and the first paragraph of a callable's hover; "" for anything else
    (a variable's type, a kernel's summary): the prompt wants what the primitives do."""
    m = re.match(r"```\w*\n(.*?)\n```\s*(.*)", text, re.S)
    if m is None or "(" not in m.group(1):
        return ""
    sig = m.group(1).strip()
    first = m.group(2).strip().split("\n\n", 1)[0].replace("\n", " ").strip()
    out = f"{sig}: {first}" if first else sig
    return out if len(out) <= HOVER_CHARS else out[:HOVER_CHARS - 3].rstrip() + "..."


def hovers(lsp: CakeLspClient, uri: str, text: str, lines: Iterable[int] | None = None
           ) -> dict[str, str]:
    """Hover text of the callables the kernel uses (on `lines` only, when given)."""
    out: dict[str, str] = {}
    for name, line, col in call_sites(text, lines):
        if len(out) >= MAX_HOVERS:
            break
        got = condense_hover(lsp.hover(uri, line, col))
        if got:
            out[name] = got
    return out


def kernel_line(text: str) -> int:
    """The line of the first kernel's `def` (where the editor offers its tactics)."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("@kernel"):
            for j in range(i, len(lines)):
                if lines[j].lstrip().startswith("def "):
                    return j
    return 0


def parent_view(lsp: CakeLspClient, uri: str, text: str) -> EditorView:
    """Open the kernel in the server and read what an editor would show for it."""
    got = lsp.open(uri, text)
    diags = []
    for d in got:
        entry = d.to_json()
        entry["fixes"] = [f.title for f in lsp.quick_fixes(uri, d)] if d.is_error else []
        diags.append(entry)
    offers = lsp.tactic_offers(uri, kernel_line(text))
    return EditorView(diags, hovers(lsp, uri, text),
                      [o.title for o in offers][:MAX_TACTICS])


def diagnostics_text(diags: Sequence[dict[str, Any]], text: str, limit: int = 12) -> str:
    """Diagnostics as the editor lists them: position, code, message, the source line and
    the quick fixes the server offers (`fixes`: titles)."""
    lines = text.splitlines()
    out = []
    for d in list(diags)[:limit]:
        ln = int(d.get("line", 0))
        src = lines[ln] if 0 <= ln < len(lines) else ""
        row = (f"line {ln + 1}:{int(d.get('col', 0)) + 1}: {d.get('severity', 'error')}"
               f"[{d.get('code', '')}]: {d.get('message', '')}\n    {src.strip()}")
        fixes = d.get("fixes") or []
        if fixes:
            row += "\n    quick fixes offered: " + "; ".join(fixes)
        out.append(row)
    return "\n".join(out)


def render(view: EditorView, text: str) -> str:
    """The prompt section: what the editor shows for `text`."""
    parts = []
    if view.diagnostics:
        parts.append("Diagnostics the CAKE language server reports for it:\n"
                     + diagnostics_text(view.diagnostics, text))
    if view.hovers:
        parts.append("The primitives it uses (the editor's hover text):\n"
                     + "\n".join(f"- {h}" for h in view.hovers.values()))
    if view.tactics:
        parts.append("Rewrites the language server offers as code actions (tactics, each "
                     "verified when applied):\n" + "\n".join(tactic_lines(view.tactics)))
    return "\n\n".join(parts)


def tactic_lines(titles: Sequence[str]) -> list[str]:
    """One line per tactic with the variants offered: an editor's lightbulb repeats the
    tactic's reason in every variant's title, which a prompt need not pay for twice."""
    params: dict[str, list[str]] = {}
    why: dict[str, str] = {}
    for title in titles:
        m = _OFFER.match(title)
        if m is None:
            params.setdefault(title, [])
            continue
        params.setdefault(m.group(1), []).append(m.group(2))
        why.setdefault(m.group(1), m.group(3))   # the titles cut it at different lengths
    return [f"- {name} {', '.join(ps)}: {why[name]}" if ps else f"- {name}"
            for name, ps in params.items()]
