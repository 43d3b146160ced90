"""Live progress: a rich panel on a terminal, one line per evaluation elsewhere.

The panel shows the budget used (evaluations, tokens, dollars), candidates written and
evaluated, the best predicted speedup, and what is running now (node, and the gate the
evaluation workers are in).  Off a terminal each evaluation prints one plain line (tests
and CI logs read those); `--quiet` prints nothing until the final summary.
"""

from __future__ import annotations

import sys
import time
from typing import Any, Protocol, TextIO

from cake_agents.observe import headline


class ProgressSink(Protocol):
    def event(self, kind: str, **data: Any) -> None: ...

    def state(self, values: dict[str, Any]) -> None: ...

    def close(self) -> None: ...


class NullProgress:
    def event(self, kind: str, **data: Any) -> None:
        pass

    def state(self, values: dict[str, Any]) -> None:
        pass

    def close(self) -> None:
        pass


def _speedup(x: float | None) -> str:
    return "-" if x is None else f"{x:.3f}x"


class LineProgress:
    """One line per evaluation and per new best; warnings as they come."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = stream or sys.stdout

    def event(self, kind: str, **data: Any) -> None:
        if kind == "evaluated":
            e = data["entry"]
            status = "pass" if e["status"] == "pass" else f"fail@{e.get('failed_gate')}"
            what, more = headline(e)
            print(f"[eval {data['seq']}/{data.get('budget', '?')}] {e['hash'][:10]} "
                  f"{status:<12} {_speedup(e.get('score')):>8}  {what}",
                  file=self.stream, flush=True)
            for line in more:
                print(f"      {line}", file=self.stream, flush=True)
        elif kind == "best":
            print(f"  best so far: {_speedup(data['best'].get('score'))}",
                  file=self.stream, flush=True)
        elif kind == "warning":
            print(f"  warning: {data['message']}", file=self.stream, flush=True)

    def state(self, values: dict[str, Any]) -> None:
        pass

    def close(self) -> None:
        pass


class RichProgress:
    """A live panel (rich) refreshed on every event."""

    def __init__(self, *, run_id: str, task: str, mode: str, budget: dict[str, Any],
                 model: str | None) -> None:
        from rich.console import Console
        from rich.live import Live

        self.console = Console(stderr=False)
        self.run_id, self.task, self.mode, self.model = run_id, task, mode, model
        self.budget = budget
        self.node = "starting"
        self.gate = ""
        self.best: float | None = None
        self.evals = 0
        self.proposed = 0
        self.tokens = 0
        self.usd = 0.0
        self.failures = 0
        self.last: list[str] = []
        self.t0 = time.monotonic()
        self.live = Live(self._render(), console=self.console, refresh_per_second=4,
                         transient=False)
        self.live.start()

    def _render(self) -> Any:
        from rich.panel import Panel
        from rich.table import Table

        t = Table.grid(padding=(0, 2))
        t.add_column(style="bold")
        t.add_column()
        ev_budget = self.budget.get("evals")
        t.add_row("evaluations", f"{self.evals}" + (f" / {ev_budget}" if ev_budget else ""))
        if self.model:
            tok = self.budget.get("tokens")
            usd = self.budget.get("usd")
            t.add_row("tokens", f"{self.tokens}" + (f" / {tok}" if tok else ""))
            t.add_row("cost", f"${self.usd:.4f}" + (f" / ${usd:.2f}" if usd else ""))
        t.add_row("candidates", f"{self.proposed} written, {self.failures} failed")
        t.add_row("best speedup", _speedup(self.best) + "  (predicted)")
        t.add_row("now", self.node + (f" / gate {self.gate}" if self.gate else ""))
        t.add_row("elapsed", f"{time.monotonic() - self.t0:.0f} s")
        for line in self.last[-8:]:
            t.add_row("", line)
        title = f"cake evolve {self.task} ({self.mode}, {self.model or 'offline policy'})"
        return Panel(t, title=title, subtitle=self.run_id)

    def event(self, kind: str, **data: Any) -> None:
        if kind == "node":
            self.node = f"{data['name']} (generation {data.get('step', '?')})"
            if data["name"] != "evaluator":
                self.gate = ""
        elif kind == "gate":
            self.gate = data["gate"]
        elif kind == "evaluated":
            e = data["entry"]
            self.evals = data["seq"]
            if e["status"] != "pass":
                self.failures += 1
            what, more = headline(e, 60)
            self.last.append(f"{e['hash'][:8]} {e['status']:<4} {_speedup(e.get('score'))} "
                             f"{what}")
            self.last.extend(f"  {line}" for line in more)
        elif kind == "best":
            self.best = data["best"].get("score")
        elif kind == "warning":
            self.last.append(f"warning: {data['message'][:80]}")
        self.live.update(self._render())

    def state(self, values: dict[str, Any]) -> None:
        usage = values.get("usage", {}).get("total", {})
        self.tokens = int(usage.get("tokens_in", 0) + usage.get("tokens_out", 0))
        self.usd = float(usage.get("usd", 0.0))
        self.proposed = int(values.get("proposed", 0))
        self.evals = int(values.get("evals", self.evals))
        best = values.get("best", {}).get("score")
        if best is not None:
            self.best = best
        self.live.update(self._render())

    def close(self) -> None:
        self.live.update(self._render())
        self.live.stop()
