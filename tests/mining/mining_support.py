"""Kernels and synthetic runs for the mining tests.

The mistake used throughout: in the sm_80 GEMM's inner loop a consumer indexes its
pipeline stage with the K slice's global number, `k * (BK // 16) + kk`, where the
stage holds only the slices of tile k (`kk`).  The kernel is right while K fits in one
tile and reads past the stage from the second tile on, so whether it is wrong depends
on the launch-time K: the static verifier, which leaves ranges over `dim()`s alone
(CK405 decides only constant ranges), accepts it, and the simulator, running the task's
shapes, stops at the `ldmatrix` with CK504.  (Reading slice `kk + 1` instead, past the
stage on the last `kk` whatever K is, is caught statically, by CK405.)
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from cake_agents.context import content_hash
from cake_agents.signature import signature
from cake_agents.store import RunsStore

ROOT = Path(__file__).resolve().parents[2]
SEED = (ROOT / "examples" / "gemm_sm80.cake").read_text()
GOOD_LINE = "a = ldmatrix(sa[s].tile((WM, 16), (wm, kk)))"
BAD_LINE = "a = ldmatrix(sa[s].tile((WM, 16), (wm, k * (BK // 16) + kk)))"
BAD = SEED.replace(GOOD_LINE, BAD_LINE)
assert BAD != SEED
MARK = "(wm, k * (BK // 16) + "
"""Text only the mistaken line has, in BAD and in every variant of it."""
CONSTRUCT = "_ = ldmatrix(_[_].tile((_, N), (_, _ * (_ // N) + _)))"
"""The mistaken line's signature construct (names as `_`, numbers as `N`)."""
IR_SHAPE = "ldmatrix(src=tile(self=smem[_], shape=(N, N), coords=(_, (_ * N) + _)))"
"""The mistaken op's IR shape (`cake_agents/mining/pattern.py`): BK // 16 folds to N."""
TASK = "gemm_f16_sm80"


def variant(i: int) -> str:
    """The same mistake in another kernel: the slice index named differently."""
    return BAD.replace("kk", f"k{i}")


def bad_line(text: str) -> int:
    return next(i for i, ln in enumerate(text.splitlines()) if MARK in ln)


def gates(**status: str) -> dict[str, Any]:
    return {g: {"status": s, "seconds": 0.01, "detail": {}, "findings": []}
            for g, s in status.items()}


def add_candidate(store: RunsStore, run_id: str, text: str, *, parent: str | None, step: int,
                  origin: str = "coder", res: dict[str, Any] | None = None) -> str:
    h = content_hash(text)
    store.add_candidate(run_id, h, parent=parent, tactic="model", params={}, origin=origin,
                        step=step, text=text)
    if res is not None:
        res = {"hash": h, "status": res.get("status", "pass"),
               "failed_gate": res.get("failed_gate"), "gates": res["gates"]}
        for gate, g in res["gates"].items():
            store.add_evaluation(run_id, h, gate, g["status"],
                                 {"detail": g["detail"], "findings": g["findings"]}, 0.01)
        store.add_evaluation(run_id, h, "_result", res["status"], res, 0.05)
    return h


def add_sim_failure(store: RunsStore, run_id: str, text: str, *, parent: str, step: int
                    ) -> str:
    """A candidate the simulator stopped with CK504 at its `ldmatrix` line, recorded as
    the evaluator records it."""
    line = bad_line(text)
    finding = {"code": "CK504", "severity": "error", "line": line, "col": 16,
               "line_text": text.splitlines()[line],
               "message": "tile 2 of extent 16 covers [32, 48) of dimension 1 of a view "
                          "with extent 32 (buffer `sa`)"}
    g = gates(static="pass", sim="fail")
    g["sim"]["findings"] = [finding]
    h = add_candidate(store, run_id, text, parent=parent, step=step,
                      res={"status": "fail", "failed_gate": "sim", "gates": g})
    sig = signature("sim", "CK504", finding["message"], finding["line_text"])
    store.add_failure(run_id, hash_=h, step=step, sig=sig, message=finding["message"])
    return h


def make_run(store: RunsStore, run_id: str, *, mistakes: int = 3, offset: int = 0) -> str:
    """A run: the seed passes, then `mistakes` kernels fail the simulator with CK504."""
    store.create_run(run_id, task=TASK, mode="clean", model="scripted", seed_rng=0,
                     config={"task": TASK})
    seed = add_candidate(store, run_id, SEED, parent=None, step=1, origin="seed",
                         res={"status": "pass", "gates": gates(static="pass", sim="pass",
                                                               cost="pass")})
    for i in range(mistakes):
        add_sim_failure(store, run_id, variant(offset + i), parent=seed, step=2 + i)
        time.sleep(0.002)  # distinct creation times: first/last seen are ordered
    return seed
