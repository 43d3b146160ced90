"""The runs store: one SQLite file (`runs.sqlite`) holding every run under a run directory.

Tables: runs, candidates (text, hash, parent, tactic), proposals (which step proposed
which candidate), diagnostics, evaluations (one row per gate), usage (tokens and cost per
model call, per node and candidate), failures (with a normalized signature, see
`signature.py`), progress (one row per evaluation) and artifacts (dispatcher, ...).

Every write is keyed so that repeating it changes nothing: a node that re-runs after a
crash (LangGraph resumes from the last checkpoint, so the interrupted node runs again)
writes the same rows under the same keys.  Model answers are kept in `usage`, so a
resumed run replays an answer it already paid for instead of calling the model again.
Every string goes through `redact.scrub` on the way in.

A run's stored status is what its process last said.  A process killed outright says
nothing, so a run also records its owner (`owner.py`) whenever it starts or resumes, and
the readers (`run`, `list_runs`) report a `running` run whose owner is gone as
`interrupted`.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

from cake_agents.owner import Owner, current_owner
from cake_agents.redact import scrub, scrub_obj
from cake_agents.signature import FailureSignature

STORE_NAME = "runs.sqlite"
BUSY_TIMEOUT_S = 30.0
"""How long a write waits for another process's write to end (SQLite's busy timeout)."""
SCHEMA_VERSION = 4
"""2: failures keyed by an ordinal too (equal failures of one step are kept apart).
3: runs record their owner process (owner_host, owner_pid, owner_token).
4: candidates keep their rationale, the model's stated intent and a chain's steps."""

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT);
CREATE TABLE IF NOT EXISTS runs (
    run_id TEXT PRIMARY KEY, task TEXT, mode TEXT, model TEXT, seed_rng INTEGER,
    created REAL, updated REAL, status TEXT, stop_reason TEXT, config TEXT, summary TEXT,
    owner_host TEXT, owner_pid INTEGER, owner_token TEXT);
CREATE TABLE IF NOT EXISTS candidates (
    run_id TEXT, hash TEXT, parent TEXT, tactic TEXT, params TEXT, origin TEXT,
    step INTEGER, text TEXT, created REAL, rationale TEXT, intent TEXT, steps TEXT,
    PRIMARY KEY (run_id, hash));
CREATE TABLE IF NOT EXISTS proposals (
    run_id TEXT, step INTEGER, idx INTEGER, hash TEXT, origin TEXT,
    PRIMARY KEY (run_id, step, idx));
CREATE TABLE IF NOT EXISTS diagnostics (
    run_id TEXT, hash TEXT, step INTEGER, round INTEGER, idx INTEGER, source TEXT,
    code TEXT, severity TEXT, line INTEGER, col INTEGER, message TEXT, has_fix INTEGER,
    PRIMARY KEY (run_id, hash, step, round, idx));
CREATE TABLE IF NOT EXISTS evaluations (
    run_id TEXT, hash TEXT, gate TEXT, status TEXT, detail TEXT, seconds REAL,
    PRIMARY KEY (run_id, hash, gate));
CREATE TABLE IF NOT EXISTS usage (
    run_id TEXT, step INTEGER, node TEXT, attempt INTEGER, hash TEXT, model TEXT,
    tokens_in INTEGER, tokens_out INTEGER, usd REAL, seconds REAL, ok INTEGER,
    error TEXT, response TEXT, finish_reason TEXT,
    PRIMARY KEY (run_id, step, node, attempt));
CREATE TABLE IF NOT EXISTS failures (
    run_id TEXT, hash TEXT, step INTEGER, ordinal INTEGER, gate TEXT, code TEXT,
    signature TEXT, digest TEXT, construct TEXT, norm_message TEXT, message TEXT, move TEXT,
    PRIMARY KEY (run_id, hash, step, ordinal, gate, code, digest));
CREATE TABLE IF NOT EXISTS progress (
    run_id TEXT, seq INTEGER, step INTEGER, hash TEXT, status TEXT, gate TEXT,
    score REAL, best REAL, tactic TEXT, time REAL, PRIMARY KEY (run_id, seq));
CREATE TABLE IF NOT EXISTS artifacts (
    run_id TEXT, name TEXT, content TEXT, PRIMARY KEY (run_id, name));
CREATE INDEX IF NOT EXISTS failures_by_signature ON failures (digest);
"""


class StoreError(Exception):
    """A run that cannot be found (or a prefix that names several), or a store that
    cannot be used (damaged, or held too long by another process)."""


