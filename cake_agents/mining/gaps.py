"""Failures the agent loop leaves out of the `failures` table, recovered from `evaluations`.

The evaluator records, as failures, the first findings of the gate that failed.  Three
kinds of failure would otherwise be visible only inside the evaluation's JSON detail:

- findings of a late gate that *passed*: simulator warnings (CK509 pending at exit,
  CK510 unsupported), ptxas warnings (CK603-CK608) on code that compiled;
- findings of the failed gate past the first few;
- a gate that failed without any finding (the GPU gate when its runner reports only a
  pass/fail): recorded as `E-<GATE>` with the gate's error or status as the message.

`record_gate_gaps` writes them with the same normalized signatures as every other
failure; it is idempotent (a finding already in the table is not written again), so it
runs both right after an evaluation and when `cake failures` reads an older run.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from cake_agents.signature import signature
from cake_agents.store import RunsStore

#: Gates whose findings are failures even when the gate passes (warnings included).
LATE_GATES = ("sim", "ptxas", "gpu")
RESULT_GATE = "_result"
#: Ordinals of the rows written here start past the evaluator's own.
ORDINAL_BASE = 200


def gate_findings(res: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """(gate, finding) for every failure-worthy finding of one evaluation result."""
    out: list[tuple[str, dict[str, Any]]] = []
    for gate, g in (res.get("gates") or {}).items():
        status = g.get("status", "")
        findings = list(g.get("findings") or [])
        if status == "fail":
            if not findings:
                detail = g.get("detail") or {}
                why = detail.get("error") if isinstance(detail, dict) else None
                findings = [{"code": f"E-{gate.upper()}", "severity": "error", "line": 0,
                             "message": str(why or f"the {gate} gate failed without a "
                                                     "finding"), "line_text": ""}]
            out.extend((gate, f) for f in findings)
        elif status == "pass" and gate in LATE_GATES:
            out.extend((gate, f) for f in findings)
    return out


def _line_text(f: dict[str, Any], lines: list[str]) -> str:
    """The finding's line, as the evaluator reads it (the candidate's line as fallback)."""
    if f.get("line_text"):
        return str(f["line_text"])
    ln = int(f.get("line") or 0)
    return lines[ln] if f.get("line") and 0 <= ln < len(lines) else ""


def record_gate_gaps(store: RunsStore, run_id: str, hash_: str, step: int,
                     res: dict[str, Any], *, text: str | None = None, move: str = "") -> int:
    """Write the findings of `res` that have no failure row yet; returns how many.

    `text` is the candidate's text (read from the store when not given): a finding
    without its own line text is signed with the candidate's line, as the evaluator does.
    """
    if text is None:
        text = store.candidate_text(run_id, hash_) or ""
    lines = text.splitlines()
    have = Counter((f["gate"], f["code"], f["digest"]) for f in store.failures(run_id)
                   if f["hash"] == hash_)
    written = 0
    for i, (gate, f) in enumerate(gate_findings(res)):
        sig = signature(gate, str(f.get("code", "")), str(f.get("message", "")),
                        _line_text(f, lines))
        key = (gate, sig.code, sig.digest)
        if have[key] > 0:
            have[key] -= 1
            continue
        store.add_failure(run_id, hash_=hash_, step=step, sig=sig,
                          message=str(f.get("message", "")), move=move,
                          ordinal=ORDINAL_BASE + i)
        written += 1
    return written


def backfill_run(store: RunsStore, run_id: str) -> int:
    """Complete one run's failure rows from its stored evaluation results."""
    steps = {c["hash"]: int(c["step"] or 0) for c in store.candidates(run_id)}
    written = 0
    for row in store.evaluations(run_id):
        if row["gate"] != RESULT_GATE or not isinstance(row["detail"], dict):
            continue
        written += record_gate_gaps(store, run_id, row["hash"], steps.get(row["hash"], 0),
                                    row["detail"])
    return written
