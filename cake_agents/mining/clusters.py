"""Recurring failures across runs: clusters by signature, with examples and prime candidates.

A cluster is every failure row with one signature digest (`gate:code:construct`, see
`cake_agents/signature.py`), over the runs mined.  It carries its counts (failures,
candidates, runs), first and last time seen, the stage that caught it, a few examples
(the construct line with context, from the candidate text, and the candidate's parent
chain), and what promotion, if any, came of it.

Stages: the checker's diagnostics (gate `check`, through the language server) and the
evaluator's first gate (`static`) are both the **static** verifier; `sim` is the
simulator; `ptxas` the **compile** gate; `gpu` the GPU runner; `coder` and `model` are
the agents' own failures (a tactic that declined, a malformed model answer).

**Prime candidates** are failures a static rule could have caught but none did.  The
heuristic, all of which must hold:

1. caught late: at the sim, compile or GPU stage;
2. a finding that points at its cause: one of `PRIME_CODES` (races, deadlocks,
   out-of-bounds and uninitialized reads, async results read early, barrier misuse,
   copies pending at exit, lowering and nvcc errors).  Wrong results (CK507, CK701) point
   at the output, not at the mistake, and resource findings (CK603-CK607) depend on the
   register allocator, so they are not prime;
3. the construct is in the kernel text: the signature has a construct line that calls a
   CAKE primitive;
4. the static verifier never flagged that construct: no failure at the static stage in
   the mined runs has the same construct shape, and no promotion covers the signature;
5. the construct tells failing kernels from passing ones: no kernel that passed every
   gate in the mined runs has a line of the same shape (a generic line such as
   `s = ab.wait()` is where a deadlock shows, not what causes it).
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from cake_agents.mining.ledger import Ledger, Promotion
from cake_agents.signature import construct_shape
from cake_agents.store import RunsStore

STAGES = {"check": "static", "static": "static", "sim": "sim", "cost": "cost",
          "ptxas": "compile", "gpu": "gpu", "coder": "agent", "model": "agent"}
STAGE_ORDER = ("agent", "static", "sim", "cost", "compile", "gpu")
LATE_STAGES = frozenset({"sim", "compile", "gpu"})
PRIME_CODES = frozenset({"CK501", "CK502", "CK503", "CK504", "CK505", "CK506", "CK508",
                         "CK509", "CK601", "CK602"})
CALIBRATION_CODES = frozenset({"CK603", "CK604", "CK605", "CK606", "CK607", "E-COST"})
PRIMITIVE_CODES = frozenset({"CK102"})
MAX_EXAMPLES = 3
CONTEXT_LINES = 2
MAX_TRAJECTORY = 12
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def stage_of(gate: str) -> str:
    return STAGES.get(gate, gate)


@dataclass
class Failure:
    """One failure row, with the time its candidate was written."""

    run_id: str
    hash: str
    step: int
    gate: str
    code: str
    key: str
    digest: str
    construct: str
    norm_message: str
    message: str
    created: float

    @property
    def stage(self) -> str:
        return stage_of(self.gate)


@dataclass
class Example:
    run_id: str
    hash: str
    step: int
    line: int | None
    """0-based line of the construct in the candidate text (None: not located)."""
    message: str
    snippet: list[tuple[int, str, bool]] = field(default_factory=list)
    """(1-based line number, text, is the construct line)."""
    trajectory: list[dict[str, Any]] = field(default_factory=list)
    """The candidate's parent chain, newest first: hash, step, tactic, origin, status."""

    def to_json(self) -> dict[str, Any]:
        return {"run": self.run_id, "hash": self.hash, "step": self.step,
                "line": None if self.line is None else self.line + 1,
                "message": self.message,
                "snippet": [{"line": n, "text": t, "hit": h} for n, t, h in self.snippet],
                "trajectory": self.trajectory}


