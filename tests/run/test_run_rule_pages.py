"""The pages of the GPU runner's codes (CK7xx) are true as far as a CPU can tell.

Their findings need a GPU, so tests/test_rule_docs.py cannot check their examples
statically; these pages start with `<!-- dynamic: found on the GPU -->`.  Here: every
example is a kernel that checks without errors and every Use instead checks clean.  Pages
that name a task and dims (`<!-- gpu-task: NAME -->`, `<!-- gpu-dims: ... -->`) are also
run through the runner's protocol on FakeDevice with the CPU simulator as the kernel: the
Example must produce the page's code and the Use instead must pass.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from cake_core.check import check_text
from cake_core.diagnostics import codes
from cake_core.diagnostics.codes import Rule
from cake_core.run.fake import FakeDevice, SimulatorKernel
from cake_core.run.protocol import TimingConfig, run_shape
from cake_core.sim.program import SimKernel
from cake_core.tasks import load_task

RULES_DIR = Path(__file__).resolve().parents[2] / "docs" / "rules"
MARKER = "<!-- dynamic: found on the GPU -->"
GPU_RULES = [r for r in codes.all_rules() if r.code.startswith("CK7")]
_FENCE = re.compile(r"^```python\n(.*?)^```", re.M | re.S)


def _section(text: str, name: str) -> str:
    m = re.search(rf"^## {re.escape(name)}\n(.*?)(?=^## |\Z)", text, re.M | re.S)
    assert m is not None, f"no section {name}"
    block = _FENCE.search(m.group(1))
    assert block is not None, f"section {name} has no python block"
    return block.group(1)


def test_the_gpu_codes_are_registered() -> None:
    assert [r.code for r in GPU_RULES] == [f"CK70{i}" for i in range(1, 8)]
    assert codes.GPU_SUSPICIOUS_TIMING.severity.value == "warning"


@pytest.mark.parametrize("rule", GPU_RULES, ids=[r.code for r in GPU_RULES])
def test_gpu_page_examples_check(rule: Rule) -> None:
    page = (RULES_DIR / f"{rule.code}.md").read_text(encoding="utf-8")
    assert page.startswith(MARKER + "\n")
    bad = check_text(_section(page, "Example"), f"{rule.code}-example.cake")
    assert bad.program is not None and not bad.errors, [d.message for d in bad.diagnostics]
    good = check_text(_section(page, "Use instead"), f"{rule.code}-use-instead.cake")
    assert good.diagnostics == [], [d.message for d in good.diagnostics]


SIMULATED = [r for r in GPU_RULES
             if "<!-- gpu-task:" in (RULES_DIR / f"{r.code}.md").read_text(encoding="utf-8")]


@pytest.mark.parametrize("rule", SIMULATED, ids=[r.code for r in SIMULATED])
def test_gpu_page_examples_through_the_protocol(rule: Rule) -> None:
    page = (RULES_DIR / f"{rule.code}.md").read_text(encoding="utf-8")
    task_m = re.search(r"<!-- gpu-task: (\w+) -->", page)
    dims_m = re.search(r"<!-- gpu-dims: ([\w=,]+) -->", page)
    assert task_m and dims_m
    task = load_task(task_m.group(1))
    dims = {k: int(v) for k, v in (p.split("=") for p in dims_m.group(1).split(","))}

    def run(section: str) -> set[str]:
        sk = SimKernel.from_text(_section(page, section), f"{rule.code}-{section}.cake")
        res = run_shape(FakeDevice(), SimulatorKernel(sk), task, dims, seeds=(0,),
                        timing=TimingConfig(enabled=False))
        assert res.status in ("ok", "wrong"), res.error
        return {f.code for f in res.findings}

    assert rule.code in run("Example")
    assert run("Use instead") == set()
