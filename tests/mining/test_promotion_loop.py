"""The loop end to end: a recurring late failure becomes a static rule, and it pays.

A scripted model keeps writing the same mistake (a consumer indexing its pipeline stage
with the K slice's global number, `k * (BK // 16) + kk`, under a different name each
time).  The kernel is right while K fits in one tile and reads past the stage beyond, so
the static verifier, which does not decide ranges over launch-time dims, accepts it; the
simulator catches it on the task's shapes, so every such kernel costs an evaluation.
`cake failures` lists it as a prime candidate, `cake promote` writes a rule, the plugin
is installed (into a private folder, on PYTHONPATH for the language server), and the same
model behaviour in a second run is caught by the checker before any evaluation.
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from mining_support import BAD, ROOT, TASK, variant

from cake_cli.main import main
from cake_core.check import check_text

pytestmark = pytest.mark.slow
pytest.importorskip("langgraph")
pytest.importorskip("langgraph.checkpoint.sqlite")

EXAMPLES = ROOT / "examples"


def _model() -> Any:
    """The mock behaviour of both runs: always the same mistake, renamed."""
    from cake_agents.models import ScriptedModel

    n = itertools.count(1)
    return ScriptedModel([lambda messages: f"Faster:\n```python\n{variant(next(n))}```\n"])


@pytest.fixture
def lsp_for() -> Iterator[Any]:
    from cake_agents.lsp_client import CakeLspClient

    started: list[CakeLspClient] = []

    def start(env: dict[str, str] | None = None) -> CakeLspClient:
        client = CakeLspClient(root=ROOT, env=env)
        client.start()
        started.append(client)
        return client

    yield start
    for client in started:
        client.stop()


def _evolve(run_dir: Path, lsp: Any) -> Any:
    from cake_agents.config import EvolveConfig
    from cake_agents.executor import InlineExecutor
    from cake_agents.run import evolve

    cfg = EvolveConfig(task=TASK, run_dir=str(run_dir), executor="inline", budget_evals=3,
                       batch=1, patience=2, max_repairs=1, sim_schedules=1,
                       model_backoff_s=0.0)
    return evolve(cfg, model=_model(), executor=InlineExecutor(), lsp=lsp,
                  write_report=False)


def _cli(*args: str) -> Any:
    r = CliRunner().invoke(main, list(args))
    assert r.exit_code == 0, r.output
    return r


def _evaluated(store: Any, run_id: str) -> list[dict[str, Any]]:
    return [r for r in store.evaluations(run_id) if r["gate"] == "_result"]


def test_a_recurring_simulator_failure_becomes_a_static_rule(tmp_path: Path,
                                                             lsp_for: Any) -> None:
    from cake_agents.store import RunsStore
    from cake_core.sim.program import SimKernel
    from cake_core.sim.tasks_run import run_task
    from cake_core.tasks import load_task

    # 1. the mistake: the static verifier accepts it, the simulator catches it; it
    #    depends on the launch: with K within one tile the same kernel is right
    res = check_text(BAD, "bad.cake")
    assert res.program is not None and res.errors == [] and res.diagnostics == []
    task = load_task(TASK)
    sk = SimKernel.prepare(res.program.kernels[0], res.source, res.parse.module)
    entry = task.entry(sk.name)
    rep = run_task(task, sk, shapes=[dict(s.dims) for s in task.shapes_for(entry, sim=True)],
                   n_schedules=1, seed=0, entry=entry)
    assert not rep.passed and "CK504" in {d.code for d in rep.diagnostics}
    one_tile = run_task(task, sk, shapes=[{"M": 128, "N": 128, "K": 32}], n_schedules=1,
                        seed=0, entry=entry)
    assert one_tile.passed, [d.message for d in one_tile.diagnostics]

    # 2. a run in which the model keeps making it
    runs = tmp_path / "runs"
    first = _evolve(runs, lsp_for())
    store = RunsStore(runs / "runs.sqlite")
    late = [f for f in store.failures(first.run_id) if f["code"] == "CK504"]
    assert len(late) >= 2 and {f["gate"] for f in late} == {"sim"}
    for f in late:  # each of them passed the static gate and was simulated
        gates = {r["gate"]: r["status"] for r in store.evaluations(first.run_id, f["hash"])}
        assert gates["static"] == "pass" and gates["sim"] == "fail"

    # 3. `cake failures` lists it as a prime candidate
    data = json.loads(_cli("failures", "--runs-dir", str(runs), "--format", "json").output)
    (prime,) = [c for c in data["clusters"] if c["prime"]]
    assert (prime["gate"], prime["code"], prime["count"]) == ("sim", "CK504", len(late))

    # 4. `cake promote` writes a rule, whose tests pass; install it privately
    plugin = tmp_path / "cake-learned"
    out = _cli("promote", prime["digest"][:8], "--as", "rule", "--plugin", str(plugin),
               "--runs-dir", str(runs), "--examples", str(EXAMPLES)).output
    assert "rule ldmatrix-out-of-bounds (LE101)" in out
    site = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps",
                    "--target", str(site), str(plugin)], check=True)

    # 5. the same behaviour again, with the rule live in the language server
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(site), env.get("PYTHONPATH")) if p)
    second = _evolve(runs, lsp_for(env))
    caught = [f for f in store.failures(second.run_id) if f["code"] == "LE101"]
    assert len(caught) >= 2 and {f["gate"] for f in caught} == {"check"}
    assert {f["construct"] for f in caught} == {prime["construct"]}
    assert not [f for f in store.failures(second.run_id) if f["code"] == "CK504"]
    # earlier: no kernel with the mistake reached the simulator; cheaper: fewer evaluations
    assert not [r for r in _evaluated(store, second.run_id)
                if any(f["hash"] == r["hash"] for f in caught)]
    assert len(_evaluated(store, second.run_id)) < len(_evaluated(store, first.run_id))
    assert second.evals < first.evals
    store.close()

    # 6. `cake failures` shows the signature caught at the static gate since, and the
    #    ledger has the rule's trigger, tests and the run it fired in
    data = json.loads(_cli("failures", "--runs-dir", str(runs), "--format", "json").output)
    by_digest = {c["digest"]: c for c in data["clusters"]}
    origin = by_digest[prime["digest"]]
    assert not origin["prime"] and origin["promoted"][0]["codes"] == ["LE101"]
    assert origin["caught_statically"]["stages"] == ["static"]
    assert origin["caught_statically"]["runs"] == [second.run_id]
    (static,) = [c for c in data["clusters"] if c["code"] == "LE101"]
    assert static["gate"] == "static" and static["promoted_from"]["digest"] == prime["digest"]
    ledger = json.loads(_cli("promote", "--ledger", "--runs-dir", str(runs), "--format",
                             "json").output)
    (entry,) = ledger
    assert entry["runs"] == [first.run_id] and entry["validated"]
    assert {f["run_id"] for f in entry["firings"]} == {second.run_id}
