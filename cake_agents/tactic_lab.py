"""Tactic moves and the lab that applies and previews them, for every policy and the coder.

A move names a tactic and its parameters (or a `chain` of moves); the lab applies it to a
kernel text and prices the child with the cost model, and remembers both. The policies
decide which moves to try; the coder applies the chosen ones through the same lab, so a
candidate is built exactly as it was previewed, and `bench/agent_search.py` shares one
lab per case across runs.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from cake_agents.context import content_hash
from cake_agents.scoring import ShapeSpec

CHAIN = "chain"
"""The move that applies a sequence of tactic moves (`params["steps"]`) one after another."""


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
        """Every move the tactics offer on `text`, round-robin over the tactics: each
        tactic's first variant, then each one's second, and so on.  The policies preview
        moves in this order under a budget, so a tactic with a dozen parameter sets (a
        stage count, a swizzle per buffer) does not starve the one-variant structural
        rewrites listed after it."""
        h = content_hash(text)
        if h not in self._moves:
            per_tactic: list[list[Move]] = []
            got = self.parsed(text)
            if got is not None:
                kernel, src = got
                for name, t in self.tactics.items():
                    try:
                        if not t.applies(kernel, src):
                            continue
                        per_tactic.append([Move(name, dict(p))
                                           for p in t.variants(kernel, src)])
                    except Exception:  # a broken tactic plugin costs its moves, not the run
                        continue
            depth = max((len(ms) for ms in per_tactic), default=0)
            self._moves[h] = [ms[i] for i in range(depth) for ms in per_tactic if i < len(ms)]
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


__all__ = ["CHAIN", "Move", "Preview", "TacticLab"]
