"""`cake plugins new NAME`: a plugin package that installs, passes its tests and
shows a rule and a tactic written against the public API — the starting point of
docs/plugins.md."""

from __future__ import annotations

import re
from pathlib import Path

from cake_core.plugins.api import PLUGIN_API_VERSION


class ScaffoldError(ValueError):
    pass


def _code_prefix(name: str) -> str:
    parts = [p for p in re.split(r"[-_]", name) if p and p != "cake"] or [name]
    prefix = "".join(p[0] for p in parts).upper()[:3]
    if len(prefix) < 2:
        prefix = (parts[0][:2]).upper()
    return prefix + "X" if prefix in ("CK",) else prefix


def scaffold(name: str, directory: Path) -> Path:
    if not re.fullmatch(r"[a-z][a-z0-9-]*[a-z0-9]", name):
        raise ScaffoldError(f"plugin names are lowercase words joined by '-', not {name!r}")
    root = directory / name
    if root.exists():
        raise ScaffoldError(f"{root} already exists")
    pkg = name.replace("-", "_")
    code = f"{_code_prefix(name)}101"
    files = {
        "pyproject.toml": PYPROJECT.format(name=name, pkg=pkg),
        "README.md": README.format(name=name, pkg=pkg, code=code),
        f"{pkg}/__init__.py": INIT.format(name=name, api=PLUGIN_API_VERSION),
        f"{pkg}/rules.py": RULES.format(code=code, name=name),
        f"{pkg}/tactics.py": TACTICS,
        f"docs/{code}.md": DOC.format(code=code),
        "tests/test_plugin.py": TESTS.format(pkg=pkg, code=code, name=name),
    }
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


PYPROJECT = '''[build-system]
requires = ["setuptools>=68"]
build-backend = "setuptools.build_meta"

[project]
name = "{name}"
version = "0.1.0"
description = "A CAKE plugin"
requires-python = ">=3.11"
dependencies = ["cake-kernels"]

[project.entry-points."cake.plugins"]
{name} = "{pkg}:plugin"

[tool.setuptools]
packages = ["{pkg}"]
'''

README = '''# {name}

A CAKE plugin with one verifier rule (`{code}`: a single-stage pipeline cannot overlap
copies with compute) and one tactic (`double-stages`).

```sh
pip install -e .
cake plugins list --verbose     # shows the rule and the tactic with their provenance
python -m pytest tests
```

See `docs/{code}.md` for the rule.
'''

INIT = '''"""The {name} plugin: what it contributes to CAKE."""

from cake_core.plugins import Plugin

from .rules import SINGLE_STAGE
from .tactics import DOUBLE_STAGES

plugin = Plugin(
    name="{name}",
    version="0.1.0",
    api={api},
    rules=(SINGLE_STAGE,),
    tactics=(DOUBLE_STAGES,),
    description="Pipeline depth checks and rewrites",
)
'''

RULES = '''"""A rule: flag pipelines with a single stage."""

from cake_core.diagnostics.codes import Rule
from cake_core.diagnostics.model import Applicability, Fix, Severity, TextEdit
from cake_core.ir.kernel import Program
from cake_core.ir.types import PipelineType
from cake_core.plugins import RuleItem
from cake_core.primitives.registry import Provenance
from cake_core.primitives.traits import Trait
from cake_core.source import SourceFile

CODE = Rule("{code}", "single-stage-pipeline",
            "A one-stage pipeline serialises copies and compute.",
            severity=Severity.WARNING, origin="{name}")


def check(program: Program, source: SourceFile) -> list:
    out = []
    for kernel in program.kernels:
        for op in kernel.ops():
            if Trait.DECLARES_PIPELINE not in op.prim.traits or not op.results:
                continue
            ty = op.results[0].type
            if isinstance(ty, PipelineType) and ty.stages == 1:
                span = op.arg_spans.get("stages", op.span)
                fixes = []
                if source.snippet(span).strip() == "1":
                    fixes.append(Fix("use 2 stages", (TextEdit(span, "2"),),
                                     Applicability.UNSAFE))
                out.append(CODE.at(span, f"pipeline `{{ty.name}}` has one stage: the producer "
                                   "waits for every consumer before it can load again",
                                   fixes=fixes).with_path(source.path))
    return out


SINGLE_STAGE = RuleItem("single-stage-pipeline", (CODE,), check,
                        Provenance("hand-written", "2026-11-30", ("tests/test_plugin.py",)))
'''

