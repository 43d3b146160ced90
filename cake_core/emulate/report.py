"""The CPU runtime's account of one launch (`cake_emu_report()`), read and summarised.

The runtime writes JSON (docs/emulation.md): whether the launch was clean, its findings
(a kind, a message, the .cake line of the statement at fault and, for a deadlock, every
waiting thread with its own line) and a few statistics.  A deadlocked 256-thread block
would print 256 lines, so `summary` groups threads that wait at the same line in the
same state and writes their indices as ranges, and caps what it prints; the parsed report
keeps everything for JSON consumers.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

KINDS = frozenset({"deadlock", "barrier", "smem_bounds", "uninitialized_read",
                   "global_bounds", "tensor_map", "mbarrier", "collective", "proxy_fence",
                   "setmaxnreg", "trap", "fault", "launch"})
#: What a summary prints at most: findings, thread groups per finding, blocks per group.
MAX_FINDINGS = 8
MAX_GROUPS = 6
MAX_BLOCKS = 4


@dataclass(frozen=True)
class EmuThread:
    block: tuple[int, int, int]
    thread: int
    file: str = ""
    line: int = 0
    state: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"block": list(self.block), "thread": self.thread, "file": self.file,
                "line": self.line, "state": self.state}


@dataclass(frozen=True)
class EmuFinding:
    kind: str
    message: str
    file: str = ""
    line: int = 0
    """1-based .cake line (from the #line directives); 0 when the runtime does not know."""
    threads: tuple[EmuThread, ...] = ()

    @property
    def where(self) -> str:
        return location(self.file, self.line)

    def to_json(self, max_threads: int = 64) -> dict[str, Any]:
        return {"kind": self.kind, "message": self.message, "file": self.file,
                "line": self.line, "threads": [t.to_json() for t in self.threads[:max_threads]],
                "thread_count": len(self.threads)}


@dataclass(frozen=True)
class EmuReport:
    ok: bool
    findings: tuple[EmuFinding, ...] = ()
    stats: dict[str, Any] = field(default_factory=dict)


def location(file: str, line: int) -> str:
    if file and line:
        return f"{file}:{line}"
    return file or (f"line {line}" if line else "")


def _int(v: Any, default: int = 0) -> int:
    try:
        return int(v)
    except (TypeError, ValueError):
        return default


def _thread(d: Any) -> EmuThread:
    if not isinstance(d, dict):
        return EmuThread((0, 0, 0), 0, state=str(d))
    raw = d.get("block")
    b = [_int(x) for x in raw[:3]] if isinstance(raw, list) else []
    block = (*b, 0, 0, 0)[:3]
    return EmuThread((block[0], block[1], block[2]), _int(d.get("thread")),
                     str(d.get("file") or ""), _int(d.get("line")), str(d.get("state") or ""))


def _finding(d: Any) -> EmuFinding:
    if not isinstance(d, dict):
        return EmuFinding("fault", f"unreadable finding in the runtime's report: {d!r}")
    threads = d.get("threads")
    return EmuFinding(str(d.get("kind") or "fault"), str(d.get("message") or ""),
                      str(d.get("file") or ""), _int(d.get("line")),
                      tuple(_thread(t) for t in threads) if isinstance(threads, list) else ())


def parse_report(text: str | bytes | None) -> EmuReport:
    """The report a runtime returned; a missing or malformed one becomes a failed report
    that says so (a runtime that cannot describe a launch did not run it cleanly)."""
    if text is None:
        return EmuReport(False, (EmuFinding("fault", "the runtime returned no report"),))
    if isinstance(text, bytes):
        text = text.decode("utf-8", errors="replace")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        return EmuReport(False, (EmuFinding(
            "fault", f"the runtime's report is not JSON ({exc.msg} at {exc.pos}): "
                     f"{text[:200]!r}"),))
    if not isinstance(data, dict):
        return EmuReport(False, (EmuFinding("fault", "the runtime's report is not an "
                                                     f"object: {text[:200]!r}"),))
    raw = data.get("findings")
    findings = tuple(_finding(f) for f in raw) if isinstance(raw, list) else ()
    stats = data.get("stats")
    return EmuReport(bool(data.get("ok", not findings)), findings,
                     dict(stats) if isinstance(stats, dict) else {})


def ranges(values: Sequence[int]) -> str:
    """`0-31, 64, 66-67`: sorted integers with runs collapsed."""
    vs = sorted(set(values))
    parts: list[str] = []
    i = 0
    while i < len(vs):
        j = i
        while j + 1 < len(vs) and vs[j + 1] == vs[j] + 1:
            j += 1
        parts.append(str(vs[i]) if i == j else f"{vs[i]}-{vs[j]}")
        i = j + 1
    return ", ".join(parts)


def thread_lines(f: EmuFinding, max_groups: int = MAX_GROUPS,
                 max_blocks: int = MAX_BLOCKS) -> list[str]:
    """One line per (location, state): how many threads, in which blocks, which ones."""
    groups: dict[tuple[str, int, str], dict[tuple[int, int, int], list[int]]] = {}
    for t in f.threads:
        groups.setdefault((t.file, t.line, t.state), {}).setdefault(t.block, []).append(
            t.thread)
    out = []
    ordered = sorted(groups.items(), key=lambda kv: -sum(len(v) for v in kv[1].values()))
    for (file, line, state), blocks in ordered[:max_groups]:
        n = sum(len(v) for v in blocks.values())
        where = location(file, line) or "an unknown line"
        what = f" ({state})" if state else ""
        shown = [f"block ({b[0]},{b[1]},{b[2]}) thread{'s' if len(ts) > 1 else ''} "
                 f"{ranges(ts)}" for b, ts in sorted(blocks.items())[:max_blocks]]
        more = len(blocks) - max_blocks
        tail = f"; {more} more block{'s' if more > 1 else ''}" if more > 0 else ""
        out.append(f"{n} thread{'s' if n != 1 else ''} at {where}{what}: "
                   + "; ".join(shown) + tail)
    rest = len(ordered) - max_groups
    if rest > 0:
        out.append(f"... and {rest} more place{'s' if rest > 1 else ''} where threads wait")
    return out


def describe(f: EmuFinding) -> str:
    """`deadlock at k.cake:12: every thread waits`."""
    where = f" at {f.where}" if f.where else ""
    return f"{f.kind}{where}: {f.message}" if f.message else f"{f.kind}{where}"


def summary(report: EmuReport, max_findings: int = MAX_FINDINGS) -> str:
    """Every finding (capped) with its waiting threads, one per line."""
    lines: list[str] = []
    for f in report.findings[:max_findings]:
        lines.append(describe(f))
        lines += ["  " + t for t in thread_lines(f)]
    rest = len(report.findings) - max_findings
    if rest > 0:
        lines.append(f"... and {rest} more finding{'s' if rest > 1 else ''}")
    return "\n".join(lines)


__all__ = ["KINDS", "MAX_FINDINGS", "EmuFinding", "EmuReport", "EmuThread", "describe",
           "location", "parse_report", "ranges", "summary", "thread_lines"]
