"""Budgets in tokens, dollars and evaluations, checked before anything is spent.

A model call is allowed only when its worst case fits: the prompt's tokens plus
`max_tokens` of completion, priced at the model's rates.  When the full `max_tokens` does
not fit, the call gets the completion room that is left, or does not happen at all if
that is below `MIN_COMPLETION` (no kernel fits in fewer tokens).  So the recorded spend
can never pass a budget, whatever the model answers.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

MIN_COMPLETION = 256


@dataclass(frozen=True)
class Budget:
    tokens: int | None = None
    usd: float | None = None
    evals: int | None = None

    def to_json(self) -> dict[str, object]:
        return {"tokens": self.tokens, "usd": self.usd, "evals": self.evals}


@dataclass(frozen=True)
class Spent:
    tokens: int = 0
    usd: float = 0.0
    evals: int = 0

    @classmethod
    def from_usage(cls, usage: Mapping[str, Mapping[str, float]], evals: int) -> Spent:
        total = usage.get("total", {})
        return cls(int(total.get("tokens_in", 0) + total.get("tokens_out", 0)),
                   float(total.get("usd", 0.0)), evals)

    def plus(self, tokens: int = 0, usd: float = 0.0, evals: int = 0) -> Spent:
        return Spent(self.tokens + tokens, self.usd + usd, self.evals + evals)


@dataclass(frozen=True)
class Allowance:
    """What one call may use, or why it may not happen (`reason`)."""

    max_tokens: int
    reason: str = ""

    @property
    def ok(self) -> bool:
        return not self.reason


Pricer = Callable[[int, int], float | None]
"""(prompt tokens, completion tokens) -> dollars, or None when the price is unknown."""


def allow_call(budget: Budget, spent: Spent, prompt_tokens: int, max_tokens: int,
               price: Pricer) -> Allowance:
    """The completion room a call may have under `budget`, given what is spent."""
    room = max_tokens
    if budget.tokens is not None:
        room = min(room, budget.tokens - spent.tokens - prompt_tokens)
        if room < MIN_COMPLETION:
            return Allowance(0, f"token budget: {spent.tokens} of {budget.tokens} used, the "
                                f"next call needs at least {prompt_tokens + MIN_COMPLETION}")
    if budget.usd is not None:
        full = price(prompt_tokens, room)
        if full is None:
            return Allowance(0, "dollar budget set but the model's price is unknown")
        left = budget.usd - spent.usd
        if full > left:
            base = price(prompt_tokens, 0) or 0.0
            per_out = (full - base) / room if room else 0.0
            fit = int((left - base) / per_out) if per_out > 0 else (room if base <= left
                                                                      else 0)
            room = min(room, fit)
            if room < MIN_COMPLETION or (price(prompt_tokens, room) or 0.0) > left:
                return Allowance(0, f"dollar budget: ${spent.usd:.4f} of ${budget.usd:.4f} "
                                    "used, the next call could exceed it")
    return Allowance(room)


def evals_left(budget: Budget, spent: Spent) -> int | None:
    return None if budget.evals is None else max(0, budget.evals - spent.evals)
