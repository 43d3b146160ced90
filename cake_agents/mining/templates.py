"""The text of promoted items: precise skeletons, their docs pages and regression tests.

Every value goes into the generated source through `repr`, so what a failure's message
or construct contains can only ever become a string literal.
"""

from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass, field

from cake_agents.mining.package import ItemEntry


@dataclass
class ItemSpec:
    """What a template needs to know about the item and the failure behind it."""

    kind: str
    name: str
    module: str
    plugin: str
    code: str
    digest: str
    signature: str
    stage: str
    failure_code: str
    failure_name: str
    failure_summary: str
    count: int
    runs: int
    first_seen: str
    last_seen: str
    date: str
    examples: list[str]
    patterns: list[str] = field(default_factory=list)
    primitive: str = ""
    severity: str = "ERROR"
    message: str = ""
    notes: list[str] = field(default_factory=list)
    bad: str = ""
    good: str = ""
    params: list[str] = field(default_factory=list)
    keywords: list[str] = field(default_factory=list)
    arch: str = ""
    coefficients: dict[str, float] = field(default_factory=dict)

    @property
    def trigger(self) -> str:
        runs = f"{self.runs} run{'s' if self.runs != 1 else ''}"
        text = (f"Promoted by `cake promote` from a recurring failure (SIGNATURE below, digest "
                f"{self.digest}): {self.count} failures in {runs}, first seen "
                f"{self.first_seen}, last seen {self.last_seen}.  The {self.stage} stage "
                f"caught it with {self.failure_code} ({self.failure_name}).")
        return textwrap.fill(text, 88)


def _lit(text: str, indent: int = 0, width: int = 96) -> str:
    """`text` as a Python string literal, split over lines when it is long."""
    if len(repr(text)) + indent <= width:
        return repr(text)
    pad = " " * (indent + 4)
    chunks: list[str] = []
    cur = ""
    for word in re.split(r"(?<= )", text):
        if cur and len(repr(cur + word)) + len(pad) > width:
            chunks.append(cur)
            cur = ""
        cur += word
    chunks.append(cur)
    return "(\n" + "".join(f"{pad}{c!r}\n" for c in chunks) + " " * indent + ")"


def _origin(s: ItemSpec) -> str:
    """The constants every item module starts with: where it came from."""
    return (f"#: The failure this item was promoted from (see `cake promote --ledger`).\n"
            f"SIGNATURE = {_lit(s.signature)}\n"
            f"DIGEST = {s.digest!r}\n"
            f"#: The failing kernels, kept as regression tests.\n"
            f"EXAMPLES: tuple[str, ...] = {_tuple(s.examples)}\n")


def _provenance(s: ItemSpec) -> str:
    return f"Provenance(SIGNATURE, {s.date!r}, EXAMPLES)"


def _tuple(values: list[str]) -> str:
    if not values:
        return "()"
    return "(\n" + "".join(f"    {_lit(v, 4)},\n" for v in values) + ")"


