"""The graph's state: one dataclass, plain JSON-like values, explicit reducers.

Nodes return partial updates (dicts of field -> value).  A field without a reducer takes
the last value written; the reducers below merge, accumulate or reset.  Values are plain
dicts, lists, strings and numbers so that the SQLite checkpointer stores them without
custom types, and so that a checkpoint stays small: kernel texts live in the runs store,
the state holds only the texts of the candidates in flight.

The candidate, plan, population and best records are TypedDicts (cake_agents/records.py);
the other dict values are:

- Memory item (in `memory`): signature, gate, code, move_class, count, example,
  last_step.
- Usage (in `usage`, by node and "total"): calls, tokens_in, tokens_out, usd, failed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Any, TypedDict

from cake_agents.records import Best, Candidate, Json, Plan, PopulationEntry


def merge(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """Union of two dicts, the new values winning; a value of None deletes the key."""
    out = dict(old or {})
    for k, v in (new or {}).items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = v
    return out


def extend_or_clear(old: list[Any], new: list[Any]) -> list[Any]:
    """Appends; an empty list clears (the reflector empties what it has condensed)."""
    if not new:
        return []
    return [*(old or []), *new]


def add_usage(old: dict[str, Json], new: dict[str, Json]) -> dict[str, Json]:
    """Adds per-node counters (calls, tokens, dollars) field by field."""
    out = {k: dict(v) for k, v in (old or {}).items()}
    for node, counters in (new or {}).items():
        slot = out.setdefault(node, {})
        for name, value in counters.items():
            slot[name] = slot.get(name, 0) + value
    return out


@dataclass
class EvolveState:
    run_id: str = ""
    """The run this thread belongs to (also the checkpointer's thread id)."""
    step: int = 0
    """Generation counter, bumped by the planner; the key of every store write."""
    plan: Plan = field(default_factory=lambda: Plan())
    """The planner's decision for this generation."""
    batch: list[Candidate] = field(default_factory=list)
    """Candidates in flight this generation."""
    repair_round: int = 0
    """Repair rounds spent on the current batch."""
    population: Annotated[dict[str, PopulationEntry], merge] = field(default_factory=dict)
    """Every evaluated candidate, by hash: the dedup set and the search's history."""
    elite: list[str] = field(default_factory=list)
    """The archivist's bounded, diverse selection of passing candidates: the parents the
    planner draws from (bucket winners always included)."""
    winners: dict[str, str] = field(default_factory=dict)
    """Shape bucket -> hash of its best passing candidate."""
    best: Best = field(default_factory=lambda: Best())
    """The best candidate so far."""
    baseline: Json = field(default_factory=dict)
    """The seed's predicted seconds and roofline floors per shape (the speedup's
    denominator), set once at the start."""
    memory: list[Json] = field(default_factory=list)
    """The reflector's bounded failure memory (what the planner avoids and the model is
    told)."""
    pending_failures: Annotated[list[Json], extend_or_clear] = field(default_factory=list)
    """Failures of this generation, not yet condensed by the reflector."""
    tried: Annotated[dict[str, int], merge] = field(default_factory=dict)
    """"parent:move" -> step: moves already taken, never repeated."""
    usage: Annotated[dict[str, Json], add_usage] = field(default_factory=dict)
    """Model usage per node and in total."""
    evals: int = 0
    """Candidates that went through the evaluation gates (the --budget-evals count)."""
    proposed: int = 0
    """Candidates written (by the coder or the repairer), evaluated or not."""
    stall: int = 0
    """Generations since the best score last improved."""
    done: bool = False
    stop_reason: str = ""
    halt: Json = field(default_factory=dict)
    """Set when a bound stopped the run: {"reason", "exit"} (the CLI's exit status)."""
    dispatcher: Json = field(default_factory=dict)
    """Portfolio mode: the bucket table the dispatcher was generated from."""


class StateUpdate(TypedDict, total=False):
    """What a node returns: the fields of `EvolveState` it changes (LangGraph applies each
    through the field's reducer, if it has one)."""

    run_id: str
    step: int
    plan: Plan
    batch: list[Candidate]
    repair_round: int
    population: dict[str, PopulationEntry]
    elite: list[str]
    winners: dict[str, str]
    best: Best
    baseline: Json
    memory: list[Json]
    pending_failures: list[Json]
    tried: dict[str, int]
    usage: dict[str, dict[str, float]]
    evals: int
    proposed: int
    stall: int
    done: bool
    stop_reason: str
    halt: Json
    dispatcher: Json
