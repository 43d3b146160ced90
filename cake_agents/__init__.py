"""CAKE's kernel-evolving agents: `cake evolve TASK`.

A LangGraph graph of cooperating agents (planner, coder, checker, repairer, evaluator,
archivist, reflector) evolves a .cake kernel for a task under a budget.  The checker reads
diagnostics from `cake lsp` exactly as an editor does; models come through litellm, and
without one an offline tactic search guided by the cost model drives the same graph.

Nothing here is imported by `cake_core`: the `cake evolve` and `cake runs` commands import
this package only when they run, so the CLI starts without LangGraph or litellm.
"""

from __future__ import annotations

__all__ = ["EvolveConfig", "evolve"]


def __getattr__(name: str) -> object:
    # The entry points pull in LangGraph; keep `import cake_agents` itself cheap.
    if name == "evolve":
        from cake_agents.run import evolve

        return evolve
    if name == "EvolveConfig":
        from cake_agents.config import EvolveConfig

        return EvolveConfig
    raise AttributeError(name)
