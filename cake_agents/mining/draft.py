"""A model drafts the body of a promoted rule or tactic; the tests decide whether it stays.

The model gets the failure (signature, messages, the failing lines with context, the
clean twins' lines), the IR shapes the skeleton matches, and the skeleton itself, and
answers with the whole module in a ```python block.  The draft replaces the skeleton
only if:

- it parses and defines what the plugin imports (`RULE`, or `TACTIC`), and
- the item's regression tests pass with it: it fires on every failing kernel and stays
  quiet on the clean twins and on every kernel in `examples/` (CAKE_EXAMPLES_DIR).

Otherwise the skeleton is put back, and the model is asked once more with the test
output.  The draft is Python written by a model: it is only ever run as the plugin's own
test suite, in a subprocess, when a person asked for a model with `--model`; it is never
imported into this process.  Calls go through the agents' model layer (`ModelCaller`:
budget, retries, timeout), so a test injects a scripted model exactly as the agent
tests do.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from cake_agents.mining.package import PluginPackage
    from cake_agents.mining.promote import Evidence
    from cake_agents.mining.templates import ItemSpec

ATTEMPTS = 2
MAX_TOKENS = 4096
_FENCE = re.compile(r"```(?:python|py)?[ \t]*\n(.*?)```", re.S)
REQUIRED = {"rule": ("RULE", "check", "CODE"), "tactic": ("TACTIC", "applies", "apply")}

SYSTEM = """You write verifier rules and tactics for CAKE, a typed GPU-kernel IR whose \
compiler is Python.  A rule reads the typed IR (`program.kernels`, `kernel.ops()`, each \
`Op` with `op.name`, `op.args` (typed `Value`s by parameter name: `.type`, `.sym` for \
integers, `.const`), `op.span`, `op.arg_spans`, and `kernel.walk()` for loops (`ForOp` \
with `var`, `start`, `stop`) and roles) and returns diagnostics made with `CODE.at(span, \
message)`.  Never execute or import kernel text.  Answer with the complete module in one \
```python block."""


@dataclass
class DraftOutcome:
    kept: bool
    problems: list[str] = field(default_factory=list)
    output: str = ""


def extract_module(reply: str) -> str | None:
    blocks = _FENCE.findall(reply or "")
    return blocks[-1].strip() + "\n" if blocks else None


def defines(text: str, names: tuple[str, ...]) -> list[str]:
    """The names of `names` the module text does not define at top level (parsed only)."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return list(names)
    found: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.ClassDef):
            found.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            found.update(t.id for t in targets if isinstance(t, ast.Name))
    return [n for n in names if n not in found]


def prompt(spec: ItemSpec, skeleton: str, evidence: Evidence, feedback: str = ""
           ) -> list[dict[str, str]]:
    fails = []
    for k in evidence.failing[:4]:
        lines = k.text.splitlines()
        if k.line is None:
            continue
        lo, hi = max(0, k.line - 6), min(len(lines), k.line + 3)
        ctx = "\n".join(f"{'>' if i == k.line else ' '} {lines[i]}" for i in range(lo, hi))
        first = (k.message.splitlines() or [""])[0]
        fails.append(f"Failure message: {first}\n```python\n{ctx}\n```")
    what = "rule" if spec.kind == "rule" else "tactic"
    user = (
        f"A mistake keeps recurring in generated kernels: signature `{spec.signature}`, "
        f"{spec.count} failures, caught at the {spec.stage} stage with {spec.failure_code} "
        f"({spec.failure_name}: {spec.failure_summary}).  The static verifier misses it.\n\n"
        f"Write the {what} that catches it statically.  It must report "
        f"{spec.code or 'the construct'} on every failing kernel below and nothing on "
        "correct kernels (the clean version of each, and the project's examples).\n\n"
        + "\n\n".join(fails)
        + (f"\n\nThe clean kernel had instead:\n```python\n{spec.good}\n```" if spec.good
           else "")
        + "\n\nIR shapes of the failing op (the skeleton matches these exactly):\n"
        + "\n".join(f"- {p}" for p in spec.patterns)
        + f"\n\nThe skeleton (keep its imports, CODE, names and provenance; improve the "
          f"matching):\n```python\n{skeleton}```"
        + (f"\n\nYour previous module failed its tests:\n```\n{feedback[-2500:]}\n```"
           if feedback else ""))
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}]


def draft_item(model: Any, spec: ItemSpec, skeleton: str, evidence: Evidence,
               pkg: PluginPackage, examples_dir: Path | None,
               attempts: int = ATTEMPTS) -> DraftOutcome:
    from cake_agents.budget import Budget, Spent
    from cake_agents.mining.promote import run_item_tests
    from cake_agents.models import ModelCaller

    caller = ModelCaller(model, Budget(), max_tokens=MAX_TOKENS, retries=2, backoff_s=1.0)
    path = pkg.module_path(spec.module)
    problems: list[str] = []
    feedback = ""
    for attempt in range(attempts):
        outcome = caller.call(prompt(spec, skeleton, evidence, feedback), node="promote",
                              step=0, first_attempt=attempt * 10, spent=Spent())
        if outcome.reply is None:
            problems.append(f"the model gave no draft: {outcome.stopped}")
            break
        text = extract_module(outcome.reply.text)
        if text is None:
            feedback = "the answer had no ```python block"
            problems.append(f"draft {attempt + 1}: no ```python block")
            continue
        missing = defines(text, REQUIRED[spec.kind])
        if missing:
            feedback = f"the module must define {', '.join(missing)}"
            problems.append(f"draft {attempt + 1}: does not define {', '.join(missing)}")
            continue
        path.write_text(text, encoding="utf-8")
        ok, out = run_item_tests(pkg, spec.module, examples_dir)
        if ok:
            return DraftOutcome(True, [], out)
        path.write_text(skeleton, encoding="utf-8")
        feedback = out
        problems.append(f"draft {attempt + 1} failed its tests; the skeleton was kept")
    # the skeleton stands: the drafts' troubles are notes, not problems of the item
    return DraftOutcome(False, [f"model draft rejected ({p})" for p in problems[-1:]], "")
