"""The pages of the simulator's codes (CK5xx) are true: simulating a page's Example finds
its code, simulating its Use instead finds no CK5xx problem.

These pages start with `<!-- dynamic: found by the simulator -->`, which tells
tests/test_rule_docs.py to skip its static check of the examples; this file is that
check for them.  A page may name a task (`<!-- sim-task: NAME -->`): its examples then run
against the task's shapes and reference, as `cake run --sim` does; otherwise they run on
default dims with random inputs.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from cake_core.diagnostics import codes
from cake_core.diagnostics.codes import Rule
from cake_core.sim import SimKernel, run_schedules
from cake_core.sim.inputs import default_dims, random_inputs
from cake_core.sim.tasks_run import run_task
from cake_core.tasks import load_task

RULES_DIR = Path(__file__).resolve().parents[2] / "docs" / "rules"
DYNAMIC = [r for r in codes.all_rules() if r.code.startswith("CK5")]
_FENCE = re.compile(r"^```python\n(.*?)^```", re.M | re.S)


def _section(text: str, name: str) -> str:
    m = re.search(rf"^## {re.escape(name)}\n(.*?)(?=^## |\Z)", text, re.M | re.S)
    assert m is not None, f"no section {name}"
    block = _FENCE.search(m.group(1))
    assert block is not None, f"section {name} has no python block"
    return block.group(1)


def _findings(text: str, path: str, task: str | None) -> set[str]:
    sk = SimKernel.from_text(text, path)
    if task is not None:
        report = run_task(load_task(task), sk, n_schedules=2)
        return {d.code for d in report.diagnostics}
    dims = default_dims(sk, 256)  # K = 256 wraps the examples' 2-stage rings
    inputs = random_inputs(sk, dims, skip=("C", "out"))
    return {d.code for r in run_schedules(sk, dims, inputs, n=2) for d in r.diagnostics}


@pytest.mark.parametrize("rule", DYNAMIC, ids=[r.code for r in DYNAMIC])
def test_dynamic_page_examples(rule: Rule) -> None:
    page = (RULES_DIR / f"{rule.code}.md").read_text(encoding="utf-8")
    assert page.startswith("<!-- dynamic: found by the simulator -->\n")
    m = re.search(r"<!-- sim-task: (\w+) -->", page)
    task = m.group(1) if m else None
    found = _findings(_section(page, "Example"), f"{rule.code}-example.cake", task)
    assert rule.code in found, f"the Example gives {sorted(found)}"
    clean = _findings(_section(page, "Use instead"), f"{rule.code}-use-instead.cake", task)
    assert not {c for c in clean if c.startswith("CK5")}, f"Use instead gives {sorted(clean)}"