def _docstring(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"""', '\\"\\"\\"')


# --- rule -------------------------------------------------------------------------------------
def _title(s: ItemSpec, what: str) -> str:
    return _docstring(textwrap.fill(f"{s.name}: {what}", 88))


def rule_module(s: ItemSpec) -> str:
    summary = f"A `{s.primitive}` of the shape that failed at {s.stage} with {s.failure_code}."
    return f'''"""{_title(s, s.failure_summary)}

{_docstring(s.trigger)}

How the rule matches: every op whose IR shape (`cake_agents.mining.pattern`) is one of
PATTERNS, the shapes of the ops the failing kernels had where the failure pointed.  To
narrow the rule, edit `refine`; to widen it, add shapes to PATTERNS.  The regression
tests are in tests/test_promoted.py, the kernels in tests/examples/.
"""

from __future__ import annotations

from cake_agents.mining.pattern import find_matches
from cake_core.diagnostics.codes import Rule
from cake_core.diagnostics.model import Diagnostic, Severity
from cake_core.ir.kernel import Kernel, Op, Program
from cake_core.plugins import RuleItem
from cake_core.primitives.registry import Provenance
from cake_core.source import SourceFile

{_origin(s)}
CODE = Rule({s.code!r}, {s.name!r},
            {_lit(summary, 12)},
            severity=Severity.{s.severity}, origin={s.plugin!r})

#: IR shapes of the construct that failed, one per distinct failing form.
PATTERNS: tuple[str, ...] = {_tuple(s.patterns)}

MESSAGE = {_lit(s.message)}
NOTES = {_tuple(s.notes)}


def refine(kernel: Kernel, op: Op, source: SourceFile) -> str | None:
    """The message for an op that matched PATTERNS, or None to let it pass.

    Edit here to narrow the rule when the shape alone also matches correct kernels:
    `op.args` holds the typed arguments by parameter name, `op.arg_spans` where each
    is written, `kernel.walk()` the loops and roles around it.
    """
    return MESSAGE


def check(program: Program, source: SourceFile) -> list[Diagnostic]:
    out: list[Diagnostic] = []
    for kernel in program.kernels:
        for op in find_matches(kernel, PATTERNS):
            message = refine(kernel, op, source)
            if message is not None:
                out.append(CODE.at(op.span, message, notes=NOTES).with_path(source.path))
    return out


RULE = RuleItem({s.name!r}, (CODE,), check,
                {_provenance(s)})
'''


def rule_doc(s: ItemSpec) -> str:
    good = f"```python\n{s.good}\n```" if s.good else \
        "The clean kernel this one was derived from is in tests/examples/ (clean_*.cake)."
    what = textwrap.fill(f"Flags a `{s.primitive}` whose shape is one that failed at the "
                         f"{s.stage} stage with {s.failure_code} ({s.failure_name}): "
                         f"{s.failure_summary}", 88)
    return f"""# {s.code}: {s.name}

## What it does
{what}

## Why is this bad?
{s.trigger}

    {s.signature}

The static verifier now reports it before any simulation or compilation is spent.

## Example
```python
{s.bad}
```

## Use instead
{good}

## Fix safety
No fix is offered: the rule was promoted from failures, and the right rewrite depends on
what the kernel meant.
"""


# --- tactic -----------------------------------------------------------------------------------
def tactic_module(s: ItemSpec) -> str:
    hint = ""
    if s.good:
        hint = "\n\nA kernel that did not fail had instead:\n\n" + \
            "\n".join("    " + ln.strip() for ln in s.good.splitlines()) + "\n"
    summary = f"Rewrite the construct behind {s.failure_code} failures."
    title = _title(s, "a rewrite for the construct behind a recurring failure.")
    return f'''"""{title}

{_docstring(s.trigger)}{_docstring(hint)}
`applies` finds the construct (ops whose IR shape is one of PATTERNS); `apply` is where
the rewrite goes: return `TacticResult(edits, rationale)`, or None to decline.
"""

from __future__ import annotations

from typing import Any

from cake_agents.mining.pattern import find_matches
from cake_core.ir.kernel import Kernel
from cake_core.plugins import Tactic, TacticResult
from cake_core.primitives.registry import Provenance
from cake_core.source import SourceFile

{_origin(s)}
PATTERNS: tuple[str, ...] = {_tuple(s.patterns)}
WHY = {_lit(s.message)}


def applies(kernel: Kernel, source: SourceFile) -> str | None:
    hits = list(find_matches(kernel, PATTERNS))
    if not hits:
        return None
    return f"line {{hits[0].span.start.line + 1}}: {{WHY}}"


def apply(kernel: Kernel, source: SourceFile, params: dict[str, Any]) -> TacticResult | None:
    """The rewrite: text edits at the matched ops (`op.span`, `op.arg_spans`).  Edit here."""
    return None


TACTIC = Tactic({s.name!r}, {_lit(summary, 16)},
                applies, apply, provenance={_provenance(s)})
'''


# --- primitive --------------------------------------------------------------------------------
def primitive_module(s: ItemSpec) -> str:
    params = [f"param({p!r}, doc='positional argument {i}')" for i, p in enumerate(s.params)]
    params += [f"param({k!r}, default=None, doc='keyword argument')" for k in s.keywords]
    plist = "(" + "".join(f"\n        {p}," for p in params) + ("\n    )" if params else ")")
    doc = f"`{s.primitive}` (promoted from failures; document what it does)."
    title = _title(s, "a primitive the failing kernels called but CAKE did not have.")
    return f'''"""{title}

{_docstring(s.trigger)}

The skeleton accepts the arguments the failing calls passed, any type, and returns no
value; write its type rule, effects and facets (cost, simulate, lower) before relying
on it (docs/plugins.md, section 5).
"""

from __future__ import annotations

from cake_core.primitives.typecheck import CallContext
from cake_core.ir.types import NoneType, Type
from cake_core.primitives.facets import Facets, Unsupported
from cake_core.primitives.registry import EffectSpec, Primitive, Provenance, param

{_origin(s)}
DOC = {_lit(doc)}
#: Until its facets are written, the analyses refuse (simulate, lower) or count as free
#: (cost) every use, and say so.
NOT_YET = Unsupported("promoted from failures; its facets are not written yet")


def type_rule(ctx: CallContext) -> Type:
    """The result type from the argument types (`ctx.type(name)`); report problems with
    `ctx.error(rule, message, param)`.  Edit here."""
    return NoneType()


PRIMITIVE = Primitive(
    {s.primitive!r},
    "math",
    {plist},
    type_rule,
    DOC,
    effects=EffectSpec(),
    facets=Facets(cost=NOT_YET, simulate=NOT_YET, lower=NOT_YET),
    provenance={_provenance(s)},
    plugin={s.plugin!r},
)
'''


# --- calibration ------------------------------------------------------------------------------
def calibration_module(s: ItemSpec) -> str:
    coeffs = "".join(f"\n    {k!r}: {v!r}," for k, v in sorted(s.coefficients.items()))
    title = _title(s, f"cost-model coefficients for {s.arch}, after a recurring failure.")
    return f'''"""{title}

{_docstring(s.trigger)}

The coefficients start at the cost model's defaults for {s.arch}; refit them with
`cake calibrate RESULTS.json` on measured runs and paste the values here.
"""

from __future__ import annotations

from cake_core.plugins import CalibrationItem
from cake_core.primitives.registry import Provenance

{_origin(s)}
COEFFICIENTS: dict[str, float] = {{{coeffs}
}}

CALIBRATION = CalibrationItem({s.name!r}, {s.arch!r}, COEFFICIENTS,
                              {_provenance(s)})
'''


# --- tests ------------------------------------------------------------------------------------
def item_tests(i: ItemEntry, pkg: str) -> str:
    fn = i.module
    if i.kind == "rule":
        return f'''

def test_{fn}_fires_on_its_failing_kernels() -> None:
    for path in _failing({i.module!r}):
        assert {i.code!r} in _codes(path), path.name


def test_{fn}_is_quiet_on_clean_kernels() -> None:
    for path in _clean({i.module!r}):
        assert {i.code!r} not in _codes(path), path.name
'''
    if i.kind == "tactic":
        return f'''

def test_{fn}_applies_to_its_failing_kernels() -> None:
    from {pkg}.promoted.{i.module} import PATTERNS, TACTIC

    if not PATTERNS:
        pytest.skip("the failures named no construct to match: write applies() by hand")
    for path in _failing({i.module!r}):
        res = check_text(path.read_text(encoding="utf-8"), path.name, plugins=_plugins())
        assert res.program is not None, path.name
        assert any(TACTIC.applies(k, res.source) for k in res.program.kernels), path.name
'''
    if i.kind == "primitive":
        return f'''

def test_{fn}_is_known_to_its_failing_kernels() -> None:
    from {pkg}.promoted.{i.module} import PRIMITIVE

    for path in _failing({i.module!r}):
        res = check_text(path.read_text(encoding="utf-8"), path.name, plugins=_plugins())
        unknown = [d for d in res.diagnostics
                   if d.code == "CK102" and f"`{{PRIMITIVE.name}}`" in d.message]
        assert not unknown, path.name
'''
    return f'''

def test_{fn}_names_only_known_coefficients() -> None:
    from cake_core.cost.calibration import default_coefficients
    from cake_core.hardware import default_gpu
    from {pkg}.promoted.{i.module} import CALIBRATION

    known = set(default_coefficients(default_gpu(CALIBRATION.arch)).as_mapping())
    assert CALIBRATION.coefficients and set(CALIBRATION.coefficients) <= known
'''

