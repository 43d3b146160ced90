"""The last node: writes what the run produced.

The best kernel (and, in portfolio mode, each bucket's winner, the dispatcher table and
its C++ header) go to the runs store as artifacts and to the run's directory as files.
"""

from __future__ import annotations

import json
from pathlib import Path

from cake_agents.context import AgentContext
from cake_agents.nodes.common import Node
from cake_agents.portfolio import build_table, dispatcher_cpp
from cake_agents.state import EvolveState, StateUpdate


def run_dir(ctx: AgentContext) -> Path:
    return Path(ctx.config.run_dir) / ctx.run_id


def make_finalizer(ctx: AgentContext) -> Node:
    def finalizer(state: EvolveState) -> StateUpdate:
        ctx.emit("node", name="finalizer", step=state.step)
        out = run_dir(ctx)
        out.mkdir(parents=True, exist_ok=True)
        update: StateUpdate = {"done": True}
        best = state.best.get("hash")
        if best:
            text = ctx.text_of(best) or ""
            ctx.store.set_artifact(ctx.run_id, "best.cake", text)
            (out / "best.cake").write_text(text, encoding="utf-8")
        if ctx.mode == "portfolio" and state.winners:
            texts = {h: ctx.text_of(h) or "" for h in state.winners.values()}
            scores = {b: state.population[h].get("bucket_scores", {}).get(b)
                      for b, h in state.winners.items()}
            dims = list(ctx.info.shapes[0].dims) if ctx.info.shapes else []
            table = build_table(task=ctx.info.name, kernel=ctx.info.kernel, dims=dims,
                                buckets=ctx.info.buckets, winners=state.winners,
                                texts=texts, scores=scores, fixed=ctx.info.task.fixed)
            cpp = dispatcher_cpp(table)
            ctx.store.set_artifact(ctx.run_id, "dispatch.json", json.dumps(table, indent=2))
            ctx.store.set_artifact(ctx.run_id, "dispatch.hpp", cpp)
            (out / "dispatch.json").write_text(json.dumps(table, indent=2) + "\n",
                                               encoding="utf-8")
            (out / "dispatch.hpp").write_text(cpp, encoding="utf-8")
            for row in table["buckets"]:
                (out / f"{row['symbol']}.cake").write_text(texts[row["kernel"]],
                                                           encoding="utf-8")
            update["dispatcher"] = table
        return update

    return finalizer
