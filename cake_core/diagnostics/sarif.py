"""Diagnostics as SARIF 2.1.0, for CI code scanning (GitHub and other SARIF viewers).

One run, one result per diagnostic.  Locations are repository-relative URIs under the
`%SRCROOT%` base when a repository root is known, so the same report means the same
thing on every checkout; only a file outside that root gets an absolute `file:` URI.
Regions are 1-based and count UTF-16 code units, SARIF's default column kind, which the
run also states explicitly.

GitHub code scanning rejects a rule without `fullDescription` and `help`, and a relative
`helpUri`, although the schema allows all three.  The rule's documentation page supplies
the first two (this layer cannot read the pages itself, so the caller passes the reader),
and `helpUri` is the page's path joined to an absolute base.

`partialFingerprints.primaryLocationLineHash` lets a code-scanning service recognise a
finding it has seen before.  It hashes the rule id and the whitespace-collapsed text of
the primary line, plus a counter for identical lines in the same file, and no line
number, so that editing elsewhere in the file (inserting lines above, re-indenting) does
not turn an old finding into a new one.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import quote

from cake_core import __version__
from cake_core.diagnostics.codes import Rule, lookup
from cake_core.diagnostics.json_format import jsonable
from cake_core.diagnostics.model import Diagnostic, Severity
from cake_core.source import SourceFile, Span

SARIF_SCHEMA_URI = "https://json.schemastore.org/sarif-2.1.0.json"
INFORMATION_URI = "https://pypi.org/project/cake-kernels/"
HELP_BASE_URI = f"https://github.com/cake-kernels/cake/blob/v{__version__}/"
"""The repository at this version's release tag: `docs/rules/CODE.md` below it is the page
that `cake explain CODE` prints, as it read when this version was released."""
SRCROOT = "%SRCROOT%"

RuleDocs = Callable[[Rule], str]
"""A rule's documentation page, as Markdown (`cake_core.docs.rule_doc`)."""

_LEVELS = {
    Severity.ERROR: "error",
    Severity.WARNING: "warning",
    Severity.INFO: "note",
    Severity.HINT: "note",
}


def sarif_level(severity: Severity) -> str:
    """SARIF has no `hint`; both info and hint become `note`."""
    return _LEVELS[severity]


# --- locations ----------------------------------------------------------------------------
def _region(span: Span) -> dict[str, int]:
    return {
        "startLine": span.start.line + 1,
        "startColumn": span.start.col_utf16 + 1,
        "endLine": span.end.line + 1,
        "endColumn": span.end.col_utf16 + 1,
    }


class _Artifacts:
    """Maps display paths to SARIF artifact locations, once per path."""

    def __init__(self, repo_root: Path | None) -> None:
        self.root = repo_root.absolute() if repo_root is not None else None
        self._cache: dict[str, dict[str, str]] = {}

    def location(self, path: str) -> dict[str, str]:
        cached = self._cache.get(path)
        if cached is None:
            cached = self._cache[path] = self._locate(path)
        return dict(cached)

    def _locate(self, path: str) -> dict[str, str]:
        if path.startswith("<") and path.endswith(">"):
            return {"uri": quote(path, safe="")}  # "<input>", "<stdin>": no file behind it
        p = Path(path)
        if self.root is not None:
            rel = _relative_to(p.absolute(), self.root)
            if rel is not None:
                return {"uri": quote(rel.as_posix(), safe="/"), "uriBaseId": SRCROOT}
            return {"uri": p.resolve().as_uri()}  # outside the root: no base can name it
        if p.is_absolute():
            return {"uri": p.as_uri()}
        return {"uri": quote(p.as_posix(), safe="/")}


def repository_root(start: Path) -> Path:
    """The nearest directory at or above `start` holding `.git` (a directory, or the file
    of a worktree or submodule), else `start`: code scanning resolves relative URIs
    against the repository root, wherever in the checkout `cake check` ran."""
    start = start.absolute()
    for directory in (start, *start.parents):
        if (directory / ".git").exists():
            return directory
    return start


def _relative_to(path: Path, root: Path) -> PurePosixPath | None:
    """`path` relative to `root`, trying the literal and the symlink-resolved forms; None
    when it lies outside (`root/../x` is outside, although it starts with `root`)."""
    for candidate, base in ((path, root), (path.resolve(), root.resolve())):
        try:
            rel = PurePosixPath(candidate.relative_to(base).as_posix())
        except ValueError:
            continue
        if ".." not in rel.parts:
            return rel
    return None


def _physical(artifacts: _Artifacts, path: str, span: Span) -> dict[str, Any]:
    return {"artifactLocation": artifacts.location(path), "region": _region(span)}


# --- fingerprints ----------------------------------------------------------------------------
def line_hash(rule_id: str, line_text: str) -> str:
    """The hex part of `primaryLocationLineHash`: rule id and whitespace-collapsed line."""
    normalized = " ".join(line_text.split())
    digest = hashlib.sha256(f"{rule_id}\0{normalized}".encode("utf-8", "surrogatepass"))
    return digest.hexdigest()[:16]


def _fingerprints(
    diags: list[Diagnostic], sources: Mapping[str, SourceFile]
) -> dict[int, str]:
    """`hash:N` per diagnostic (by index), N counting identical (file, hash) pairs in order.

    Without the source text the message stands in for the line, which is still
    independent of where the line is.
    """
    order = sorted(range(len(diags)), key=lambda i: (diags[i].sort_key, i))
    seen: dict[tuple[str, str], int] = {}
    out: dict[int, str] = {}
    for i in order:
        d = diags[i]
        src = sources.get(d.path)
        text = src.line_text(d.span.start.line) if src is not None else f"message: {d.message}"
        h = line_hash(d.code, text)
        n = seen[(d.path, h)] = seen.get((d.path, h), 0) + 1
        out[i] = f"{h}:{n}"
    return out