@dataclass
class Cluster:
    digest: str
    key: str
    gate: str
    code: str
    construct: str
    norm_message: str
    count: int
    runs: list[str]
    candidates: list[str]
    first_seen: float
    last_seen: float
    examples: list[Example] = field(default_factory=list)
    prime: bool = False
    why: str = ""
    """Why the cluster is, or is not, a prime candidate."""
    suggest: str = ""
    """The promotion that fits: rule, tactic, primitive, calibration or ''."""
    promoted: list[dict[str, Any]] = field(default_factory=list)
    """Promotions made from this signature (ledger rows, abridged)."""
    promoted_from: dict[str, Any] | None = None
    """For failures reported by a promoted item: the promotion and its origin."""
    caught_statically: dict[str, Any] | None = None
    """For a promoted signature: where its promoted items have fired since."""

    @property
    def stage(self) -> str:
        return stage_of(self.gate)

    def to_json(self) -> dict[str, Any]:
        return {"digest": self.digest, "signature": self.key, "gate": self.stage,
                "recorded_gate": self.gate, "code": self.code, "construct": self.construct,
                "message": self.norm_message, "count": self.count, "runs": self.runs,
                "candidates": len(self.candidates), "first_seen": _iso(self.first_seen),
                "last_seen": _iso(self.last_seen), "prime": self.prime, "why": self.why,
                "suggest": self.suggest, "promoted": self.promoted,
                "promoted_from": self.promoted_from,
                "caught_statically": self.caught_statically,
                "examples": [e.to_json() for e in self.examples]}


def _iso(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(t)) if t else ""


# --- loading ----------------------------------------------------------------------------------
def load_failures(store: RunsStore, run_ids: Sequence[str]) -> list[Failure]:
    out: list[Failure] = []
    for rid in run_ids:
        run = store.run(rid) or {}
        t_run = float(run.get("created") or 0.0)
        created = {c["hash"]: float(c["created"] or t_run) for c in store.candidates(rid)}
        for f in store.failures(rid):
            out.append(Failure(rid, f["hash"], int(f["step"] or 0), f["gate"], f["code"],
                               f["signature"], f["digest"], f["construct"] or "",
                               f["norm_message"] or "", f["message"] or "",
                               created.get(f["hash"], t_run)))
    return out


def passing_shapes(store: RunsStore, run_ids: Sequence[str]) -> set[str]:
    """Construct shapes of every line of every kernel that passed all its gates."""
    shapes: set[str] = set()
    seen: set[str] = set()
    for rid in run_ids:
        for row in store.evaluations(rid):
            if row["gate"] != "_result" or row["status"] != "pass" or row["hash"] in seen:
                continue
            seen.add(row["hash"])
            text = store.candidate_text(rid, row["hash"]) or ""
            shapes.update(construct_shape(ln) for ln in text.splitlines() if ln.strip())
    return shapes


# --- examples ---------------------------------------------------------------------------------
def locate(store: RunsStore, f: Failure, text: str) -> int | None:
    """The 0-based line of the failure's construct in its candidate's text."""
    if not f.construct:
        return None
    lines = text.splitlines()

    def ok(ln: int) -> bool:
        return 0 <= ln < len(lines) and construct_shape(lines[ln]) == f.construct

    if f.gate == "check":
        for d in store.diagnostics(f.run_id, f.hash):
            if d["code"] == f.code and ok(int(d["line"])):
                return int(d["line"])
    else:
        for row in store.evaluations(f.run_id, f.hash):
            if row["gate"] != f.gate:
                continue
            for x in (row["detail"] or {}).get("findings", []):
                if x.get("code") == f.code and ok(int(x.get("line") or 0)):
                    return int(x.get("line") or 0)
    return next((i for i in range(len(lines)) if ok(i)), None)


