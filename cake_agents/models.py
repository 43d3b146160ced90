"""Models: litellm behind a small interface, plus a scripted model for tests and demos.

`ModelClient` is one attempt at one completion.  `ModelCaller` adds what every call
needs: the budget check before the call (worst case from `max_tokens`), retries with
exponential backoff on transient errors, a timeout, the bounds on calls (`CallLimits`),
usage and cost recorded per node and candidate in the runs store, and replay: a call whose
answer is already in the store (a run resumed after a crash) returns that answer instead
of paying for it again.  A refused key, an endpoint that stays unreachable, or a bound
reached sets `ModelCaller.halted`; the graph then stops the run (`graph.guarded`).

litellm is imported lazily, and `LITELLM_LOCAL_MODEL_COST_MAP=True` is set first, so that
it never fetches its price table from the internet; nothing imports it unless a model is
configured.  API keys come from the environment, as litellm reads them.

Prices are litellm's (`cost_per_token` on the reply's usage, which equals
`completion_cost` on the response), so there is no price table here.  Retries stay in
`ModelCaller` and litellm is called with `num_retries=0` (and the OpenAI client with
`max_retries=0`): with litellm's own retries a
failed attempt is invisible to the caller (three rate-limited attempts come back as one
exception), so the budget could not be checked before each attempt, each attempt's charge
could not be recorded, and a resumed run could not replay attempt by attempt.
"""

from __future__ import annotations

import contextlib
import os
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from cake_agents.budget import Allowance, Budget, Spent, allow_call
from cake_agents.redact import scrub

Message = dict[str, str]
PROMPT_MARGIN = 1.1


class ModelError(Exception):
    """A failed attempt; `transient` errors (rate limits, timeouts) are retried.

    `kind` says what the run does once retries are over: `auth` (the endpoint refused the
    key: stop at once, retrying cannot help), `unreachable` (no connection or no answer in
    time, after every retry: stop), anything else (this call failed; the run goes on)."""

    def __init__(self, message: str, *, transient: bool, kind: str = "error",
                 status: int | None = None) -> None:
        super().__init__(message)
        self.transient = transient
        self.kind = kind
        self.status = status


@dataclass(frozen=True)
class ModelReply:
    text: str
    tokens_in: int
    tokens_out: int
    usd: float
    finish_reason: str = "stop"


class ModelClient(Protocol):
    name: str

    def count_tokens(self, messages: Sequence[Message]) -> int: ...

    def price(self, prompt_tokens: int, completion_tokens: int) -> float | None: ...

    def complete(self, messages: Sequence[Message], *, max_tokens: int,
                 timeout: float) -> ModelReply: ...


