"""The reflector: condenses the generation's failures into a bounded memory.

Failures are grouped by (move class, normalized signature): the same mistake made by
different kernels, with names and numbers abstracted away.  The memory keeps the
`MEMORY_SIZE` groups seen most often (most recent first on ties), each with a count and
one example message.  The planner reads it (a move class that keeps failing is no longer
proposed) and a model is shown it in its prompt.
"""

from __future__ import annotations

from typing import Any

from cake_agents.context import AgentContext
from cake_agents.nodes.common import Node
from cake_agents.state import EvolveState, StateUpdate

MEMORY_SIZE = 12
EXAMPLE_CHARS = 200
MAX_HASHES = 8


def condense(memory: list[dict[str, Any]], failures: list[dict[str, Any]],
             size: int = MEMORY_SIZE) -> list[dict[str, Any]]:
    # copies all the way down: state values are never changed in place
    items = {(m.get("move_class", ""), m["signature"]): {**m, "hashes": list(m.get("hashes",
                                                                                   []))}
             for m in memory}
    for f in failures:
        key = (f.get("move_class", ""), f["signature"])
        item = items.get(key)
        if item is None:
            item = {"signature": f["signature"], "gate": f["gate"], "code": f["code"],
                    "move_class": f.get("move_class", ""), "count": 0,
                    "example": f["message"][:EXAMPLE_CHARS], "last_step": f["step"]}
            items[key] = item
        item["count"] += 1
        item["last_step"] = max(item["last_step"], f["step"])
        hashes = item.setdefault("hashes", [])
        if f.get("hash") and f["hash"] not in hashes:
            hashes.append(f["hash"])
            del hashes[:-MAX_HASHES]
    ranked = sorted(items.values(), key=lambda m: (-m["count"], -m["last_step"],
                                                    m["signature"]))
    return ranked[:size]


def make_reflector(ctx: AgentContext) -> Node:
    def reflector(state: EvolveState) -> StateUpdate:
        ctx.emit("node", name="reflector", step=state.step)
        if not state.pending_failures:
            return {}
        return {"memory": condense(state.memory, state.pending_failures),
                "pending_failures": []}

    return reflector
