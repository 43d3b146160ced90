"""Clusters across runs, their examples and trajectories, the prime-candidate heuristic,
and the failures recovered from evaluation results (gaps)."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner
from mining_support import (
    CONSTRUCT,
    MARK,
    SEED,
    add_candidate,
    add_sim_failure,
    gates,
    make_run,
    variant,
)

from cake_agents.mining.clusters import build_clusters
from cake_agents.mining.gaps import backfill_run, gate_findings
from cake_agents.signature import signature
from cake_agents.store import RunsStore
from cake_cli.main import main


def _store(tmp_path: Path) -> RunsStore:
    return RunsStore(tmp_path / "runs" / "runs.sqlite")


def test_a_mistake_repeated_across_runs_is_one_prime_cluster(tmp_path: Path) -> None:
    s = _store(tmp_path)
    make_run(s, "run-a", mistakes=2)
    make_run(s, "run-b", mistakes=2, offset=5)
    (c,) = build_clusters(s, ["run-a", "run-b"], min_count=2)
    assert (c.gate, c.stage, c.code, c.count) == ("sim", "sim", "CK504", 4)
    assert c.runs == ["run-a", "run-b"] and len(c.candidates) == 4
    assert c.construct == CONSTRUCT
    assert c.first_seen <= c.last_seen
    assert c.prime and c.suggest == "rule", c.why
    ex = c.examples[0]
    assert ex.run_id == "run-b" and ex.line is not None
    hit = [text for _, text, is_hit in ex.snippet if is_hit]
    assert hit and MARK in hit[0]
    assert [t["origin"] for t in ex.trajectory] == ["coder", "seed"]
    assert ex.trajectory[-1]["status"] == "pass"
    assert build_clusters(s, ["run-a"], min_count=3) == []


def test_not_prime_when_a_passing_kernel_has_the_same_line(tmp_path: Path) -> None:
    s = _store(tmp_path)
    seed = make_run(s, "r", mistakes=0)
    # a CK505 at the seed's own wgmma-like line: the line is where it shows, not its cause
    line = next(i for i, ln in enumerate(SEED.splitlines()) if "mma_sync(" in ln)
    for i in range(2):
        text = variant(i)
        h = add_candidate(s, "r", text, parent=seed, step=2 + i)
        sig = signature("sim", "CK505", "reads 8 elements that nothing has written",
                        text.splitlines()[line])
        s.add_failure("r", hash_=h, step=2 + i, sig=sig, message="reads ...")
    (c,) = build_clusters(s, ["r"])
    assert not c.prime and "kernels that pass" in c.why


def test_not_prime_when_static_already_flags_it_or_it_is_a_wrong_result(tmp_path: Path
                                                                         ) -> None:
    s = _store(tmp_path)
    seed = make_run(s, "r", mistakes=2)
    text = variant(9)
    h = add_candidate(s, "r", text, parent=seed, step=9)
    line = text.splitlines()[next(i for i, ln in enumerate(text.splitlines())
                                  if MARK in ln)]
    s.add_failure("r", hash_=h, step=9, sig=signature("check", "CK304", "outside", line),
                  message="outside")
    for i in range(2):
        s.add_failure("r", hash_=h, step=9, ordinal=i,
                      sig=signature("sim", "CK507", f"`C` differs at {i}", "def k():"),
                      message="differs")
    by_code = {c.code: c for c in build_clusters(s, ["r"], min_count=1)}
    assert not by_code["CK504"].prime and "already flags" in by_code["CK504"].why
    assert not by_code["CK507"].prime and "does not point" in by_code["CK507"].why


def test_gaps_warnings_of_passing_gates_and_silent_failures(tmp_path: Path) -> None:
    s = _store(tmp_path)
    make_run(s, "r", mistakes=1)
    g = gates(static="pass", sim="pass", cost="pass", ptxas="pass", gpu="fail")
    g["ptxas"]["findings"] = [{"code": "CK603", "severity": "warning", "line": 3,
                               "message": "ptxas spilled 24 bytes", "line_text": ""}]
    g["gpu"]["detail"] = {"error": "launch failed"}
    res = {"status": "fail", "failed_gate": "gpu", "gates": g}
    assert [(gate, f["code"]) for gate, f in gate_findings(res)] == [
        ("ptxas", "CK603"), ("gpu", "E-GPU")]
    add_candidate(s, "r", variant(4), parent=None, step=5, res=res)
    assert backfill_run(s, "r") == 2
    assert backfill_run(s, "r") == 0  # idempotent
    codes = {(f["gate"], f["code"]) for f in s.failures("r")}
    assert {("ptxas", "CK603"), ("gpu", "E-GPU"), ("sim", "CK504")} <= codes
    # the evaluator's own rows are not written twice
    assert sum(f["code"] == "CK504" for f in s.failures("r")) == 1


def test_cake_failures_lists_clusters_as_text_and_json(tmp_path: Path) -> None:
    s = _store(tmp_path)
    make_run(s, "run-a", mistakes=3)
    add_sim_failure(s, "run-a", variant(8), parent="", step=8)
    s.close()
    runner = CliRunner()
    d = str(tmp_path / "runs")
    r = runner.invoke(main, ["failures", "--runs-dir", d])
    assert r.exit_code == 0, r.output
    assert "[PRIME]" in r.output and "cake promote" in r.output and "CK504" in r.output
    r = runner.invoke(main, ["failures", "run-a", "--runs-dir", d, "--format", "json",
                             "--min-count", "4"])
    assert r.exit_code == 0, r.output
    data = json.loads(r.output)
    (c,) = data["clusters"]
    assert c["count"] == 4 and c["prime"] and c["gate"] == "sim"
    assert c["examples"][0]["snippet"]
    r = runner.invoke(main, ["failures", "nope", "--runs-dir", d])
    assert r.exit_code == 2 and "no run" in r.output
    r = runner.invoke(main, ["failures", "--runs-dir", str(tmp_path / "empty")])
    assert r.exit_code == 2