def _approx_tokens(messages: Sequence[Message]) -> int:
    return sum(len(m.get("content", "")) // 3 + 4 for m in messages) + 3


# --- litellm ------------------------------------------------------------------------------
def import_litellm() -> Any:
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    os.environ.setdefault("LITELLM_LOG", "ERROR")
    import litellm

    litellm.suppress_debug_info = True
    litellm.telemetry = False
    return litellm


_TRANSIENT = ("RateLimitError", "Timeout", "APIConnectionError", "ServiceUnavailableError",
              "InternalServerError", "APIError")
_AUTH = ("AuthenticationError", "PermissionDeniedError")
_UNREACHABLE = ("Timeout", "APIConnectionError")


def classify(exc: BaseException) -> ModelError:
    """A litellm exception as a `ModelError`: the message scrubbed, the kind decided by the
    exception class, or the HTTP status when the class is generic (litellm reports a
    refused connection as an `InternalServerError` saying "Connection error")."""
    kind = type(exc).__name__
    text = scrub(str(exc))[:500]
    status = getattr(exc, "status_code", None)
    if kind in _AUTH or status in (401, 403):
        return ModelError(f"{kind}: {text}", transient=False, kind="auth",
                          status=status if isinstance(status, int) else None)
    if kind in _UNREACHABLE or "Connection error" in text or "timed out" in text.lower():
        return ModelError(f"{kind}: {text}", transient=True, kind="unreachable")
    return ModelError(f"{kind}: {text}", transient=kind in _TRANSIENT)


class LiteLLMClient:
    """Any litellm provider string (`openai/gpt-4o`, `anthropic/claude-...`, `ollama/...`).

    `completion_kwargs` pass through to `litellm.completion` (tests use `mock_response`,
    `cake evolve --api-base` an `api_base`).  `price_per_token` overrides litellm's price
    table (input, output dollars per token).

    With `stream` (the default) the reply is read as it is generated and reading stops
    once `max_tokens` completion tokens have come, counted here: a server that ignores
    `max_tokens` costs at most the chunk that crossed the limit.  Usage is what the server
    reports, or what was counted here when that is more (a cut stream carries no usage).
    """

    def __init__(self, model: str, *, completion_kwargs: dict[str, Any] | None = None,
                 price_per_token: tuple[float, float] | None = None,
                 stream: bool = True) -> None:
        self.name = model
        self._kwargs = dict(completion_kwargs or {})
        self._price = price_per_token
        self.stream = stream and "mock_response" not in self._kwargs
        self._litellm = import_litellm()

    def text_tokens(self, text: str) -> int:
        try:
            return int(self._litellm.token_counter(model=self.name, text=text))
        except Exception:
            return (len(text) + 2) // 3

    def count_tokens(self, messages: Sequence[Message]) -> int:
        try:
            return int(self._litellm.token_counter(model=self.name, messages=list(messages)))
        except Exception:
            return _approx_tokens(messages)

    def price(self, prompt_tokens: int, completion_tokens: int) -> float | None:
        if self._price is not None:
            return prompt_tokens * self._price[0] + completion_tokens * self._price[1]
        try:
            a, b = self._litellm.cost_per_token(model=self.name, prompt_tokens=prompt_tokens,
                                                completion_tokens=completion_tokens)
            return float(a) + float(b)
        except Exception:
            return None

    def complete(self, messages: Sequence[Message], *, max_tokens: int,
                 timeout: float) -> ModelReply:
        # max_retries=0: the OpenAI client's own retries would hide attempts from the
        # budget and from the bound on calls, as litellm's would (module docstring)
        kwargs: dict[str, Any] = {"model": self.name, "messages": list(messages),
                                  "max_tokens": max_tokens, "timeout": timeout,
                                  "num_retries": 0, "max_retries": 0, **self._kwargs}
        if self.stream:
            kwargs.update(stream=True, stream_options={"include_usage": True})
        try:
            resp = self._litellm.completion(**kwargs)
            if self.stream:
                return self._read(resp, messages, max_tokens, timeout)
        except ModelError:
            raise
        except Exception as exc:
            raise classify(exc) from None
        choice = resp.choices[0]
        text = getattr(choice.message, "content", None) or ""
        usage = getattr(resp, "usage", None)
        t_in = int(getattr(usage, "prompt_tokens", 0) or 0) or self.count_tokens(messages)
        t_out = max(int(getattr(usage, "completion_tokens", 0) or 0), self.text_tokens(text))
        usd = self.price(t_in, t_out)
        return ModelReply(text, t_in, t_out, float(usd or 0.0),
                          str(getattr(choice, "finish_reason", "") or "stop"))

    def _read(self, stream: Any, messages: Sequence[Message], max_tokens: int,
              timeout: float) -> ModelReply:
        """Reads a streamed reply until it ends or `max_tokens` have come (then it closes
        the connection: the server stops generating, the budget stops paying).

        `timeout` bounds the whole reply, not only the wait for each piece: a server that
        trickles pieces (or empty keep-alive chunks) cannot hold a call open for ever."""
        deadline = time.monotonic() + timeout
        parts: list[str] = []
        counted = 0  # the pieces counted one by one: never less than the whole text's count
        finish = "stop"
        reported: Any = None
        cut = False
        try:
            for chunk in stream:
                if getattr(chunk, "usage", None) is not None:
                    reported = chunk.usage
                for choice in getattr(chunk, "choices", None) or []:
                    piece = getattr(getattr(choice, "delta", None), "content", None) or ""
                    parts.append(piece)
                    counted += self.text_tokens(piece) if piece else 0
                    finish = str(getattr(choice, "finish_reason", None) or finish)
                if counted >= max_tokens:
                    cut, finish = True, "length"
                    break
                if time.monotonic() > deadline:
                    raise ModelError(f"Timeout: the reply took more than {timeout:g} s",
                                     transient=True, kind="unreachable")
        finally:
            close = getattr(stream, "close", None)
            if callable(close):
                with contextlib.suppress(Exception):
                    close()
        text = "".join(parts)
        own_out = self.text_tokens(text)
        t_in = int(getattr(reported, "prompt_tokens", 0) or 0) or self.count_tokens(messages)
        t_out = max(own_out, int(getattr(reported, "completion_tokens", 0) or 0))
        usd = self.price(t_in, t_out)
        return ModelReply(text, t_in, t_out, float(usd or 0.0),
                          "length" if cut else finish)


# --- scripted -----------------------------------------------------------------------------
Script = str | Exception | Callable[[Sequence[Message]], str]


@dataclass
class ScriptedModel:
    """A deterministic model: answers from a list, in order (the last one repeats).

    An answer may be a string, an exception to raise (a `ModelError` to simulate provider
    failures) or a function of the messages.  Tokens are counted as characters / 3 and
    priced at `price_per_token`, so budgets behave as with a real model.
    """

    answers: list[Script]
    name: str = "scripted"
    price_per_token: tuple[float, float] = (1e-6, 2e-6)
    finish_reasons: list[str] = field(default_factory=list)
    calls: list[list[Message]] = field(default_factory=list)

    def count_tokens(self, messages: Sequence[Message]) -> int:
        return _approx_tokens(messages)

    def price(self, prompt_tokens: int, completion_tokens: int) -> float | None:
        return prompt_tokens * self.price_per_token[0] + completion_tokens * \
            self.price_per_token[1]

    def complete(self, messages: Sequence[Message], *, max_tokens: int,
                 timeout: float) -> ModelReply:
        i = len(self.calls)
        self.calls.append([dict(m) for m in messages])
        answer = self.answers[min(i, len(self.answers) - 1)]
        if isinstance(answer, Exception):
            raise answer
        text = answer(messages) if callable(answer) else answer
        t_in = self.count_tokens(messages)
        t_out = min(max_tokens, max(1, len(text) // 3))
        finish = self.finish_reasons[i] if i < len(self.finish_reasons) else "stop"
        if len(text) // 3 > max_tokens:
            text, finish = text[: max_tokens * 3], "length"
        return ModelReply(text, t_in, t_out, self.price(t_in, t_out) or 0.0, finish)


# --- the caller ---------------------------------------------------------------------------
@dataclass
class CallRecord:
    """One attempt as it was charged: what the budget and the store saw."""

    attempt: int
    tokens_in: int
    tokens_out: int
    usd: float
    ok: bool
    text: str = ""
    finish_reason: str = ""
    error: str = ""
    replayed: bool = False


@dataclass
class CallOutcome:
    records: list[CallRecord]
    reply: CallRecord | None
    stopped: str = ""
    """Why no answer came: a budget reason or the last error."""
    budget_spent: bool = False
    """No answer because the budget cannot pay for another call: the run is over."""

    @property
    def tokens(self) -> int:
        return sum(r.tokens_in + r.tokens_out for r in self.records)

    @property
    def usd(self) -> float:
        return sum(r.usd for r in self.records)


@dataclass(frozen=True)
class CallLimits:
    """Bounds on model calls; reaching one stops the run (`ModelCaller.halted`)."""

    per_node: int = 12
    """Attempts one node may make in one generation (retries and repairs included)."""
    per_generation: int = 32
    """Attempts all nodes together may make in one generation."""
    failures: int = 8
    """Attempts in a row that gave nothing usable (an error, or an answer without a
    kernel) before the run stops."""


AUTH_EXIT = 2
BOUND_EXIT = 3


@dataclass
class ModelCaller:
    client: ModelClient
    budget: Budget
    store: Any = None
    run_id: str = ""
    max_tokens: int = 4096
    timeout_s: float = 120.0
    retries: int = 3
    backoff_s: float = 2.0
    sleep: Callable[[float], None] = time.sleep
    limits: CallLimits = field(default_factory=CallLimits)
    halted: str = ""
    """Why no more calls may be made (empty while they may): set once, never cleared."""
    halt_exit: int = 0
    """The exit status that reason calls for (`AUTH_EXIT`, `BOUND_EXIT`)."""
    streak: int = 0
    """Attempts in a row that gave nothing usable."""
    _counts: dict[tuple[int, str], int] = field(default_factory=dict)

    def allowance(self, messages: Sequence[Message], spent: Spent) -> tuple[int, Allowance]:
        # Tokenizers disagree a little: leave a margin so the provider's own count fits.
        prompt = int(self.client.count_tokens(messages) * PROMPT_MARGIN) + 16
        return prompt, allow_call(self.budget, spent, prompt, self.max_tokens,
                                  self.client.price)

    def halt(self, reason: str, exit_code: int = BOUND_EXIT) -> None:
        if not self.halted:
            self.halted, self.halt_exit = reason, exit_code

    def judge(self, usable: bool, why: str = "") -> None:
        """A node's verdict on an answer: usable ends the failure streak, else extends it."""
        self.streak = 0 if usable else self.streak + 1
        if self.streak >= self.limits.failures:
            self.halt(f"{self.streak} model calls in a row gave no usable answer (last: "
                      f"{why or 'an error'}; --max-failures {self.limits.failures})")

    def _count(self, step: int, node: str) -> tuple[int, int]:
        """Attempts made so far in this generation: (by this node, by all nodes).

        Seeded from the runs store the first time a step is seen, so a resumed run counts
        the attempts made before the crash."""
        if (step, "") not in self._counts:
            rows = self.store.usage(self.run_id) if self.store is not None else []
            self._counts[(step, "")] = sum(r["step"] == step for r in rows)
            for r in rows:
                if r["step"] == step:
                    self._counts[(step, r["node"])] = self._counts.get((step, r["node"]),
                                                                       0) + 1
        return self._counts.get((step, node), 0), self._counts[(step, "")]

    def _limit(self, step: int, node: str) -> str:
        mine, all_ = self._count(step, node)
        if mine >= self.limits.per_node:
            return (f"the {node} made {mine} model calls in generation {step} "
                    f"(--max-calls-per-node {self.limits.per_node})")
        if all_ >= self.limits.per_generation:
            return (f"{all_} model calls in generation {step} "
                    f"(--max-calls-per-generation {self.limits.per_generation})")
        return ""

    def _counted(self, step: int, node: str) -> None:
        self._count(step, node)
        self._counts[(step, node)] = self._counts.get((step, node), 0) + 1
        self._counts[(step, "")] += 1

    def call(self, messages: Sequence[Message], *, node: str, step: int, first_attempt: int,
             spent: Spent) -> CallOutcome:
        """One completion with retries; attempts are numbered from `first_attempt`."""
        records: list[CallRecord] = []
        attempt = first_attempt
        for retry in range(self.retries + 1):
            replay = self._replay(step, node, attempt)
            if replay is not None:
                records.append(replay)
                if replay.ok:
                    return CallOutcome(records, replay)
                attempt += 1
                continue
            if self.halted:
                return CallOutcome(records, None, self.halted)
            over = self._limit(step, node)
            if over:
                self.halt(over)
                return CallOutcome(records, None, over)
            now = spent.plus(sum(r.tokens_in + r.tokens_out for r in records),
                             sum(r.usd for r in records))
            prompt, allow = self.allowance(messages, now)
            if not allow.ok:
                return CallOutcome(records, None, allow.reason, budget_spent=True)
            t0 = time.perf_counter()
            self._counted(step, node)
            try:
                reply = self.client.complete(messages, max_tokens=allow.max_tokens,
                                             timeout=self.timeout_s)
            except ModelError as exc:
                usd = self.client.price(prompt, 0) or 0.0
                rec = CallRecord(attempt, prompt, 0, usd, False, error=str(exc))
                records.append(rec)
                self._record(step, node, rec, time.perf_counter() - t0)
                attempt += 1
                if exc.kind == "auth":
                    http = f"HTTP {exc.status}" if exc.status else "refused"
                    self.halt(f"the model endpoint refused the key ({http}; check the "
                              f"provider's key variable, e.g. OPENAI_API_KEY): "
                              f"{scrub(str(exc))[:200]}", AUTH_EXIT)
                    return CallOutcome(records, None, self.halted)
                if not exc.transient or retry == self.retries:
                    if exc.kind == "unreachable":
                        self.halt(f"the model endpoint is unreachable: {retry + 1} attempts "
                                  f"failed (last: {scrub(str(exc))[:200]})")
                    self.judge(False, scrub(str(exc))[:120])
                    return CallOutcome(records, None, scrub(str(exc)))
                jitter = random.Random(f"{self.run_id}:{step}:{node}:{attempt}").random()
                self.sleep(self.backoff_s * (2 ** retry) * (0.5 + jitter))
                continue
            rec = CallRecord(attempt, reply.tokens_in or prompt, reply.tokens_out,
                             reply.usd, True, reply.text, reply.finish_reason)
            records.append(rec)
            self._record(step, node, rec, time.perf_counter() - t0)
            return CallOutcome(records, rec)
        return CallOutcome(records, None, "retries exhausted")

    def _replay(self, step: int, node: str, attempt: int) -> CallRecord | None:
        if self.store is None:
            return None
        row = self.store.usage_row(self.run_id, step, node, attempt)
        if row is None:
            return None
        return CallRecord(attempt, int(row["tokens_in"]), int(row["tokens_out"]),
                          float(row["usd"]), bool(row["ok"]), row["response"] or "",
                          row["finish_reason"] or "", row["error"] or "", replayed=True)

    def _record(self, step: int, node: str, rec: CallRecord, seconds: float) -> None:
        if self.store is None:
            return
        self.store.add_usage(self.run_id, step=step, node=node, attempt=rec.attempt, hash_="",
                             model=self.client.name, tokens_in=rec.tokens_in,
                             tokens_out=rec.tokens_out, usd=rec.usd, seconds=seconds,
                             ok=rec.ok, error=rec.error, response=rec.text,
                             finish_reason=rec.finish_reason)


def failure_tally(store: Any, run_id: str) -> dict[str, int]:
    """Why model calls failed, counted: the error class of each refused or broken call,
    and the kind of each answer that held no usable kernel (`no-code-block`, ...)."""
    out: dict[str, int] = {}
    for r in store.usage(run_id):
        if not r["ok"]:
            key = (r["error"] or "error").split(":", 1)[0]
            out[key] = out.get(key, 0) + 1
    for f in store.failures(run_id):
        if f["gate"] == "model" and f["code"] not in ("E-MODEL",):
            key = f["code"].removeprefix("E-").lower()
            out[key] = out.get(key, 0) + 1
    return out
