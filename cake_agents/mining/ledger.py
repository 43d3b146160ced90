"""The promotion ledger: every compiler change `cake promote` made, and where it fired since.

One SQLite file, `<runs-dir>/ledger.sqlite`, next to the runs store whose failures the
promotions came from (so a runs directory carries its own history of what it taught the
compiler).  Two tables:

- `promotions`: one row per promoted item: kind, name, the codes it emits, the plugin
  and folder it was written to, its trigger (signature digest and key, gate, code,
  construct, failure count, runs, candidates), its IR patterns, its regression tests and
  examples, who drafted the body (`skeleton` or `model:<name>`), whether its tests
  passed when it was written, and any problems found then;
- `firings`: the regression surface: for each promotion, every later run and candidate
  in which one of its codes was reported (refreshed from the runs store by
  `cake failures` and `cake promote --ledger`).
"""

from __future__ import annotations

import json
import sqlite3
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

LEDGER_NAME = "ledger.sqlite"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS promotions (
    id INTEGER PRIMARY KEY AUTOINCREMENT, created REAL, kind TEXT, name TEXT,
    codes TEXT, plugin TEXT, plugin_dir TEXT, module TEXT, digest TEXT, signature TEXT,
    gate TEXT, code TEXT, construct TEXT, count INTEGER, runs TEXT, candidates TEXT,
    patterns TEXT, tests TEXT, examples TEXT, drafted_by TEXT, validated INTEGER,
    problems TEXT);
CREATE TABLE IF NOT EXISTS firings (
    promotion INTEGER, run_id TEXT, hash TEXT, step INTEGER, gate TEXT, code TEXT,
    count INTEGER, PRIMARY KEY (promotion, run_id, hash, gate, code));
CREATE INDEX IF NOT EXISTS promotions_by_digest ON promotions (digest);
"""
_JSON = ("codes", "runs", "candidates", "patterns", "tests", "examples", "problems")


@dataclass
class Promotion:
    """One ledger row (lists decoded)."""

    kind: str
    name: str
    codes: list[str]
    plugin: str
    plugin_dir: str
    module: str
    digest: str
    signature: str
    gate: str
    code: str
    construct: str
    count: int
    runs: list[str]
    candidates: list[str]
    patterns: list[str] = field(default_factory=list)
    tests: list[str] = field(default_factory=list)
    examples: list[str] = field(default_factory=list)
    drafted_by: str = "skeleton"
    validated: bool = False
    problems: list[str] = field(default_factory=list)
    id: int = 0
    created: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return dict(vars(self))


class Ledger:
    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._conn = sqlite3.connect(self.path, timeout=30.0)
        self._conn.row_factory = sqlite3.Row
        self._conn.executescript(_SCHEMA)
        self._conn.commit()

    @classmethod
    def beside(cls, runs_dir: Path) -> Ledger:
        return cls(Path(runs_dir) / LEDGER_NAME)

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def add(self, p: Promotion) -> int:
        row = p.to_json()
        row.pop("id")
        row["created"] = p.created or time.time()
        row["validated"] = int(bool(p.validated))
        for k in _JSON:
            row[k] = json.dumps(row[k])
        cols = ", ".join(row)
        marks = ", ".join("?" for _ in row)
        cur = self._conn.execute(f"INSERT INTO promotions ({cols}) VALUES ({marks})",
                                 tuple(row.values()))
        self._conn.commit()
        return int(cur.lastrowid or 0)

    def promotions(self) -> list[Promotion]:
        out = []
        for r in self._conn.execute("SELECT * FROM promotions ORDER BY id").fetchall():
            d = dict(r)
            for k in _JSON:
                d[k] = json.loads(d[k] or "[]")
            d["validated"] = bool(d["validated"])
            out.append(Promotion(**d))
        return out

    def by_digest(self, digest: str) -> list[Promotion]:
        return [p for p in self.promotions() if p.digest == digest]

    def by_code(self) -> dict[str, Promotion]:
        """Code emitted by a promoted item -> its promotion (the latest wins)."""
        return {c: p for p in self.promotions() for c in p.codes}

    # -- the regression surface ------------------------------------------------------------
    def refresh_firings(self, store: Any) -> int:
        """Record, for every promotion, the runs created after it in which it fired.

        A firing is a failure row (any gate) or a diagnostic row (warnings included)
        carrying one of the promotion's codes, in a run started after the promotion."""
        promos = self.promotions()
        if not promos:
            return 0
        by_code: dict[str, list[Promotion]] = {}
        for p in promos:
            for c in p.codes:
                by_code.setdefault(c, []).append(p)
        hits: dict[tuple[int, str, str, str, str], list[int]] = {}
        for run in store.list_runs():
            rid, created = run["run_id"], float(run["created"] or 0.0)
            rows = [(f["hash"], int(f["step"] or 0), f["gate"], f["code"])
                    for f in store.failures(rid) if f["code"] in by_code]
            rows += [(d["hash"], int(d["step"] or 0), "check", d["code"])
                     for d in store.diagnostics(rid) if d["code"] in by_code
                     and d["severity"] != "error"]
            for hash_, step, gate, code in rows:
                for p in by_code[code]:
                    if created < p.created:
                        continue
                    slot = hits.setdefault((p.id, rid, hash_, gate, code), [step, 0])
                    slot[0] = min(slot[0], step)
                    slot[1] += 1
        with self._conn:
            for (pid, rid, hash_, gate, code), (step, n) in hits.items():
                self._conn.execute("INSERT OR REPLACE INTO firings VALUES (?,?,?,?,?,?,?)",
                                   (pid, rid, hash_, step, gate, code, n))
        return len(hits)

    def firings(self, promotion: int | None = None) -> list[dict[str, Any]]:
        sql = "SELECT * FROM firings" + (" WHERE promotion = ?" if promotion else "") + \
              " ORDER BY promotion, run_id, step"
        args = (promotion,) if promotion else ()
        return [dict(r) for r in self._conn.execute(sql, args).fetchall()]