def trajectory(store: RunsStore, run_id: str, hash_: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    seen: set[str] = set()
    h: str | None = hash_
    while h and h not in seen and len(out) < MAX_TRAJECTORY:
        seen.add(h)
        row = store.candidate(run_id, h)
        if row is None:
            break
        res = [r for r in store.evaluations(run_id, h) if r["gate"] == "_result"]
        out.append({"hash": h, "step": row["step"], "tactic": row["tactic"],
                    "origin": row["origin"],
                    "status": res[0]["status"] if res else "not evaluated"})
        h = row["parent"] or None
    return out


def example_of(store: RunsStore, f: Failure) -> Example:
    text = store.candidate_text(f.run_id, f.hash) or ""
    line = locate(store, f, text)
    snippet: list[tuple[int, str, bool]] = []
    if line is not None:
        lines = text.splitlines()
        lo, hi = max(0, line - CONTEXT_LINES), min(len(lines), line + CONTEXT_LINES + 1)
        snippet = [(i + 1, lines[i], i == line) for i in range(lo, hi)]
    return Example(f.run_id, f.hash, f.step, line, f.message, snippet,
                   trajectory(store, f.run_id, f.hash))


# --- clustering -------------------------------------------------------------------------------
def _names_primitive(construct: str) -> bool:
    from cake_core.primitives.registry import builtin_registry

    prims = {p.name for p in builtin_registry().all()}
    return any(t in prims for t in _IDENT.findall(construct))


def _suggest(c: Cluster) -> str:
    if c.prime:
        return "rule"
    if c.code in CALIBRATION_CODES:
        return "calibration"
    if c.code in PRIMITIVE_CODES:
        return "primitive"
    return ""


def _judge(c: Cluster, static_constructs: set[str], passing: set[str]) -> tuple[bool, str]:
    if c.promoted:
        return False, "already promoted"
    if c.stage not in LATE_STAGES:
        return False, f"caught at the {c.stage} stage already"
    if c.code not in PRIME_CODES:
        return False, f"{c.code} does not point at the construct that causes it"
    if not c.construct or not _names_primitive(c.construct):
        return False, "no construct in the kernel text to match"
    if c.construct in static_constructs:
        return False, "the static verifier already flags this construct"
    if c.construct in passing:
        return False, "the same construct appears in kernels that pass: its shape alone " \
                      "does not tell the mistake"
    return True, (f"caught at the {c.stage} stage, never by the static verifier, and the "
                  "construct is in the kernel text: a static rule can catch it")


def build_clusters(store: RunsStore, run_ids: Sequence[str], *, ledger: Ledger | None = None,
                   min_count: int = 2, examples: int = MAX_EXAMPLES) -> list[Cluster]:
    """The clusters of the given runs with at least `min_count` failures, most frequent
    first; prime candidates and promotions resolved against `ledger`."""
    failures = load_failures(store, run_ids)
    groups: dict[str, list[Failure]] = {}
    for f in failures:
        groups.setdefault(f.digest, []).append(f)
    static_constructs = {f.construct for f in failures
                         if f.stage == "static" and f.construct}
    passing = passing_shapes(store, run_ids)
    promos = ledger.promotions() if ledger is not None else []
    by_code = {c: p for p in promos for c in p.codes}
    fired: dict[int, list[Failure]] = {}
    for f in failures:
        p = by_code.get(f.code)
        if p is not None and f.created >= p.created:
            fired.setdefault(p.id, []).append(f)
    out: list[Cluster] = []
    for digest, fs in groups.items():
        if len(fs) < min_count:
            continue
        fs.sort(key=lambda f: (f.created, f.step))
        first = fs[0]
        c = Cluster(digest, first.key, first.gate, first.code, first.construct,
                    first.norm_message, len(fs), list(dict.fromkeys(f.run_id for f in fs)),
                    list(dict.fromkeys(f"{f.run_id}:{f.hash}" for f in fs)),
                    fs[0].created, fs[-1].created)
        c.promoted = [_abridged(p) for p in promos if p.digest == digest]
        origin = by_code.get(c.code)
        if origin is not None:
            c.promoted_from = {**_abridged(origin), "signature": origin.signature,
                               "digest": origin.digest}
        hits = [f for p in promos if p.digest == digest for f in fired.get(p.id, [])]
        if c.promoted:
            c.caught_statically = {
                "count": len(hits), "runs": list(dict.fromkeys(f.run_id for f in hits)),
                "stages": sorted({f.stage for f in hits}),
                "codes": sorted({f.code for f in hits})}
        c.prime, c.why = _judge(c, static_constructs, passing)
        c.suggest = _suggest(c)
        picked: list[Failure] = []
        for f in reversed(fs):  # most recent first, one per candidate
            if len(picked) >= examples:
                break
            if all(f.hash != g.hash for g in picked):
                picked.append(f)
        c.examples = [example_of(store, f) for f in picked]
        out.append(c)
    out.sort(key=lambda c: (not c.prime, -c.count, -c.last_seen, c.key))
    return out


def _abridged(p: Promotion) -> dict[str, Any]:
    return {"id": p.id, "kind": p.kind, "name": p.name, "codes": p.codes,
            "plugin": p.plugin, "created": _iso(p.created)}


def resolve_runs(store: RunsStore, refs: Iterable[str]) -> list[str]:
    """Run ids for `refs` (ids, unique prefixes, `latest`); every run when none given."""
    refs = list(refs)
    if not refs:
        return [r["run_id"] for r in store.list_runs()]
    return list(dict.fromkeys(store.find_run(r) for r in refs))