TACTICS = '''"""A tactic: double the stage count of a pipeline whose depth is a literal."""

from cake_core.diagnostics.model import TextEdit
from cake_core.plugins import Tactic, TacticResult
from cake_core.primitives.traits import Trait


def _stage_literal(kernel, source):
    for op in kernel.ops():
        if Trait.DECLARES_PIPELINE in op.prim.traits:
            span = op.arg_spans.get("stages")
            if span is not None and source.snippet(span).strip().isdigit():
                return span, int(source.snippet(span))
    return None


def applies(kernel, source):
    hit = _stage_literal(kernel, source)
    return None if hit is None else f"pipeline depth is {{hit[1]}}; deeper rings hide more latency"


def apply(kernel, source, params):
    hit = _stage_literal(kernel, source)
    if hit is None:
        return None
    span, stages = hit
    return TacticResult((TextEdit(span, str(stages * 2)),),
                        f"double the pipeline depth from {{stages}} to {{stages * 2}} stages")


DOUBLE_STAGES = Tactic("double-stages", "Double a literal pipeline stage count.", applies, apply)
'''

DOC = '''# {code}: single-stage-pipeline

## What it does
Flags a `pipeline(stages=1, ...)`.

## Why is this bad?
With one stage the producer must wait for every consumer to release the only buffer
before it loads the next tile, so copies and compute never overlap.

## Example
```python
pipe = pipeline(stages=1, producer="load", consumer="mma")
```

## Use instead
```python
pipe = pipeline(stages=2, producer="load", consumer="mma")
```

## Fix safety
The fix sets two stages. It is unsafe: the buffers indexed by the stage must grow too.
'''

TESTS = '''"""The plugin's rule fires, its fix and tactic give kernels that still verify."""

from cake_core.check import check_text
from cake_core.diagnostics.model import apply_edits
from cake_core.plugins import load_plugins

from {pkg} import plugin

KERNEL = """
M, N, K = dim("M"), dim("N"), dim("K", multiple_of=64)

@kernel(arch="sm_90a", grid=(cdiv(M, 128), cdiv(N, 128)), warps=12)
def gemm(A: Tensor[bf16, (M, K)], B: Tensor[bf16, (N, K)], C: Tensor[bf16, (M, N)]):
    sa = smem(bf16, (STAGES_A, 128, 64), layout=swizzle(128))
    sb = smem(bf16, (STAGES_A, 128, 64), layout=swizzle(128))
    ab = pipeline(stages=STAGES_B, producer="load", consumer="mma")
    with role("load", warps=range(0, 4), regs=40):
        for k in range(cdiv(K, 64)):
            s = ab.acquire()
            tma_load(sa[s], A.tile((128, 64), (block.x, k)), ab)
            tma_load(sb[s], B.tile((128, 64), (block.y, k)), ab)
            ab.commit()
    with role("mma", warps=range(4, 12), regs=232):
        acc = fragment(f32, (128, 128), layout=wgmma_acc)
        for k in range(cdiv(K, 64)):
            s = ab.wait()
            wgmma(acc, sa[s], sb[s].T)
            wgmma_wait(0)
            ab.release()
        store(C.tile((128, 128), (block.x, block.y)), cast(acc, bf16))
"""


def kernel(stages_a: int, stages_b: str) -> str:
    return KERNEL.replace("STAGES_A", str(stages_a)).replace("STAGES_B", stages_b)


def plugins():
    return load_plugins(include_installed=False, extra=[plugin])


def test_rule_fires_once_on_a_single_stage_pipeline() -> None:
    res = check_text(kernel(1, "1"), "k.cake", plugins=plugins())
    assert [d.code for d in res.diagnostics] == ["{code}"]


def test_rule_is_quiet_on_two_stages() -> None:
    assert check_text(kernel(2, "2"), "k.cake", plugins=plugins()).diagnostics == []


def test_tactic_output_still_verifies() -> None:
    text = kernel(2, "1")
    res = check_text(text, "k.cake", plugins=plugins())
    (tactic,) = plugin.tactics
    k = res.program.kernels[0]
    assert tactic.applies(k, res.source) is not None
    out = tactic.apply(k, res.source, {{}})
    new_text = apply_edits(text, out.edits)
    assert "stages=2" in new_text
    assert check_text(new_text, "k.cake", plugins=plugins()).diagnostics == []


def test_entry_point_points_at_this_plugin() -> None:
    from importlib import metadata

    eps = [ep for ep in metadata.entry_points(group="cake.plugins") if ep.name == "{name}"]
    assert eps and eps[0].load() is plugin
'''
