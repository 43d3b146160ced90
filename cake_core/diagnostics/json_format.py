"""Diagnostics as versioned JSON, for scripts, the language server and agents.

The format is described in `docs/diagnostics.md` and by the JSON Schema in
`docs/diagnostics.schema.json`.  Every position carries both the UTF-16 column that
editors and SARIF use and the UTF-8 byte column and offset that tree-sitter and edits
use, so that a reader never has to re-open the file to convert.  `from_json_obj`
reads the format back into `Diagnostic` objects: what `to_json_obj` writes,
`from_json_obj` returns unchanged.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import asdict, is_dataclass
from enum import Enum
from pathlib import PurePath
from typing import Any

from cake_core import __version__
from cake_core.diagnostics.codes import lookup
from cake_core.diagnostics.model import (
    Applicability,
    Diagnostic,
    Fix,
    Related,
    Severity,
    TextEdit,
)
from cake_core.diagnostics.text import summarize
from cake_core.source import Position, SourceFile, Span

FORMAT_VERSION = 1
"""Bumped when a field is removed or changes meaning; new optional fields keep it."""


class DiagnosticsFormatError(ValueError):
    """The JSON is not diagnostics in a format version this reader understands."""


def docs_path(code: str) -> str | None:
    """The repository-relative docs page of a built-in code (plugins document their own)."""
    rule = lookup(code)
    if rule is None or rule.origin != "cake":
        return None
    return f"docs/rules/{rule.code}.md"


# --- writing ---------------------------------------------------------------------------------
def _position(p: Position) -> dict[str, int]:
    return {
        "line": p.line + 1,
        "column": p.col_utf16 + 1,
        "byte_column": p.col_byte + 1,
        "offset": p.offset,
    }


def _range(span: Span) -> dict[str, dict[str, int]]:
    return {"start": _position(span.start), "end": _position(span.end)}


def jsonable(value: object) -> Any:
    """`Diagnostic.data` made of plain JSON values (tuples become lists, enums values)."""
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if value == value and abs(value) != float("inf") else str(value)
    if isinstance(value, Enum):
        return jsonable(value.value)
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    if isinstance(value, set | frozenset):
        return sorted((jsonable(v) for v in value), key=repr)
    if isinstance(value, PurePath):
        return value.as_posix()
    if is_dataclass(value) and not isinstance(value, type):
        return jsonable(asdict(value))
    return str(value)


def diagnostic_to_json(d: Diagnostic, source: SourceFile | None = None) -> dict[str, Any]:
    rule = lookup(d.code)
    obj: dict[str, Any] = {
        "code": d.code,
        "name": rule.name if rule is not None else None,
        "severity": d.severity.value,
        "message": d.message,
        "path": d.path,
        "range": _range(d.span),
        "related": [
            {"path": r.path, "range": _range(r.span), "message": r.message} for r in d.related
        ],
        "notes": list(d.notes),
        "fixes": [
            {
                "title": f.title,
                "applicability": f.applicability.value,
                "edits": [{"range": _range(e.span), "new_text": e.new_text} for e in f.edits],
            }
            for f in d.fixes
        ],
        "source": d.source,
        "docs": docs_path(d.code),
        "data": jsonable(d.data),
    }
    if source is not None:
        obj["snippet"] = source.snippet(d.span)
    return obj


def to_json_obj(
    diags: Iterable[Diagnostic], sources: Mapping[str, SourceFile] | None = None
) -> dict[str, Any]:
    """The whole report; with `sources`, each diagnostic also carries its `snippet`."""
    diags = list(diags)
    srcs = sources or {}
    s = summarize(diags)
    return {
        "version": FORMAT_VERSION,
        "tool": {"name": "cake", "version": __version__},
        "diagnostics": [diagnostic_to_json(d, srcs.get(d.path)) for d in diags],
        "summary": {
            "total": s.total,
            "error": s.errors,
            "warning": s.warnings,
            "info": s.infos,
            "hint": s.hints,
            "files": s.files,
            "fixable": s.fixable,
        },
    }


def render_json(
    diags: Iterable[Diagnostic],
    sources: Mapping[str, SourceFile] | None = None,
    *,
    indent: int | None = 2,
) -> str:
    """The report as text (ASCII-only, so any terminal or pipe can carry it)."""
    return json.dumps(to_json_obj(diags, sources), indent=indent) + "\n"


# --- reading ---------------------------------------------------------------------------------
def _int(obj: Mapping[str, Any], key: str, minimum: int) -> int:
    value = obj[key]
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise DiagnosticsFormatError(f"{key!r} must be an integer >= {minimum}, got {value!r}")
    return value


def _str(obj: Mapping[str, Any], key: str) -> str:
    value = obj[key]
    if not isinstance(value, str):
        raise DiagnosticsFormatError(f"{key!r} must be a string, got {value!r}")
    return value


def _optional_str(obj: Mapping[str, Any], key: str) -> str | None:
    return None if obj.get(key) is None else _str(obj, key)


def _read_position(obj: Mapping[str, Any]) -> Position:
    return Position(
        offset=_int(obj, "offset", 0),
        line=_int(obj, "line", 1) - 1,
        col_byte=_int(obj, "byte_column", 1) - 1,
        col_utf16=_int(obj, "column", 1) - 1,
    )


def _read_range(obj: Mapping[str, Any]) -> Span:
    return Span(_read_position(obj["start"]), _read_position(obj["end"]))


def _read_fix(obj: Mapping[str, Any]) -> Fix:
    return Fix(
        title=_str(obj, "title"),
        edits=tuple(
            TextEdit(_read_range(e["range"]), _str(e, "new_text")) for e in obj["edits"]
        ),
        applicability=Applicability(obj.get("applicability", "safe")),
    )


def diagnostic_from_json(obj: Mapping[str, Any]) -> Diagnostic:
    data = obj.get("data") or {}
    if not isinstance(data, dict):
        raise DiagnosticsFormatError(f"'data' must be an object, got {data!r}")
    return Diagnostic(
        code=_str(obj, "code"),
        severity=Severity(obj["severity"]),
        message=_str(obj, "message"),
        span=_read_range(obj["range"]),
        path=_str(obj, "path"),
        related=tuple(
            Related(_read_range(r["range"]), _str(r, "message"), _optional_str(r, "path"))
            for r in obj.get("related", ())
        ),
        notes=tuple(str(n) for n in obj.get("notes", ())),
        fixes=tuple(_read_fix(f) for f in obj.get("fixes", ())),
        source=obj.get("source") or "cake",
        data=dict(data),
    )


def from_json_obj(obj: Mapping[str, Any]) -> list[Diagnostic]:
    """Diagnostics from a report written by `to_json_obj` (any version-1 writer)."""
    if not isinstance(obj, Mapping):
        raise DiagnosticsFormatError("a diagnostics report must be a JSON object")
    version = obj.get("version")
    if version != FORMAT_VERSION:
        raise DiagnosticsFormatError(
            f"unsupported diagnostics format version {version!r} (expected {FORMAT_VERSION})"
        )
    try:
        return [diagnostic_from_json(d) for d in obj["diagnostics"]]
    except DiagnosticsFormatError:
        raise
    except (KeyError, TypeError, ValueError, AttributeError) as err:
        raise DiagnosticsFormatError(f"malformed diagnostics report: {err!r}") from err
