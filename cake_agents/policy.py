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
4. lookahead: while the best child beats every kernel evaluated so far (the search is
   climbing), a small beam search goes on from the best children in preview space (moves
   applied to kernels that were only previewed, never evaluated), a few moves deep.  When
   the best kernel it reaches is predicted clearly better than every single move, the
   whole sequence becomes one candidate (a `chain` move): a de-tuned kernel usually needs
   several independent fixes (more stages, a wider tile, ...), and an evaluation
   (simulation, compilation, a GPU run) costs far more than a preview;
5. selection: the chain, if any, and the best predicted single move (with a chain, its
   hedge: if the simulator rejects the chain, one step still lands), then more of the
   best single moves and one drawn at random from the rest for diversity, up to the
   batch size, go to the coder; only those pay for the evaluation gates.  (With the
   default batch of two, a generation that has a chain draws nothing at random.)

`RandomPolicy` is the baseline `bench/agent_search.py` compares against: a random parent
and a random untried move, no preview, no memory.  Both apply and preview moves through a
`TacticLab` (`tactic_lab.py`).
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

from cake_agents.scoring import ShapeSpec, score
from cake_agents.tactic_lab import Preview, TacticLab

if TYPE_CHECKING:
    from cake_agents.context import AgentContext
    from cake_agents.state import EvolveState

PREVIEW_BUDGET = 32
"""Previews per generation (each a tactic application, a check and a prediction, cached
across generations)."""
BLOCK_AFTER = 2
"""A move class whose moves made this many failing kernels is no longer proposed."""
LOOKAHEAD_DEPTH = 5
"""Moves in the longest chain the lookahead builds (the first one included)."""
LOOKAHEAD_BEAM = 2
"""Kernels the lookahead keeps at each depth (distinct predicted times)."""
LOOKAHEAD_BUDGET = 160
"""Previews per generation for the lookahead, on top of PREVIEW_BUDGET."""
CHAIN_GAIN = 0.02
"""A chain is proposed only when its prediction beats the best single move by this
fraction: each extra move is one more way for the simulator to reject the kernel."""

#: Which tactics address which bottleneck (the cost model's largest category).
RELEVANT: dict[str, tuple[str, ...]] = {
    "compute": ("tile-size", "rebalance-registers"),
    "memory": ("tile-size", "stages", "swizzle"),
    "latency": ("stages", "tile-size"),
    "sync": ("stages", "rebalance-registers"),
    "launch": ("tile-size",),
}


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


def _distinct(ranked: Sequence[Preview], width: int = LOOKAHEAD_BEAM) -> list[Preview]:
    """The first `width` previews with distinct predicted times: neutral variants of one
    kernel (a swizzle the model does not price) would otherwise fill the whole beam."""
    out: list[Preview] = []
    niches: set[tuple[tuple[str, str], ...]] = set()
    for p in ranked:
        key = tuple(sorted((k, f"{v:.6g}") for k, v in p.times.items()))
        if key in niches:
            continue
        niches.add(key)
        out.append(p)
        if len(out) >= width:
            break
    return out


def _score_of(state: EvolveState, h: str, bucket: str | None) -> float:
    e = state.population.get(h, {})
    s = e.get("bucket_scores", {}).get(bucket) if bucket else e.get("score")
    return s if s is not None else -math.inf


def parent_order(ctx: AgentContext, state: EvolveState, bucket: str | None,
                 rng: random.Random) -> list[str]:
    """The best elite member first, then the others shuffled (a cheap tournament)."""
    elite = [h for h in state.elite if h in state.population]
    if not elite:
        return []

    def key(h: str) -> tuple[float, int]:
        return (-_score_of(state, h, bucket), state.population[h].get("seq", 0))

    ranked = sorted(elite, key=key)
    rest = ranked[1:]
    rng.shuffle(rest)
    return [ranked[0], *rest]


