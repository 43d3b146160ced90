"""Nothing a model, a store or a user's name carries is run, unpickled or written astray.

tests/test_no_exec.py proves it for `.cake` text given to the checker; this module for
the rest of what an agent run takes in:

- model replies with Python and shell payloads go through the coder's extraction, the
  language server's check and the repairer, and leave no trace;
- store contents: a payload in `runs.sqlite` is shown, never run, and a payload planted in
  a run's LangGraph checkpoints is read back as inert data on `--resume` (the checkpointer
  neither unpickles nor rebuilds arbitrary types: cake_agents/checkpoints.py);
- names from users (run ids, task names, promoted item names) cannot leave their directory:
  each is refused with a message and exit status 2, and nothing is written outside.
"""

from __future__ import annotations

import builtins
import json
import os
import pickle
import sqlite3
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from agent_support import GEMM, ROOT, fenced, run, store
from click.testing import CliRunner

from cake_agents.checkpoints import checkpoint_serde
from cake_agents.models import ScriptedModel
from cake_cli.main import main


@pytest.fixture
def tripwires(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every exec/eval/compile, shell, process start and unpickling while the test runs."""
    calls: list[str] = []

    def spy(name: str, real: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            calls.append(f"{name}: {str(args[0])[:300] if args else ''}")
            return real(*args, **kwargs)
        return wrapper

    for name in ("exec", "eval", "compile"):
        monkeypatch.setattr(builtins, name, spy(name, getattr(builtins, name)))
    for mod, name in ((os, "system"), (os, "popen"), (subprocess, "Popen"),
                      (pickle, "loads"), (pickle, "load")):
        monkeypatch.setattr(mod, name, spy(f"{mod.__name__}.{name}", getattr(mod, name)))
    return calls


def _traces(calls: list[str], marker: Path) -> list[str]:
    """The calls that carried a payload (they all name the marker), and any unpickling."""
    return [c for c in calls if marker.name in c or c.startswith("pickle.")]


def _files(root: Path) -> set[Path]:
    """Everything under root but SQLite's own journal files, which a reader may create."""
    return {p for p in root.rglob("*") if not p.name.endswith(("-wal", "-shm", "-journal"))}


# --- model replies ---------------------------------------------------------------------------
PY_PAYLOAD = '''\
__import__('os').system('touch {marker}')
exec("open('{marker}', 'w').close()")
'''

SHELL_PROSE = '''\
Run `touch {marker}` first, then $(touch {marker}) and ; touch {marker} #.

```sh
touch {marker}
```
'''


TASK_PAYLOAD = '''\
from cake_core.tasks import Task
__import__('os').system('touch {marker}')
TASK = Task(name="gemm_bf16", reference=lambda **a: __import__('os').system('touch {marker}'))
'''


def test_model_payloads_go_through_extract_check_and_repair_inert(
        tmp_path: Path, lsp: Any, tripwires: list[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Task files are trusted code, so no reply may become one: the tasks loaded during
    the run are shipped task files, whatever the replies say."""
    import cake_core.tasks

    loaded: list[Path] = []
    real_load = cake_core.tasks.load_task

    def recording(path_or_name: Any) -> Any:
        task = real_load(path_or_name)
        loaded.append(Path(task.path).resolve())
        return task

    monkeypatch.setattr(cake_core.tasks, "load_task", recording)
    marker = tmp_path / "PWNED"
    hostile_kernel = PY_PAYLOAD.format(marker=marker) + GEMM.replace(
        "wgmma_wait(0)", f"__import__('os').system('touch {marker}')", 1)
    answers = [
        # the coder's answer: a kernel with payloads at top level and inside, shell in prose
        SHELL_PROSE.format(marker=marker) + fenced(hostile_kernel),
        # the repairer's answer: more of the same
        fenced(PY_PAYLOAD.format(marker=marker) + GEMM,
               prose=f"Fixed. `rm -rf {marker}` $(touch {marker})"),
        # a "task file" for the run, and an answer with no code at all, only a payload
        fenced(TASK_PAYLOAD.format(marker=marker), prose="Use this task instead:"),
        f"$(touch {marker}) `touch {marker}`",
    ]
    model = ScriptedModel(answers)
    run_dir = tmp_path / "runs"
    summary = run(run_dir, lsp, client=model, budget_evals=3, batch=1, max_repairs=1,
                  patience=1, write_report=True)

    assert len(model.calls) >= 2, "the payloads must have gone through the repairer too"
    # the configured task, and the shipped ones the checker consults; nothing else
    shipped = (ROOT / "examples" / "tasks").resolve()
    assert (shipped / "gemm_bf16.py") in loaded
    assert all(p.parent == shipped for p in loaded), loaded
    assert not marker.exists()
    assert not _traces(tripwires, marker), tripwires
    s = store(run_dir)
    texts = [s.candidate_text(summary.run_id, c["hash"]) or ""
             for c in s.candidates(summary.run_id)]
    # the payloads reached the store as text, and the checker flagged them
    assert any(str(marker) in t for t in texts)
    codes = {d["code"] for c in s.candidates(summary.run_id)
             for d in s.diagnostics(summary.run_id, c["hash"])}
    assert codes & {"CK005", "CK102"}, codes
    s.close()

    # reading the store back (the summary, the report) runs none of it either
    r = CliRunner().invoke(main, ["runs", "show", summary.run_id, "--run-dir", str(run_dir)])
    assert r.exit_code == 0, r.output
    r = CliRunner().invoke(main, ["runs", "report", summary.run_id, "--run-dir", str(run_dir)])
    assert r.exit_code == 0, r.output
    assert not marker.exists()
    assert not _traces(tripwires, marker), tripwires


def test_a_store_row_holding_a_payload_is_shown_not_run(
        tmp_path: Path, lsp: Any, tripwires: list[str]) -> None:
    marker = tmp_path / "PWNED"
    run_dir = tmp_path / "runs"
    summary = run(run_dir, lsp, budget_evals=1, batch=1, patience=1)
    payload = f"__import__('os').system('touch {marker}') $(touch {marker})"
    blob = pickle.dumps(payload)
    with sqlite3.connect(run_dir / "runs.sqlite") as c:
        c.execute("UPDATE runs SET stop_reason = ? WHERE run_id = ?", (payload,
                                                                       summary.run_id))
        c.execute("UPDATE candidates SET text = ? WHERE run_id = ?", (payload, summary.run_id))
        c.execute("UPDATE evaluations SET detail = ? WHERE run_id = ?",
                  (json.dumps({"error": payload}), summary.run_id))
        c.execute("INSERT INTO usage (run_id, step, node, attempt, hash, model, tokens_in, "
                  "tokens_out, usd, seconds, ok, error, response, finish_reason) "
                  "VALUES (?, 1, 'coder', 0, '', ?, 1, 1, 0, 0, 1, ?, ?, 'stop')",
                  (summary.run_id, payload, payload, blob))
        c.execute("INSERT INTO artifacts VALUES (?, 'dispatch.json', ?)",
                  (summary.run_id, json.dumps({"note": payload})))
    tripwires.clear()
    for args in (["runs", "list"], ["runs", "show", summary.run_id],
                 ["runs", "best", summary.run_id], ["runs", "report", summary.run_id]):
        r = CliRunner().invoke(main, [*args, "--run-dir", str(run_dir)])
        assert "Traceback" not in r.output
    assert not marker.exists()
    assert not _traces(tripwires, marker), tripwires


# --- checkpoints -----------------------------------------------------------------------------
def _planted(target: Path) -> bytes:
    """A msgpack value that LangGraph's decoder would rebuild as `os.mkdir(target)`."""
    import ormsgpack

    return ormsgpack.packb(ormsgpack.Ext(0, ormsgpack.packb(["os", "mkdir", str(target)])))


def test_checkpoint_serializer_neither_unpickles_nor_calls_stored_names(tmp_path: Path
                                                                        ) -> None:
    target = tmp_path / "made-by-a-checkpoint"
    serde = checkpoint_serde()
    assert serde.loads_typed(("msgpack", _planted(target))) == str(target)  # inert data
    assert not target.exists()
    with pytest.raises(NotImplementedError):
        serde.loads_typed(("pickle", pickle.dumps(target)))
    # why it is configured at all: LangGraph's default rebuilds what a checkpoint names
    from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

    JsonPlusSerializer().loads_typed(("msgpack", _planted(target)))
    if not target.exists():  # pragma: no cover - a LangGraph that blocks it by default
        pytest.skip("this LangGraph no longer rebuilds unlisted types by default")


def test_a_payload_planted_in_a_checkpoint_stays_data_on_resume(
        tmp_path: Path, lsp: Any) -> None:
    import ormsgpack
    from agent_support import config

    from cake_agents.executor import InlineExecutor
    from cake_agents.run import evolve

    target = tmp_path / "made-by-a-checkpoint"
    run_dir = tmp_path / "runs"
    summary = run(run_dir, lsp, budget_evals=1, batch=1, patience=1)
    db = run_dir / summary.run_id / "checkpoints.sqlite"
    serde = checkpoint_serde()
    with sqlite3.connect(db) as c:
        rows = c.execute("SELECT rowid, type, checkpoint FROM checkpoints").fetchall()
        assert rows
        for rowid, type_, blob in rows:
            cp = serde.loads_typed((type_, blob))
            cp["channel_values"]["stop_reason"] = ormsgpack.Ext(
                0, ormsgpack.packb(["os", "mkdir", str(target)]))
            c.execute("UPDATE checkpoints SET type = 'msgpack', checkpoint = ? "
                      "WHERE rowid = ?", (ormsgpack.packb(cp, option=ormsgpack.OPT_NON_STR_KEYS),
                                         rowid))
    again = evolve(config(run_dir), resume=summary.run_id, executor=InlineExecutor(),
                   lsp=lsp, write_report=False)
    assert not target.exists()
    assert again.stop_reason == str(target)  # read back as the string it was stored as


# --- names from users ------------------------------------------------------------------------
@pytest.fixture
def sandbox(tmp_path: Path, lsp: Any) -> tuple[Path, Path, str]:
    """(a directory holding a runs directory with one finished run, the runs dir, its id)."""
    box = tmp_path / "box"
    run_dir = box / "runs"
    summary = run(run_dir, lsp, budget_evals=1, batch=1, patience=1)
    return box, run_dir, summary.run_id


@pytest.mark.parametrize("args", [
    ["runs", "show", "../../etc"],
    ["runs", "report", "../../etc"],
    ["runs", "best", "../x", "-o", "/dev/null"],
    ["evolve", "--resume", "../x"],
    ["evolve", "--resume", "/etc/passwd"],
    ["evolve", "../../etc/passwd"],
    ["evolve", "a/b"],
    ["evolve", ".."],
    ["evolve", "gemm_bf16/../../x"],
])
def test_names_that_would_leave_their_directory_are_refused(
        sandbox: tuple[Path, Path, str], args: list[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    box, run_dir, _ = sandbox
    monkeypatch.chdir(box)
    before = _files(box.parent)
    r = CliRunner().invoke(main, [*args, "--run-dir", str(run_dir)])
    assert r.exit_code == 2, r.output
    assert "Error:" in r.output and "Traceback" not in r.output
    assert _files(box.parent) == before


def test_a_run_id_in_the_store_that_is_a_path_is_refused(
        sandbox: tuple[Path, Path, str], monkeypatch: pytest.MonkeyPatch) -> None:
    """A row written by some other program: its id must not become a folder outside."""
    box, run_dir, run_id = sandbox
    monkeypatch.chdir(box)
    with sqlite3.connect(run_dir / "runs.sqlite") as c:
        c.execute("UPDATE runs SET run_id = '../../escape', status = 'running' "
                  "WHERE run_id = ?", (run_id,))
    before = _files(box.parent)
    for args in (["runs", "report", "../../escape"], ["evolve", "--resume", "../../escape"]):
        r = CliRunner().invoke(main, [*args, "--run-dir", str(run_dir)])
        assert r.exit_code == 2, r.output
        assert "not a plain name" in r.output
    assert _files(box.parent) == before
    assert not (box.parent.parent / "escape").exists()


@pytest.mark.parametrize("name", ["../../escape", "a/b", "..", "x\\y"])
def test_promote_refuses_an_item_name_that_is_a_path(tmp_path: Path, name: str) -> None:
    before = _files(tmp_path)
    r = CliRunner().invoke(main, ["promote", "abcd1234", "--as", "rule", "--name", name,
                                  "--plugin", str(tmp_path / "plug"),
                                  "--runs-dir", str(tmp_path / "runs")])
    assert r.exit_code == 2 and "not a path" in r.output, r.output
    assert _files(tmp_path) == before


def test_promote_a_signature_that_looks_like_a_path_is_only_matched(
        sandbox: tuple[Path, Path, str]) -> None:
    box, run_dir, _ = sandbox
    before = _files(box.parent)
    r = CliRunner().invoke(main, ["promote", "../../etc/passwd", "--as", "rule",
                                  "--plugin", str(box / "plug"), "--runs-dir", str(run_dir)])
    assert r.exit_code == 2 and "no failure signature" in r.output, r.output
    # the promotion ledger may be opened beside the runs store; nothing else is written
    assert _files(box.parent) - before <= {run_dir / "ledger.sqlite"}
    assert before <= _files(box.parent) and not (box / "plug").exists()
