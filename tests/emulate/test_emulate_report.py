"""Reading the CPU runtime's report and summarising it for people."""

from __future__ import annotations

import json

from cake_core.emulate.report import (
    KINDS,
    MAX_FINDINGS,
    EmuFinding,
    EmuThread,
    parse_report,
    ranges,
    summary,
    thread_lines,
)


def _thread(block: int, thread: int, line: int, state: str = "wait") -> dict[str, object]:
    return {"block": [block, 0, 0], "thread": thread, "file": "k.cake", "line": line,
            "state": state}


def test_a_full_report() -> None:
    text = json.dumps({
        "ok": False,
        "findings": [{"kind": "deadlock", "message": "every thread waits", "file": "k.cake",
                      "line": 12, "threads": [_thread(0, 0, 14), _thread(1, 5, 15)]}],
        "stats": {"blocks": 2, "threads": 256, "switches": 10, "async_ops": 3,
                  "seconds": 0.5}})
    rep = parse_report(text.encode())
    assert not rep.ok and rep.stats["switches"] == 10
    (f,) = rep.findings
    assert (f.kind, f.file, f.line, f.where) == ("deadlock", "k.cake", 12, "k.cake:12")
    assert f.threads == (EmuThread((0, 0, 0), 0, "k.cake", 14, "wait"),
                         EmuThread((1, 0, 0), 5, "k.cake", 15, "wait"))
    assert f.to_json()["thread_count"] == 2


def test_a_broken_report_fails_and_says_why() -> None:
    for text in (None, "not json", "[1, 2]"):
        rep = parse_report(text)
        assert not rep.ok and rep.findings[0].kind == "fault"
        assert rep.findings[0].message
    odd = parse_report('{"findings": [{"kind": "trap", "line": "x", "threads": [7]}, 3]}')
    assert not odd.ok  # "ok" missing: a report with findings is not a clean launch
    assert odd.findings[0].line == 0 and odd.findings[0].threads[0].state == "7"
    assert odd.findings[1].kind == "fault"
    assert parse_report('{"findings": []}').ok


def test_ranges() -> None:
    assert ranges([3, 0, 1, 2, 7, 9, 8, 8]) == "0-3, 7-9"
    assert ranges([5]) == "5" and ranges([]) == ""


def test_threads_are_grouped_by_line_and_state_and_capped() -> None:
    threads = [EmuThread((b, 0, 0), t, "k.cake", 40, "mbarrier wait")
               for b in range(6) for t in range(96)]
    threads += [EmuThread((0, 0, 0), t, "k.cake", 50 + t % 9, "bar.sync 1")
                for t in range(96, 128)]
    lines = thread_lines(EmuFinding("deadlock", "stuck", "k.cake", 40, tuple(threads)))
    assert lines[0] == ("576 threads at k.cake:40 (mbarrier wait): block (0,0,0) threads "
                        "0-95; block (1,0,0) threads 0-95; block (2,0,0) threads 0-95; "
                        "block (3,0,0) threads 0-95; 2 more blocks")
    assert len(lines) == 7 and lines[-1] == "... and 4 more places where threads wait"
    assert all("bar.sync 1" in ln for ln in lines[1:-1])


def test_summary_lists_findings_and_caps_them() -> None:
    findings = [{"kind": "smem_bounds", "message": f"offset {i}", "file": "k.cake",
                 "line": i + 1} for i in range(MAX_FINDINGS + 3)]
    text = summary(parse_report(json.dumps({"ok": False, "findings": findings})))
    lines = text.splitlines()
    assert lines[0] == "smem_bounds at k.cake:1: offset 0"
    assert lines[-1] == "... and 3 more findings" and len(lines) == MAX_FINDINGS + 1
    assert "deadlock" in KINDS and "uninitialized_read" in KINDS
