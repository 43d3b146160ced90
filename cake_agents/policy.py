"""The offline policy: an evolutionary search over tactics, guided by the cost model.

This is what drives the graph when no model is configured (the embedded default: no key,
no GPU).  One generation:

1. parents: the best of the elite for the target shapes, then the rest of the elite in
   an order shuffled by the run's RNG (a tournament that still reaches neutral variants,
   which is how a search crosses a plateau: stages 3 -> 2 changes nothing alone, but
   frees the shared memory a larger tile needs);
2. mutations: every parameter set a tactic's `variants` offers, minus moves already
   taken from that parent and move classes the failure memory has seen fail repeatedly;
3. preview: each mutation is applied, checked and priced by the cost model (milliseconds,
   no simulation); children identical to known kernels (content hash) are dropped;
4. selection: the best predicted children, plus one drawn at random from the rest for
   diversity, go to the coder; only those pay for the evaluation gates.

`RandomPolicy` is the baseline `bench/agent_search.py` compares against: a random parent
and a random untried move, no preview, no memory.
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from cake_agents.context import content_hash
from cake_agents.scoring import ShapeSpec, score

if TYPE_CHECKING:
    from cake_agents.context import AgentContext
    from cake_agents.state import EvolveState

PREVIEW_BUDGET = 32
"""Previews per generation (each a tactic application, a check and a prediction, cached
across generations)."""
BLOCK_AFTER = 2
"""A move class whose moves made this many failing kernels is no longer proposed."""

#: Which tactics address which bottleneck (the cost model's largest category).
RELEVANT: dict[str, tuple[str, ...]] = {
    "compute": ("tile-size", "rebalance-registers"),
    "memory": ("tile-size", "stages", "swizzle"),
    "latency": ("stages", "tile-size"),
    "sync": ("stages", "rebalance-registers"),
    "launch": ("tile-size",),
}


@dataclass(frozen=True)
class Move:
    tactic: str
    params: dict[str, Any] = field(default_factory=dict)

    @property
    def key(self) -> str:
        return f"{self.tactic}{json.dumps(self.params, sort_keys=True)}"

    @property
    def move_class(self) -> str:
        """The move with its numbers abstracted: `tile-size(name=BN)`, `stages`."""
        names = [f"{k}={v}" for k, v in sorted(self.params.items()) if isinstance(v, str)]
        return f"{self.tactic}({','.join(names)})" if names else self.tactic


@dataclass
class Preview:
    move: Move
    parent: str
    text: str
    hash: str
    rationale: str
    times: dict[str, float]
    admitted: list[str]
    smem: int = 0
    """Shared memory per block: among children predicted equal, the one that frees
    resources is preferred (it makes room for moves the limits refused before)."""


class Policy(Protocol):
    name: str
    lab: TacticLab
    """Where the coder applies the chosen moves (the same cache the policy previewed with)."""
    last_skipped: dict[str, int]

    def propose(self, ctx: AgentContext, state: EvolveState, bucket: str | None, n: int,
                step: int) -> list[dict[str, Any]]: ...


def rng_for(ctx: AgentContext, step: int, purpose: str) -> random.Random:
    """A generator that depends only on the run's seed, the step and the purpose, so a
    resumed run draws exactly what the uninterrupted one would have."""
    return random.Random(f"{ctx.config.seed_rng}:{step}:{purpose}")


def blocked_classes(memory: Sequence[dict[str, Any]]) -> set[str]:
    """Move classes whose moves produced failing kernels at least BLOCK_AFTER times."""
    bad: dict[str, set[str]] = {}
    for m in memory:
        if m.get("move_class"):
            bad.setdefault(m["move_class"], set()).update(m.get("hashes", []))
    return {c for c, hashes in bad.items() if len(hashes) >= BLOCK_AFTER}


def target_score(ctx: AgentContext, times: dict[str, float], shapes: list[ShapeSpec]
                 ) -> float | None:
    return score(times, ctx.info.baseline, ctx.info.floors, shapes)


class TacticLab:
    """Applies tactics to kernels and previews the results; remembers what it computed.

    Everything here is a pure function of the kernel texts, so the memo is only a cache:
    a resumed run recomputes the same values.
    """

    def __init__(self, tactics: Sequence[Any], kernel: str, arch: str = "") -> None:
        self.tactics = {t.name: t for t in tactics}
        self.kernel = kernel
        self.arch = arch
        """Children that retarget another arch are not previewed (the gates refuse them)."""
        self._parsed: dict[str, Any] = {}
        self._moves: dict[str, list[Move]] = {}
        self._previews: dict[tuple[str, str], Preview | None] = {}

    def parsed(self, text: str) -> tuple[Any, Any] | None:
        h = content_hash(text)
        if h not in self._parsed:
            from cake_core.check import check_source
            from cake_core.syntax.source import SourceFile

            src = SourceFile(text, f"{h}.cake")
            # Parse and type-check only: a child was verified by its tactic, and every
            # other text here passed the static gate.  The verifier passes are most of a
            # check's cost, and a preview needs only the IR.
            res = check_source(src, passes=[])
            kernel = None
            if res.program is not None and not res.errors:
                kernel = next((k for k in res.program.kernels if k.name == self.kernel),
                              res.program.kernels[0] if len(res.program.kernels) == 1
                              else None)
            self._parsed[h] = (kernel, src) if kernel is not None else None
        return self._parsed[h]

    def moves(self, text: str) -> list[Move]:
        h = content_hash(text)
        if h not in self._moves:
            out: list[Move] = []
            got = self.parsed(text)
            if got is not None:
                kernel, src = got
                for name, t in self.tactics.items():
                    try:
                        if not t.applies(kernel, src):
                            continue
                        out.extend(Move(name, dict(p)) for p in t.variants(kernel, src))
                    except Exception:  # a broken tactic plugin costs its moves, not the run
                        continue
            self._moves[h] = out
        return self._moves[h]

    def apply(self, text: str, move: Move) -> tuple[str, str] | None:
        """(child text, rationale), or None when the tactic declines."""
        from cake_core.diagnostics.model import apply_edits

        got = self.parsed(text)
        tactic = self.tactics.get(move.tactic)
        if got is None or tactic is None:
            return None
        kernel, src = got
        try:
            res = tactic.apply(kernel, src, dict(move.params))
        except Exception:
            return None
        if res is None:
            return None
        return apply_edits(text, res.edits), res.rationale

    def preview(self, parent_hash: str, text: str, move: Move, shapes: list[ShapeSpec]
                ) -> Preview | None:
        key = (parent_hash, move.key)
        if key in self._previews:
            return self._previews[key]
        result = None
        applied = self.apply(text, move)
        if applied is not None:
            child, why = applied
            times, admitted, smem = self.price(child, shapes)
            result = Preview(move, parent_hash, child, content_hash(child), why, times,
                             admitted, smem)
        self._previews[key] = result
        return result

    def price(self, text: str, shapes: list[ShapeSpec]
              ) -> tuple[dict[str, float], list[str], int]:
        """Predicted seconds per admitted shape, the admitted shapes, smem bytes."""
        got = self.parsed(text)
        if got is None:
            return {}, [], 0
        kernel, _ = got
        if self.arch and kernel.arch != self.arch:
            return {}, [], 0
        try:
            from cake_core.cost.model import predict
        except ImportError:
            return {}, [], 0
        times, admitted, smem = {}, [], 0
        for s in shapes:
            if not _admits(kernel, s.dims):
                continue
            try:
                p = predict(kernel, s.dims)
            except Exception:
                continue
            times[s.key] = p.seconds
            admitted.append(s.key)
            smem = smem or int(getattr(getattr(p.resources, "smem", None), "total", 0) or 0)
        return times, admitted, smem


def _admits(kernel: Any, dims: dict[str, int]) -> bool:
    for name, d in kernel.dims.items():
        v = dims.get(name)
        if v is None:
            continue
        if v % max(1, d.multiple_of) or (d.max is not None and v > d.max):
            return False
    return True


def parent_order(ctx: AgentContext, state: EvolveState, bucket: str | None,
                 rng: random.Random) -> list[str]:
    """The best elite member first, then the others shuffled (a cheap tournament)."""
    elite = [h for h in state.elite if h in state.population]
    if not elite:
        return []

    def key(h: str) -> tuple[float, int]:
        e = state.population[h]
        s = (e.get("bucket_scores", {}).get(bucket) if bucket else e.get("score"))
        return (-(s if s is not None else -math.inf), e.get("seq", 0))

    ranked = sorted(elite, key=key)
    rest = ranked[1:]
    rng.shuffle(rest)
    return [ranked[0], *rest]


class EvolvePolicy:
    name = "evolve"

    def __init__(self, lab: TacticLab) -> None:
        self.lab = lab
        self.last_skipped: dict[str, int] = {}
        """Moves the last proposal found useless (declined, duplicate, uncovered shapes):
        the planner marks them tried so they are not previewed again."""

    def propose(self, ctx: AgentContext, state: EvolveState, bucket: str | None, n: int,
                step: int) -> list[dict[str, Any]]:
        rng = rng_for(ctx, step, "evolve")
        shapes = ctx.target_shapes(bucket)
        blocked = blocked_classes(state.memory)
        known = set(state.population)
        budget = PREVIEW_BUDGET
        pool: list[tuple[float, int, int, str, Preview]] = []
        skipped: dict[str, int] = {}
        for parent in parent_order(ctx, state, bucket, rng):
            text = ctx.text_of(parent)
            if text is None:
                continue
            bottleneck = state.population[parent].get("bottleneck", "")
            relevant = RELEVANT.get(bottleneck, ())
            for move in self.lab.moves(text):
                tried_key = f"{parent}:{move.key}"
                if tried_key in state.tried or move.move_class in blocked:
                    continue
                # Count every preview, cached or not: the choice must not depend on what
                # this process happens to have computed (a resumed run starts cold).
                if budget <= 0:
                    break
                budget -= 1
                p = self.lab.preview(parent, text, move, ctx.info.shapes)
                if p is None or p.hash in known:
                    skipped[tried_key] = step
                    continue
                s = target_score(ctx, p.times, shapes)
                if s is None:
                    skipped[tried_key] = step
                    continue
                pool.append((round(s, 9), p.smem, 0 if move.tactic in relevant else 1,
                             p.hash, p))
        pool.sort(key=lambda x: (-x[0], x[1], x[2], x[3]))
        chosen: list[Preview] = []
        seen: set[str] = set()
        for *_, h, p in pool:
            if len(chosen) >= max(1, n - 1):
                break
            if h not in seen:
                chosen.append(p)
                seen.add(h)
        rest = [p for *_, h, p in pool if h not in seen]
        if rest and len(chosen) < n:
            pick = rest[rng.randrange(len(rest))]
            chosen.append(pick)
            seen.add(pick.hash)
        for *_, h, p in pool:  # fill up if the exploration pick was not enough
            if len(chosen) >= n:
                break
            if h not in seen:
                chosen.append(p)
                seen.add(h)
        self.last_skipped = skipped
        return [{"parent": p.parent, "tactic": p.move.tactic, "params": p.move.params,
                 "move": p.move.key, "move_class": p.move.move_class,
                 "predicted": target_score(ctx, p.times, shapes), "hash": p.hash,
                 "rationale": p.rationale} for p in chosen]

    def suggestions(self, ctx: AgentContext, state: EvolveState, parent: str,
                    bucket: str | None, k: int = 3) -> list[dict[str, Any]]:
        """The best-predicted tactic moves from `parent`: hints for a model's prompt."""
        text = ctx.text_of(parent)
        if text is None:
            return []
        shapes = ctx.target_shapes(bucket)
        out = []
        for move in self.lab.moves(text)[:PREVIEW_BUDGET]:
            p = self.lab.preview(parent, text, move, ctx.info.shapes)
            if p is None or p.hash in state.population:
                continue
            s = target_score(ctx, p.times, shapes)
            if s is not None:
                out.append({"rationale": p.rationale, "predicted": s, "move": move.key})
        out.sort(key=lambda d: -d["predicted"])
        return out[:k]


