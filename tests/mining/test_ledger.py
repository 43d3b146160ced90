"""The ledger keeps every promotion and finds where its codes fired in later runs."""

from __future__ import annotations

import time
from pathlib import Path

from cake_agents.mining.ledger import Ledger, Promotion
from cake_agents.signature import signature
from cake_agents.store import RunsStore


def _promotion(**kw: object) -> Promotion:
    base: dict[str, object] = dict(
        kind="rule", name="ldmatrix-out-of-bounds", codes=["LE101"], plugin="cake-learned",
        plugin_dir="/p", module="cake_learned.promoted.rule_x", digest="c661182cacdd627f",
        signature="sim:CK504:_ = ldmatrix(...)", gate="sim", code="CK504",
        construct="_ = ldmatrix(...)", count=3, runs=["r0"], candidates=["r0:a"],
        patterns=["ldmatrix(...)"], tests=["tests/test_promoted.py"], validated=True)
    base.update(kw)
    return Promotion(**base)  # type: ignore[arg-type]


def _run(store: RunsStore, run_id: str, code: str) -> None:
    store.create_run(run_id, task="t", mode="clean", model="", seed_rng=0, config={})
    store.add_candidate(run_id, "h1", parent=None, tactic="", params={}, origin="coder",
                        step=1, text="x")
    store.add_failure(run_id, hash_="h1", step=1, sig=signature("check", code, "m", "x"),
                      message="m")


def test_promotions_round_trip_and_firings_count_only_later_runs(tmp_path: Path) -> None:
    store = RunsStore(tmp_path / "runs.sqlite")
    _run(store, "before", "LE101")
    time.sleep(0.01)
    with Ledger.beside(tmp_path) as ledger:
        pid = ledger.add(_promotion(created=time.time()))
        time.sleep(0.01)
        _run(store, "after", "LE101")
        _run(store, "other", "XX999")
        assert ledger.refresh_firings(store) == 1
        assert ledger.refresh_firings(store) == 1  # refreshing again adds nothing
        (f,) = ledger.firings(pid)
        assert (f["run_id"], f["gate"], f["code"], f["count"]) == ("after", "check", "LE101",
                                                                   1)
        (p,) = ledger.by_digest("c661182cacdd627f")
        assert p.id == pid and p.codes == ["LE101"] and p.validated
        assert ledger.by_code()["LE101"].name == "ldmatrix-out-of-bounds"
    with Ledger(tmp_path / "ledger.sqlite") as again:
        assert [p.name for p in again.promotions()] == ["ldmatrix-out-of-bounds"]
