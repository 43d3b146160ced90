"""The records the graph's state holds: candidates, plans, population entries, the best.

They are TypedDicts, not dataclasses, because they live in `EvolveState` and so in every
SQLite checkpoint: plain dicts of JSON values serialize as they are and a resumed run reads
back what it wrote.  Every key is optional (`total=False`) because nodes write partial
records (a planner's "stop" plan has only kind and reason) and checkpoints written before
a key existed must still load.
"""

from __future__ import annotations

from typing import Any, Literal, TypedDict

Json = dict[str, Any]


class Candidate(TypedDict, total=False):
    """A kernel in flight this generation (in `EvolveState.batch`)."""

    hash: str
    """Content hash of `text`: the key of the runs store and of the population."""
    parent: str | None
    """Hash of the kernel it was derived from (None for the seed)."""
    text: str
    tactic: str
    """The tactic applied ("seed", "model" for a model's rewrite, or a tactic's name)."""
    params: Json
    """The tactic's parameters."""
    move: str
    """The planner's move key ("tactic:param=value")."""
    move_class: str
    """The move without its parameter values: what the failure memory groups by."""
    origin: str
    """Who wrote it: "seed", "coder" or "repairer"."""
    rationale: str
    intent: str
    """A model candidate: what the model said it meant to change."""
    steps: list[str]
    """A chain candidate: the rationale of each step, in order."""
    uri: str
    """Where the checker opened it on the language server."""
    diagnostics: list[Json]
    """The server's findings: {code, severity, message, line, col}."""
    errors: int
    """How many of the findings are errors."""
    quick_fixes: list[Json]
    """The quick fixes the server offers for the errors: {diag, title, preferred, edits}."""
    safe_fixes: list[list[Any]]
    """The edits of the server's `source.fixAll` action (every safe fix), applied by the
    repairer before anything else."""
    hovers: dict[str, str]
    """With a model: the hover text of the primitives on the failing lines (for the
    repair prompt)."""
    repairable: bool
    """Whether the repairer may still fix it (errors left, rounds left)."""
    repairs: int
    """Repair rounds it went through."""
    fixes: list[str]
    """Titles of the quick fixes applied to it."""
    repaired_from: str
    """The hash of the candidate a repair was made from."""
    checked_by: str
    """How it was checked: "lsp" or "in-process"."""
    predicted: float
    """The planner's preview score."""


class Plan(TypedDict, total=False):
    """The planner's decision for the generation (in `EvolveState.plan`)."""

    kind: Literal["seed", "tactics", "model", "stop"]
    reason: str
    """Why, in words (shown in the progress and the report)."""
    moves: list[Json]
    """`tactics`: the moves to apply: {parent, move, tactic, params, rationale, ...}."""
    bucket: str | None
    """Portfolio mode: the shape bucket this generation works for."""
    parent: str
    """`model`: the hash of the kernel the model rewrites."""
    hints: list[Json]
    """`model`: the policy's best-ranked moves, offered to the model as ideas."""
    bottleneck: str
    """`model`: what limits the parent on the headline shape."""
    n: int
    """`model`: how many candidates to ask for."""


class PopulationEntry(TypedDict, total=False):
    """One evaluated candidate (in `EvolveState.population`, by hash)."""

    hash: str
    parent: str | None
    tactic: str
    move: str
    move_class: str
    origin: str
    rationale: str
    intent: str
    steps: list[str]
    fixes: list[str]
    step: int
    """The generation that evaluated it."""
    seq: int
    """Its evaluation number (0 for a candidate that failed the check)."""
    status: Literal["pass", "fail"]
    failed_gate: str | None
    score: float | None
    """Weighted geomean predicted speedup over the target shapes; None if it does not
    cover them."""
    bucket_scores: dict[str, float]
    times: dict[str, float]
    """Shape key -> predicted seconds."""
    measured: Json
    """Shape key -> measured timings, when a GPU ran it."""
    bottleneck: str
    hot_lines: list[Json]
    """The cost model's most expensive source lines on the headline shape."""
    gates: dict[str, str]
    """Gate -> status."""


class Best(TypedDict, total=False):
    """The best candidate so far (in `EvolveState.best`)."""

    hash: str
    score: float | None
    seq: int
    """The evaluation that found it."""
    winners: dict[str, str]
    """Portfolio mode: shape bucket -> hash of its winner."""