class RandomPolicy:
    """A random passing kernel of the population, a random untried move: the baseline
    the benchmark compares against (no cost model, no memory, no elite)."""

    name = "random"

    def __init__(self, lab: TacticLab) -> None:
        self.lab = lab
        self.last_skipped: dict[str, int] = {}

    def propose(self, ctx: AgentContext, state: EvolveState, bucket: str | None, n: int,
                step: int) -> list[dict[str, Any]]:
        rng = rng_for(ctx, step, "random")
        parents = sorted(h for h, e in state.population.items() if e.get("status") == "pass")
        out: list[dict[str, Any]] = []
        for _ in range(8 * n):
            if len(out) >= n or not parents:
                break
            parent = parents[rng.randrange(len(parents))]
            text = ctx.text_of(parent)
            moves = [m for m in self.lab.moves(text or "")
                     if f"{parent}:{m.key}" not in state.tried
                     and all(o["move"] != m.key or o["parent"] != parent for o in out)]
            if not moves:
                parents.remove(parent)
                continue
            m = moves[rng.randrange(len(moves))]
            out.append({"parent": parent, "tactic": m.tactic, "params": m.params,
                        "move": m.key, "move_class": m.move_class, "predicted": None,
                        "hash": "", "rationale": ""})
        return out


def make_policy(name: str, lab: TacticLab) -> Policy:
    if name == "random":
        return RandomPolicy(lab)
    return EvolvePolicy(lab)