# --- rules and results -----------------------------------------------------------------------
def _help_uri(code: str, base: str) -> str:
    """`docs/rules/CODE.md` joined to `base`, with or without its trailing slash."""
    return f"{base.rstrip('/')}/docs/rules/{code}.md"


def what_it_does(page: str) -> str | None:
    """The first paragraph of a page's `## What it does` section, on one line."""
    lines = page.splitlines()
    try:
        start = lines.index("## What it does") + 1
    except ValueError:
        return None
    paragraph: list[str] = []
    for line in lines[start:]:
        if line.startswith("#") or (not line.strip() and paragraph):
            break
        if line.strip():
            paragraph.append(line.strip())
    return " ".join(paragraph) or None


def _rule(code: str, help_base_uri: str, rule_docs: RuleDocs | None) -> dict[str, Any]:
    rule = lookup(code)
    if rule is None:
        text = {"text": code}
        return {"id": code, "shortDescription": text, "fullDescription": text, "help": text}
    page = rule_docs(rule) if rule_docs is not None else None
    descriptor: dict[str, Any] = {
        "id": rule.code,
        "name": rule.name,
        "shortDescription": {"text": rule.summary},
        "fullDescription": {"text": (page and what_it_does(page)) or rule.summary},
        # The page's Markdown is also its most readable plain text.
        "help": {"text": page, "markdown": page} if page else {"text": rule.summary},
    }
    if rule.origin == "cake":
        descriptor["helpUri"] = _help_uri(rule.code, help_base_uri)
    descriptor["defaultConfiguration"] = {"level": sarif_level(rule.severity)}
    descriptor["properties"] = {"fixAvailability": rule.fix.value, "origin": rule.origin}
    return descriptor


def _result(
    d: Diagnostic, rule_index: int, artifacts: _Artifacts, fingerprint: str
) -> dict[str, Any]:
    result: dict[str, Any] = {
        "ruleId": d.code,
        "ruleIndex": rule_index,
        "level": sarif_level(d.severity),
        "message": {"text": d.message},
        "locations": [{"physicalLocation": _physical(artifacts, d.path, d.span)}],
        "partialFingerprints": {"primaryLocationLineHash": fingerprint},
    }
    if d.related:
        result["relatedLocations"] = [
            {
                "id": i,
                "physicalLocation": _physical(artifacts, r.path or d.path, r.span),
                "message": {"text": r.message},
            }
            for i, r in enumerate(d.related, start=1)
        ]
    if d.fixes:
        result["fixes"] = [
            {
                "description": {"text": f.title},
                "artifactChanges": [
                    {
                        "artifactLocation": artifacts.location(d.path),
                        "replacements": [_replacement(e.span, e.new_text) for e in f.edits],
                    }
                ],
                "properties": {"applicability": f.applicability.value},
            }
            for f in d.fixes
            if f.edits
        ]
    properties: dict[str, Any] = {}
    if d.severity is Severity.HINT:
        properties["severity"] = "hint"
    if d.notes:
        properties["notes"] = list(d.notes)
    if d.data:
        properties["data"] = jsonable(d.data)
    if d.source != "cake":
        properties["origin"] = d.source
    if properties:
        result["properties"] = properties
    return result


def _replacement(span: Span, new_text: str) -> dict[str, Any]:
    out: dict[str, Any] = {"deletedRegion": _region(span)}
    if new_text:
        out["insertedContent"] = {"text": new_text}
    return out


def to_sarif(
    diags: Iterable[Diagnostic],
    sources: Mapping[str, SourceFile] | None = None,
    *,
    repo_root: Path | None = None,
    information_uri: str = INFORMATION_URI,
    help_base_uri: str = HELP_BASE_URI,
    rule_docs: RuleDocs | None = None,
) -> dict[str, Any]:
    """A SARIF 2.1.0 log with one run.

    `help_base_uri`, an absolute URL, is joined with `docs/rules/CODE.md` for each rule's
    `helpUri`.  `rule_docs` reads a rule's page for its `help` and `fullDescription`;
    without it both fall back to the rule's summary.  Relative diagnostic paths are taken
    relative to the current directory.
    """
    diags = list(diags)
    srcs = sources or {}
    codes = sorted({d.code for d in diags})
    index = {code: i for i, code in enumerate(codes)}
    artifacts = _Artifacts(repo_root)
    fingerprints = _fingerprints(diags, srcs)
    run: dict[str, Any] = {
        "tool": {
            "driver": {
                "name": "cake",
                "version": __version__,
                "semanticVersion": __version__,
                "informationUri": information_uri,
                "rules": [_rule(code, help_base_uri, rule_docs) for code in codes],
            }
        },
        "columnKind": "utf16CodeUnits",
        "results": [
            _result(d, index[d.code], artifacts, fingerprints[i]) for i, d in enumerate(diags)
        ],
    }
    if artifacts.root is not None:
        run["originalUriBaseIds"] = {SRCROOT: {"uri": artifacts.root.as_uri().rstrip("/") + "/"}}
    return {"$schema": SARIF_SCHEMA_URI, "version": "2.1.0", "runs": [run]}


def render_sarif(
    diags: Iterable[Diagnostic],
    sources: Mapping[str, SourceFile] | None = None,
    *,
    repo_root: Path | None = None,
    information_uri: str = INFORMATION_URI,
    help_base_uri: str = HELP_BASE_URI,
    rule_docs: RuleDocs | None = None,
) -> str:
    log = to_sarif(
        diags,
        sources,
        repo_root=repo_root,
        information_uri=information_uri,
        help_base_uri=help_base_uri,
        rule_docs=rule_docs,
    )
    return json.dumps(log, indent=2) + "\n"