class EvolvePolicy:
    name = "evolve"

    def __init__(self, lab: TacticLab, lookahead: int = LOOKAHEAD_DEPTH) -> None:
        self.lab = lab
        self.lookahead = lookahead
        """Moves in the longest chain (1: single moves only, the search without lookahead)."""
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
        chain = None
        best_known = max((_score_of(state, h, bucket) for h in state.elite
                          if h in state.population), default=-math.inf)
        if pool and pool[0][0] > best_known:
            # still climbing: the best single move beats every kernel evaluated so far, so
            # the moves after it are worth a look.  At a local optimum of the cost model
            # the lookahead is skipped, and the search goes on one move at a time.
            chain = self.lookahead_chain(ctx, [p for *_, p in pool], known, blocked, shapes)
        chosen: list[Preview] = []
        seen: set[str] = set()
        exploit = max(1, n - 1)
        if chain is not None:
            chosen.append(chain)
            seen.add(chain.hash)
            exploit = max(exploit, 2)  # the chain and its hedge, the best single move
        for *_, h, p in pool:
            if len(chosen) >= min(n, exploit):
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
        out = []
        for p in chosen:
            move = p.chain
            out.append({"parent": p.path[0].parent if p.path else p.parent,
                        "tactic": move.tactic, "params": move.params, "move": move.key,
                        "move_class": move.move_class,
                        "predicted": target_score(ctx, p.times, shapes), "hash": p.hash,
                        "rationale": (f"{len(p.path)} moves: " if len(p.path) > 1 else "")
                        + "; ".join(q.rationale for q in (p.path or (p,)))})
        return out

    def lookahead_chain(self, ctx: AgentContext, ranked: list[Preview], known: set[str],
                        blocked: set[str], shapes: list[ShapeSpec]) -> Preview | None:
        """The best kernel a short beam search reaches beyond the single moves, as a
        preview whose `path` holds the moves from the evaluated parent; None when it
        does not beat the best single move by CHAIN_GAIN.

        The beam starts from the best single moves (distinct predicted times) and keeps,
        at each depth, the best children predicted better than everything seen before:
        a chain improves with every step after its first, so a kernel at a local optimum
        of the cost model costs one level of previews, not the whole budget.  Each kernel
        is a step once: one already known, or reached by a shorter path, is skipped.
        """
        if self.lookahead < 2 or not ranked:
            return None
        first = target_score(ctx, ranked[0].times, shapes)
        if first is None:
            return None
        seen = set(known) | {p.hash for p in ranked}
        beam = _distinct(ranked)
        budget = LOOKAHEAD_BUDGET
        best_score, best = first, None
        for _depth in range(2, self.lookahead + 1):
            children: list[tuple[float, int, str, Preview]] = []
            for node in beam:
                path = node.path or (node,)
                for move in self.lab.moves(node.text):
                    if move.move_class in blocked:
                        continue
                    if budget <= 0:  # counted cached or not, as the single moves are
                        break
                    budget -= 1
                    p = self.lab.preview(node.hash, node.text, move, ctx.info.shapes)
                    if p is None or p.hash in seen:
                        continue
                    seen.add(p.hash)
                    s = target_score(ctx, p.times, shapes)
                    if s is None or round(s, 9) <= round(best_score, 9):
                        continue
                    child = Preview(p.move, p.parent, p.text, p.hash, p.rationale, p.times,
                                    p.admitted, p.smem, (*path, p))
                    children.append((round(s, 9), p.smem, p.hash, child))
            if not children:
                break
            children.sort(key=lambda c: (-c[0], c[1], c[2]))
            best_score, best = children[0][0], children[0][3]
            beam = _distinct([c[3] for c in children])
        if best is None or best_score <= first * (1 + CHAIN_GAIN):
            return None
        return best

    def suggestions(self, ctx: AgentContext, state: EvolveState, parent: str,
                    bucket: str | None, k: int = 3) -> list[dict[str, Any]]:
        """The best-predicted tactic moves from `parent`: hints for a model's prompt."""
        text = ctx.text_of(parent)
        if text is None:
            return []
        shapes = ctx.target_shapes(bucket)
        out: list[dict[str, Any]] = []
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
    """`random`: the baseline; `greedy`: the evolutionary search without lookahead (one
    move per candidate, for comparison); anything else: the offline policy."""
    if name == "random":
        return RandomPolicy(lab)
    if name == "greedy":
        return EvolvePolicy(lab, lookahead=1)
    return EvolvePolicy(lab)