class StoreDamaged(StoreError):
    """The store file is not a readable SQLite database (overwritten, truncated, ...)."""


def _problem(path: Path, exc: sqlite3.DatabaseError) -> StoreError:
    """What to tell a person about an SQLite error on the store at `path`."""
    if isinstance(exc, sqlite3.OperationalError) and "locked" in str(exc):
        return StoreError(f"the runs store {path} is locked by another process ({exc}); "
                          "try again")
    if isinstance(exc, sqlite3.OperationalError) and not _damage(exc):
        return StoreError(f"the runs store {path} cannot be used: {exc}")
    return StoreDamaged(
        f"the runs store {path} is damaged and cannot be read ({exc}). Each run's "
        f"checkpoints ({path.parent}/<run-id>/checkpoints.sqlite) and best kernel are kept "
        f"apart from it. To salvage what is readable: sqlite3 {path} .recover | sqlite3 "
        f"recovered.sqlite; then move it in place of {path.name}")


def _damage(exc: sqlite3.DatabaseError) -> bool:
    text = str(exc)
    return any(s in text for s in ("malformed", "not a database", "disk image",
                                   "file is encrypted"))


class RunsStore:
    """Thread-safe access to `runs.sqlite` (one connection, serialized by a lock)."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.RLock()
        self._conn = sqlite3.connect(self.path, check_same_thread=False,
                                     timeout=BUSY_TIMEOUT_S)
        self._conn.row_factory = sqlite3.Row
        deadline = time.monotonic() + BUSY_TIMEOUT_S
        while True:
            try:
                with self._lock:
                    self._open()
                return
            except sqlite3.DatabaseError as exc:
                with suppress(sqlite3.Error):
                    self._conn.rollback()
                # Processes opening a new store together: at the switch to WAL each holds
                # a shared lock and asks for the exclusive one, and SQLite fails one at
                # once instead of calling the busy handler (that would deadlock)
                if (isinstance(exc, sqlite3.OperationalError) and "locked" in str(exc)
                        and time.monotonic() < deadline):
                    time.sleep(0.02)
                    continue
                self._conn.close()
                raise _problem(self.path, exc) from None

    def _open(self) -> None:
        # WAL: readers never wait for a writer, and runs of several processes share the
        # file; their writes take turns (the busy timeout)
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute("PRAGMA synchronous=NORMAL")
        if self._schema_current():
            return
        # BEGIN IMMEDIATE: two processes opening a new store at once must not both find
        # it empty and then collide while creating it
        self._conn.execute("BEGIN IMMEDIATE")
        self._migrate()
        for stmt in _SCHEMA.split(";"):
            if stmt.strip():
                self._conn.execute(stmt)
        self._conn.execute("INSERT OR REPLACE INTO meta VALUES ('schema', ?)",
                           (str(SCHEMA_VERSION),))
        self._conn.commit()

    def _schema_current(self) -> bool:
        """Whether the store already has this schema (then opening it writes nothing)."""
        try:
            row = self._conn.execute("SELECT value FROM meta WHERE key='schema'").fetchone()
        except sqlite3.OperationalError as exc:
            if "no such table" in str(exc):
                return False
            raise
        return row is not None and row[0] == str(SCHEMA_VERSION)

    def _migrate(self) -> None:
        """Bring a store written by an older version up to this schema, keeping its rows."""
        cols = [r[1] for r in self._conn.execute("PRAGMA table_info(failures)").fetchall()]
        if cols and "ordinal" not in cols:
            self._conn.execute("ALTER TABLE failures RENAME TO failures_v1")
            for stmt in _SCHEMA.split(";"):
                if stmt.strip():
                    self._conn.execute(stmt)
            keep = ", ".join(c for c in cols)
            self._conn.execute(f"INSERT OR IGNORE INTO failures ({keep}, ordinal) "
                               f"SELECT {keep}, 0 FROM failures_v1")
            self._conn.execute("DROP TABLE failures_v1")
        cols = [r[1] for r in self._conn.execute("PRAGMA table_info(runs)").fetchall()]
        if cols and "owner_pid" not in cols:
            for col in ("owner_host TEXT", "owner_pid INTEGER", "owner_token TEXT"):
                self._conn.execute(f"ALTER TABLE runs ADD COLUMN {col}")
        cols = [r[1] for r in self._conn.execute("PRAGMA table_info(candidates)").fetchall()]
        if cols and "intent" not in cols:  # older runs read back with these empty
            for col in ("rationale TEXT", "intent TEXT", "steps TEXT"):
                self._conn.execute(f"ALTER TABLE candidates ADD COLUMN {col}")

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            try:
                # the write lock up front, through the busy handler: a deferred transaction
                # that read first could fail at once when another process wrote meanwhile
                if not self._conn.in_transaction:
                    self._conn.execute("BEGIN IMMEDIATE")
                yield self._conn
                self._conn.commit()
            except BaseException as exc:
                with suppress(sqlite3.Error):
                    self._conn.rollback()
                if isinstance(exc, sqlite3.DatabaseError):
                    raise _problem(self.path, exc) from None
                raise

    def _rows(self, sql: str, args: tuple[Any, ...] = ()) -> list[dict[str, Any]]:
        with self._lock:
            try:
                return [dict(r) for r in self._conn.execute(sql, args).fetchall()]
            except sqlite3.DatabaseError as exc:
                raise _problem(self.path, exc) from None

    def integrity(self) -> str:
        """SQLite's `integrity_check` of the store: "ok", or what is wrong."""
        rows = self._rows("PRAGMA integrity_check")
        return "; ".join(str(next(iter(r.values()))) for r in rows)

    # -- runs ----------------------------------------------------------------------------
    def create_run(self, run_id: str, *, task: str, mode: str, model: str | None,
                   seed_rng: int, config: dict[str, Any]) -> None:
        now, owner = time.time(), current_owner()
        with self._tx() as c:
            c.execute("INSERT OR IGNORE INTO runs (run_id, task, mode, model, seed_rng, "
                      "created, updated, status, stop_reason, config, summary, owner_host, "
                      "owner_pid, owner_token) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                      (run_id, task, mode, model or "", seed_rng, now, now, "running", "",
                       json.dumps(scrub_obj(config)), "{}", owner.host, owner.pid,
                       owner.token))

    def run(self, run_id: str) -> dict[str, Any] | None:
        """The run's row, its status as it stands now (see `_decode`)."""
        rows = self._rows("SELECT * FROM runs WHERE run_id = ?", (run_id,))
        return _decode(rows[0]) if rows else None

    def find_run(self, ref: str) -> str:
        """The run id for `ref`: an id, a unique prefix of one, or `latest`."""
        if ref == "latest":
            rows = self._rows("SELECT run_id FROM runs ORDER BY created DESC LIMIT 1")
            if not rows:
                raise StoreError(f"no runs in {self.path}")
            return str(rows[0]["run_id"])
        rows = self._rows("SELECT run_id FROM runs WHERE run_id = ? OR run_id LIKE ? "
                          "ORDER BY created", (ref, ref.replace("%", "") + "%"))
        ids = [r["run_id"] for r in rows]
        if ref in ids:
            return ref
        if not ids:
            raise StoreError(f"no run {ref!r} in {self.path}")
        if len(ids) > 1:
            raise StoreError(f"{ref!r} names {len(ids)} runs: {', '.join(ids[:5])}")
        return str(ids[0])

    def list_runs(self) -> list[dict[str, Any]]:
        return [_decode(r) for r in self._rows("SELECT * FROM runs ORDER BY created")]

    def set_status(self, run_id: str, status: str, *, stop_reason: str = "",
                   summary: dict[str, Any] | None = None) -> None:
        """Record `status`; `running` also makes this process the run's owner."""
        with self._tx() as c:
            if status == "running":
                owner = current_owner()
                c.execute("UPDATE runs SET owner_host=?, owner_pid=?, owner_token=? "
                          "WHERE run_id=?", (owner.host, owner.pid, owner.token, run_id))
            if summary is None:
                c.execute("UPDATE runs SET status=?, stop_reason=?, updated=? WHERE run_id=?",
                          (status, scrub(stop_reason), time.time(), run_id))
            else:
                c.execute("UPDATE runs SET status=?, stop_reason=?, updated=?, summary=? "
                          "WHERE run_id=?", (status, scrub(stop_reason), time.time(),
                                             json.dumps(scrub_obj(summary)), run_id))

    # -- candidates ------------------------------------------------------------------------
    def add_candidate(self, run_id: str, hash_: str, *, parent: str | None, tactic: str,
                      params: dict[str, Any], origin: str, step: int, text: str,
                      idx: int = 0, rationale: str = "", intent: str = "",
                      steps: list[dict[str, Any]] | None = None) -> None:
        """`intent`: what a model said it meant to change; `steps`: a chain's steps, each
        {tactic, params, rationale, text} (the kernel after that step)."""
        with self._tx() as c:
            c.execute("INSERT OR IGNORE INTO candidates (run_id, hash, parent, tactic, params, "
                      "origin, step, text, created, rationale, intent, steps) "
                      "VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
                      (run_id, hash_, parent or "", tactic, json.dumps(scrub_obj(params)),
                       origin, step, scrub(text), time.time(), scrub(rationale),
                       scrub(intent), json.dumps(scrub_obj(steps or []))))
            c.execute("INSERT OR REPLACE INTO proposals VALUES (?,?,?,?,?)",
                      (run_id, step, idx, hash_, origin))

    def candidate(self, run_id: str, hash_: str) -> dict[str, Any] | None:
        rows = self._rows("SELECT * FROM candidates WHERE run_id=? AND hash=?",
                          (run_id, hash_))
        if not rows:
            return None
        rows[0]["params"] = json.loads(rows[0]["params"] or "{}")
        rows[0]["steps"] = json.loads(rows[0]["steps"] or "[]")
        rows[0]["rationale"] = rows[0]["rationale"] or ""
        rows[0]["intent"] = rows[0]["intent"] or ""
        return rows[0]

    def find_candidate(self, run_id: str, ref: str) -> str:
        """The hash of the candidate `ref` names in the run: a hash, a unique prefix of one,
        `seed` or `best`."""
        if ref in ("seed", "best"):
            if ref == "best":
                row = self.run(run_id)
                h = ((row or {}).get("summary") or {}).get("best_hash") or ""
                if not h:
                    raise StoreError(f"run {run_id} has no best kernel (yet)")
                return str(h)
            rows = self._rows("SELECT hash FROM candidates WHERE run_id=? AND origin='seed' "
                              "ORDER BY step LIMIT 1", (run_id,))
            if not rows:
                raise StoreError(f"run {run_id} has no seed kernel stored")
            return str(rows[0]["hash"])
        rows = self._rows("SELECT hash FROM candidates WHERE run_id=? AND hash LIKE ?",
                          (run_id, ref.replace("%", "").replace("_", "") + "%"))
        hashes = [r["hash"] for r in rows]
        if not hashes:
            raise StoreError(f"run {run_id} has no candidate {ref!r}")
        if len(hashes) > 1 and ref not in hashes:
            raise StoreError(f"{ref!r} names {len(hashes)} candidates of run {run_id}")
        return ref if ref in hashes else str(hashes[0])

    def candidate_text(self, run_id: str, hash_: str) -> str | None:
        row = self.candidate(run_id, hash_)
        return None if row is None else str(row["text"])

    def candidates(self, run_id: str) -> list[dict[str, Any]]:
        return self._rows("SELECT run_id, hash, parent, tactic, params, origin, step, created "
                          "FROM candidates WHERE run_id=? ORDER BY step, created", (run_id,))

    # -- diagnostics and evaluations ---------------------------------------------------------
    def add_diagnostics(self, run_id: str, hash_: str, step: int, round_: int, source: str,
                        diags: list[dict[str, Any]]) -> None:
        with self._tx() as c:
            for i, d in enumerate(diags):
                c.execute("INSERT OR REPLACE INTO diagnostics VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
                          (run_id, hash_, step, round_, i, source, d.get("code", ""),
                           d.get("severity", ""), d.get("line", 0), d.get("col", 0),
                           scrub(str(d.get("message", ""))), int(bool(d.get("has_fix")))))

    def diagnostics(self, run_id: str, hash_: str | None = None) -> list[dict[str, Any]]:
        if hash_ is None:
            return self._rows("SELECT * FROM diagnostics WHERE run_id=? ORDER BY step, round, "
                              "idx", (run_id,))
        return self._rows("SELECT * FROM diagnostics WHERE run_id=? AND hash=? ORDER BY step, "
                          "round, idx", (run_id, hash_))

    def add_evaluation(self, run_id: str, hash_: str, gate: str, status: str,
                       detail: dict[str, Any], seconds: float) -> None:
        with self._tx() as c:
            c.execute("INSERT OR REPLACE INTO evaluations VALUES (?,?,?,?,?,?)",
                      (run_id, hash_, gate, status, json.dumps(scrub_obj(detail)), seconds))

    def evaluations(self, run_id: str, hash_: str | None = None) -> list[dict[str, Any]]:
        sql = "SELECT * FROM evaluations WHERE run_id=?" + (" AND hash=?" if hash_ else "")
        rows = self._rows(sql, (run_id, hash_) if hash_ else (run_id,))
        for r in rows:
            r["detail"] = json.loads(r["detail"] or "{}")
        return rows

    # -- usage -------------------------------------------------------------------------------
    def add_usage(self, run_id: str, *, step: int, node: str, attempt: int, hash_: str,
                  model: str, tokens_in: int, tokens_out: int, usd: float, seconds: float,
                  ok: bool, error: str = "", response: str = "", finish_reason: str = ""
                  ) -> None:
        with self._tx() as c:
            c.execute("INSERT OR IGNORE INTO usage VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                      (run_id, step, node, attempt, hash_, model, tokens_in, tokens_out, usd,
                       seconds, int(ok), scrub(error), scrub(response), finish_reason))

    def set_usage_hash(self, run_id: str, step: int, node: str, attempt: int,
                       hash_: str) -> None:
        with self._tx() as c:
            c.execute("UPDATE usage SET hash=? WHERE run_id=? AND step=? AND node=? AND "
                      "attempt=?", (hash_, run_id, step, node, attempt))

    def usage_row(self, run_id: str, step: int, node: str, attempt: int
                  ) -> dict[str, Any] | None:
        rows = self._rows("SELECT * FROM usage WHERE run_id=? AND step=? AND node=? AND "
                          "attempt=?", (run_id, step, node, attempt))
        return rows[0] if rows else None

    def usage(self, run_id: str) -> list[dict[str, Any]]:
        return self._rows("SELECT run_id, step, node, attempt, hash, model, tokens_in, "
                          "tokens_out, usd, seconds, ok, error, finish_reason FROM usage "
                          "WHERE run_id=? ORDER BY step, node, attempt", (run_id,))

    # -- failures, progress, artifacts ---------------------------------------------------------
    def add_failure(self, run_id: str, *, hash_: str, step: int, sig: FailureSignature,
                    message: str, move: str = "", ordinal: int = 0) -> None:
        """`ordinal` tells apart equal failures of one step (retry 1, retry 2, ...)."""
        with self._tx() as c:
            c.execute("INSERT OR IGNORE INTO failures VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
                      (run_id, hash_, step, ordinal, sig.gate, sig.code, sig.key, sig.digest,
                       sig.construct, sig.message, scrub(message), move))

    def failures(self, run_id: str) -> list[dict[str, Any]]:
        return self._rows("SELECT * FROM failures WHERE run_id=? ORDER BY step, ordinal",
                          (run_id,))

    def add_progress(self, run_id: str, *, seq: int, step: int, hash_: str, status: str,
                     gate: str, score: float | None, best: float | None, tactic: str) -> None:
        with self._tx() as c:
            c.execute("INSERT OR IGNORE INTO progress VALUES (?,?,?,?,?,?,?,?,?,?)",
                      (run_id, seq, step, hash_, status, gate, score, best, tactic,
                       time.time()))

    def progress(self, run_id: str) -> list[dict[str, Any]]:
        return self._rows("SELECT * FROM progress WHERE run_id=? ORDER BY seq", (run_id,))

    def set_artifact(self, run_id: str, name: str, content: str) -> None:
        with self._tx() as c:
            c.execute("INSERT OR REPLACE INTO artifacts VALUES (?,?,?)",
                      (run_id, name, scrub(content)))

    def artifact(self, run_id: str, name: str) -> str | None:
        rows = self._rows("SELECT content FROM artifacts WHERE run_id=? AND name=?",
                          (run_id, name))
        return None if not rows else str(rows[0]["content"])

    def artifacts(self, run_id: str) -> dict[str, str]:
        return {r["name"]: r["content"] for r in
                self._rows("SELECT name, content FROM artifacts WHERE run_id=?", (run_id,))}


def _decode(row: dict[str, Any]) -> dict[str, Any]:
    """A runs row with its JSON fields parsed and a dead owner's `running` made `interrupted`.

    `owner` says who ran it (`host:pid`, "" for a store written before owners were kept).
    A run owned by another host keeps its stored status: its process cannot be seen here.
    """
    row["config"] = json.loads(row["config"] or "{}")
    row["summary"] = json.loads(row["summary"] or "{}")
    host, pid = row.pop("owner_host"), row.pop("owner_pid")
    token = row.pop("owner_token")
    row["owner"] = f"{host}:{pid}" if host else ""
    if row["status"] == "running" and host and Owner(host, pid, token or "").alive() is False:
        row["status"] = "interrupted"
        row["stop_reason"] = (f"its process ({pid} on {host}) ended without finishing; "
                              "resume with --resume")
    return row
