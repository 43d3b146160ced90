"""What a run did, candidate by candidate: diffs, chain steps, a model's stated intent.

A kept candidate (one that passed its gates) is shown against its parent (what this move
changed) and against the seed (where the search stands), as unified diffs; a `chain`
candidate with each of its steps and the diff each one made; a model candidate with the
intent the model stated.  `cake runs show`, `cake runs diff` and the HTML report all read
these from the runs store through this module, so the three agree.
"""

from __future__ import annotations

import difflib
from typing import Any

from cake_agents.store import RunsStore


def unified(a: str, b: str, a_label: str, b_label: str, context: int = 3) -> str:
    """A unified diff of two kernel texts ("" when they are equal)."""
    return "".join(difflib.unified_diff(a.splitlines(keepends=True),
                                        b.splitlines(keepends=True), a_label, b_label,
                                        n=context))


def diff_stat(diff: str) -> tuple[int, int]:
    """(lines added, lines removed) of a unified diff."""
    lines = diff.splitlines()
    return (sum(1 for x in lines if x.startswith("+") and not x.startswith("+++")),
            sum(1 for x in lines if x.startswith("-") and not x.startswith("---")))


def seed_hash(store: RunsStore, run_id: str) -> str:
    return next((c["hash"] for c in store.candidates(run_id) if c["origin"] == "seed"), "")


def candidate_view(store: RunsStore, run_id: str, hash_: str, *,
                   seed: str | None = None) -> dict[str, Any]:
    """One candidate as a reader follows it: where it came from, why, and what changed."""
    c = store.candidate(run_id, hash_)
    if c is None:
        raise KeyError(hash_)
    seed = seed_hash(store, run_id) if seed is None else seed
    text = str(c["text"])
    parent = c["parent"] or ""
    parent_text = store.candidate_text(run_id, parent) if parent else None
    seed_text = store.candidate_text(run_id, seed) if seed else None
    steps = []
    before = parent_text or ""
    for i, s in enumerate(c["steps"]):
        after = str(s.get("text", ""))
        steps.append({"tactic": s.get("tactic", ""), "params": s.get("params", {}),
                      "rationale": s.get("rationale", ""),
                      "diff": unified(before, after, f"step {i}", f"step {i + 1}")})
        before = after
    return {
        "hash": hash_, "parent": parent, "origin": c["origin"], "tactic": c["tactic"],
        "params": {k: v for k, v in c["params"].items() if k != "steps"},
        "step": c["step"], "rationale": c["rationale"], "intent": c["intent"],
        "steps": steps,
        "diff_parent": "" if parent_text is None else unified(
            parent_text, text, f"parent {parent[:10]}", f"candidate {hash_[:10]}"),
        "diff_seed": "" if seed_text is None or seed == hash_ else unified(
            seed_text, text, f"seed {seed[:10]}", f"candidate {hash_[:10]}"),
    }


def kept(store: RunsStore, run_id: str) -> list[dict[str, Any]]:
    """Every candidate that passed its gates, in evaluation order, with its score and its
    view (`candidate_view`)."""
    seed = seed_hash(store, run_id)
    out = []
    seen: set[str] = set()
    for p in store.progress(run_id):
        if p["status"] != "pass" or p["hash"] in seen:
            continue
        seen.add(p["hash"])
        try:
            view = candidate_view(store, run_id, p["hash"], seed=seed)
        except KeyError:
            continue
        out.append({**view, "seq": p["seq"], "score": p["score"]})
    return out


def headline(entry: dict[str, Any], width: int = 70) -> tuple[str, list[str]]:
    """A candidate in one short line, and the lines under it: a chain's steps, one per
    line and whole (cutting the joined text showed a part of the first step only)."""
    steps = [str(s) for s in entry.get("steps") or []]
    if steps:
        return f"chain of {len(steps)} moves", [f"{i + 1}. {s}" for i, s in enumerate(steps)]
    what = str(entry.get("intent") or entry.get("rationale") or entry.get("tactic", ""))
    return (what if len(what) <= width else what[:width - 3] + "..."), []
