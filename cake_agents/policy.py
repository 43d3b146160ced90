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
LOOKAHEAD_DEPTH = 5
"""Moves in the longest chain the lookahead builds (the first one included)."""
LOOKAHEAD_BEAM = 2
"""Kernels the lookahead keeps at each depth (distinct predicted times)."""
LOOKAHEAD_BUDGET = 160
"""Previews per generation for the lookahead, on top of PREVIEW_BUDGET."""
CHAIN_GAIN = 0.02
"""A chain is proposed only when its prediction beats the best single move by this
fraction: each extra move is one more way for the simulator to reject the kernel."""
CHAIN = "chain"
"""The move that applies a sequence of tactic moves (`params["steps"]`) one after another."""

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
    def steps(self) -> list[Move]:
        """The moves a chain applies in order; a plain move is its own only step."""
        if self.tactic != CHAIN:
            return [self]
        return [Move(str(st.get("tactic", "")), dict(st.get("params", {})))
                for st in self.params.get("steps", [])]

    @property
    def move_class(self) -> str:
        """The move with its numbers abstracted: `tile-size(name=BN)`, `stages`.  A chain's
        class joins its steps' (`stages+tile-size(name=BN)`): when the simulator rejects a
        chain, which step broke it is unknown, so the blame does not go to any one step
        (the single-move hedge proposed with it tells them apart)."""
        if self.tactic == CHAIN:
            return "+".join(m.move_class for m in self.steps)
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
    path: tuple[Preview, ...] = ()
    """For a lookahead result: the previews from the evaluated parent to this kernel, in
    order.  `parent` is then the kernel just before this one, which was only previewed;
    the evaluated parent is `path[0].parent`."""

    @property
    def chain(self) -> Move:
        """The move that rebuilds this kernel from the evaluated parent."""
        if len(self.path) < 2:
            return self.move
        return Move(CHAIN, {"steps": [{"tactic": p.move.tactic, "params": p.move.params}
                                      for p in self.path]})


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
        self.preview_calls = 0
        """Previews asked for (cached or not): what a policy spent on the cost model."""
        self.previews_computed = 0
        """Previews actually computed (the rest came from the cache)."""

    def parsed(self, text: str) -> tuple[Any, Any] | None:
        h = content_hash(text)
        if h not in self._parsed:
            from cake_core.check import check_source
            from cake_core.source import SourceFile

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
        """(child text, rationale), or None when the tactic declines (for a chain: when
        any of its steps does)."""
        from cake_core.diagnostics.model import apply_edits

        if move.tactic == CHAIN and CHAIN not in self.tactics:
            whys = []
            for step in move.steps:
                got_step = self.apply(text, step) if step.tactic != CHAIN else None
                if got_step is None:
                    return None
                text, why = got_step
                whys.append(why)
            return (text, "; ".join(whys)) if whys else None
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
        self.preview_calls += 1
        if key in self._previews:
            return self._previews[key]
        self.previews_computed += 1
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
