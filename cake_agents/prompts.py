"""The messages a model sees: the coder's request and the repairer's.

A model is asked for one thing only: a complete .cake kernel in a ```python block.  It
gets the task, the parent kernel, the cost model's view of it (bottleneck, the lines that
cost most), a strategy hint from the planner (the best-predicted tactic moves), and what
failed before (the reflector's memory), and what an editor shows for the parent
(`editor_view.py`: the language server's diagnostics with their quick fixes, the hover
text of the primitives it calls, the tactics offered as code actions).  The repairer sends
the kernel with the language server's diagnostics and their fixes, and the hover text of
the primitives on the failing lines, rendered as a person sees them.

The model is asked to state its intent in a sentence before the code block: the run
keeps it with the candidate (`extract.intent_of`), so a reader of `cake runs show` or of
the report sees what each model candidate was meant to change.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from cake_agents.editor_view import diagnostics_text

SYSTEM = """\
You write GPU kernels in CAKE IR: a typed, hardware-explicit kernel language written in a \
strict subset of Python syntax. A .cake file is never executed; it is parsed, type-checked, \
verified (resources, layouts, synchronization), simulated on the CPU against a numpy \
reference, priced by a cost model and lowered to CUDA.

Rules for your answer:
- Begin with one or two sentences stating your intent: what you change and why.
- Then give ONE complete .cake file in a single ```python code block, nothing after it.
- Keep the kernel's name, its parameters (names, dtypes, shapes) and its dims: the task's \
harness calls it with exactly those.
- Every hardware decision is explicit: warp roles, smem buffers and layouts, pipelines and \
barriers, register budgets. Stay within the target's shared-memory and register limits.
- Prefer small, verifiable changes to the parent kernel over rewrites."""


def memory_text(memory: Sequence[dict[str, Any]]) -> str:
    if not memory:
        return ""
    rows = [f"- {m['count']}x at {m['gate']} [{m['code']}]"
            + (f" after `{m['move_class']}`" if m.get("move_class") else "")
            + f": {m.get('example', '')}" for m in memory]
    return "What failed earlier in this run (avoid repeating it):\n" + "\n".join(rows)


def coder_messages(*, task_name: str, description: str, shapes: Sequence[str],
                   parent_text: str, bottleneck: str, hot_lines: Sequence[dict[str, Any]],
                   hints: Sequence[dict[str, Any]], memory: Sequence[dict[str, Any]],
                   retry_note: str = "", editor: str = "") -> list[dict[str, str]]:
    """`editor`: what the language server shows for the parent (`editor_view.render`)."""
    parts = [f"Task `{task_name}`: {description}",
             "Target shapes (weighted): " + "; ".join(shapes),
             "Parent kernel:\n```python\n" + parent_text.rstrip() + "\n```"]
    if editor:
        parts.append("What the editor shows for the parent kernel.\n\n" + editor)
    if bottleneck:
        parts.append(f"The cost model says the parent is {bottleneck}-bound.")
    if hot_lines:
        parts.append("Most expensive lines: " + ", ".join(
            f"line {h['line']} ({h['share']:.0%}, {h['category']})" for h in hot_lines))
    if hints:
        parts.append("Moves the cost model predicts to help (speedup over the seed):\n"
                     + "\n".join(f"- {h['rationale']} (predicted {h['predicted']:.3f}x)"
                                 for h in hints))
    mem = memory_text(memory)
    if mem:
        parts.append(mem)
    parts.append("Write an improved version of the parent kernel.")
    if retry_note:
        parts.append(retry_note)
    return [{"role": "system", "content": SYSTEM}, {"role": "user",
                                                    "content": "\n\n".join(parts)}]


def repair_messages(*, text: str, diagnostics: Sequence[dict[str, Any]],
                    memory: Sequence[dict[str, Any]], retry_note: str = "",
                    hovers: dict[str, str] | None = None) -> list[dict[str, str]]:
    """`diagnostics` may carry `fixes` (quick-fix titles the server offers: none of them
    safe, or the repairer would have applied it); `hovers`: called name -> hover text."""
    parts = ["This CAKE kernel does not pass the checker:\n```python\n" + text.rstrip()
             + "\n```",
             "Diagnostics from the CAKE language server:\n"
             + diagnostics_text(diagnostics, text)]
    if hovers:
        parts.append("The primitives on those lines (the editor's hover text):\n"
                     + "\n".join(f"- {h}" for h in hovers.values()))
    parts.append("Fix every error and answer with the complete corrected file.")
    mem = memory_text(memory)
    if mem:
        parts.append(mem)
    if retry_note:
        parts.append(retry_note)
    return [{"role": "system", "content": SYSTEM}, {"role": "user",
                                                    "content": "\n\n".join(parts)}]


RETRY_NOTES = {
    "no-code-block": "Your previous answer had no ```python code block. Answer with the "
                     "complete kernel in one ```python block.",
    "truncated": "Your previous answer was cut off. Answer with the complete kernel in one "
                 "```python block and keep any prose short.",
    "empty": "Your previous answer was empty. Answer with the complete kernel in one "
             "```python block.",
    "no-kernel": "Your previous code block had no @kernel function. Answer with the complete "
                 "kernel file.",
}
