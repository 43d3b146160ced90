"""`cake promote`: turn one recurring failure into a plugin item with its examples as tests.

The steps, for a signature (digest prefix or full key) found in the runs store:

1. gather the evidence: the distinct failing candidate texts (up to `MAX_KERNELS`), the
   line each failed at, and for each its *clean twin*: the nearest ancestor in its parent
   chain that passed every gate;
2. for a rule or tactic, read the IR shape of the op on the failing line of every failing
   kernel (`pattern.py`); shapes that also occur in a clean twin or in `examples/` are
   dropped, since matching them would flag correct kernels;
3. write the item into the plugin package (a new one, or an existing plugin; see
   `package.py`): a precise skeleton (`templates.py`), its docs page, the failing kernels
   and clean twins under tests/examples/, and the regenerated tests/test_promoted.py;
4. with a model, ask it for a better body and keep the answer only if the item's tests
   pass with it and every kernel in `examples/` stays clean (`draft.py`);
5. run the item's tests (a subprocess, the plugin folder on PYTHONPATH) and record the
   promotion, its trigger and its tests in the ledger (`ledger.py`).
"""

from __future__ import annotations

import difflib
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cake_agents.mining.clusters import Cluster, build_clusters, load_failures, locate
from cake_agents.mining.ledger import Ledger, Promotion
from cake_agents.mining.package import ItemEntry, PluginPackage
from cake_agents.mining.templates import (
    ItemSpec,
    calibration_module,
    primitive_module,
    rule_doc,
    rule_module,
    tactic_module,
)
from cake_agents.store import RunsStore

KINDS = ("rule", "tactic", "primitive", "calibration")
MAX_KERNELS = 8
TEST_TIMEOUT_S = 300.0
STAGE_WORDS = {"sim": "simulation", "compile": "compilation", "gpu": "the GPU run",
               "static": "static checking", "agent": "the agent loop", "cost": "costing"}
_UNKNOWN_PRIMITIVE = re.compile(r"`([A-Za-z_][A-Za-z0-9_]*)` is not a CAKE primitive")


class PromotionError(Exception):
    """The promotion cannot be made as asked (unknown signature, nothing to match, ...)."""


@dataclass
class FailingKernel:
    run_id: str
    hash: str
    text: str
    line: int | None
    message: str


@dataclass
class Evidence:
    cluster: Cluster
    failing: list[FailingKernel]
    clean: list[tuple[str, str]]
    """(run:hash, text) of the clean twins."""


@dataclass
class PromotionResult:
    promotion: Promotion
    plugin: PluginPackage
    files: list[Path] = field(default_factory=list)
    test_output: str = ""

    @property
    def validated(self) -> bool:
        return self.promotion.validated

    def to_json(self) -> dict[str, Any]:
        return {"promotion": self.promotion.to_json(), "plugin": self.plugin.name,
                "plugin_dir": str(self.plugin.root), "files": [str(p) for p in self.files],
                "validated": self.validated}


# --- finding the signature and its evidence ---------------------------------------------------
def find_cluster(store: RunsStore, ref: str, run_ids: list[str],
                 ledger: Ledger | None = None) -> Cluster:
    ref = ref.strip()
    clusters = build_clusters(store, run_ids, ledger=ledger, min_count=1, examples=0)
    exact = [c for c in clusters if ref in (c.key, c.digest)]
    if exact:
        return exact[0]
    if len(ref) < 4:
        raise PromotionError(f"{ref!r}: give at least 4 characters of a signature digest")
    hits = [c for c in clusters if c.digest.startswith(ref.lower())]
    if not hits:
        raise PromotionError(f"no failure signature {ref!r} in these runs "
                             "(see `cake failures`)")
    if len(hits) > 1:
        raise PromotionError(f"{ref!r} names {len(hits)} signatures: "
                             + ", ".join(c.digest for c in hits[:5]))
    return hits[0]


def gather(store: RunsStore, cluster: Cluster, run_ids: list[str]) -> Evidence:
    from cake_agents.context import content_hash

    failing: list[FailingKernel] = []
    seen: set[str] = set()
    clean: dict[str, tuple[str, str]] = {}
    for f in sorted((f for f in load_failures(store, run_ids) if f.digest == cluster.digest),
                    key=lambda f: f.created):
        text = store.candidate_text(f.run_id, f.hash)
        if not text or content_hash(text) in seen:
            continue
        seen.add(content_hash(text))
        failing.append(FailingKernel(f.run_id, f.hash, text, locate(store, f, text),
                                     f.message))
        twin = _clean_twin(store, f.run_id, f.hash)
        if twin is not None:
            clean.setdefault(content_hash(twin[1]), twin)
        if len(failing) >= MAX_KERNELS:
            break
    if not failing:
        raise PromotionError(f"the candidates of {cluster.digest} are not in the runs store")
    return Evidence(cluster, failing, list(clean.values()))


def _clean_twin(store: RunsStore, run_id: str, hash_: str) -> tuple[str, str] | None:
    row = store.candidate(run_id, hash_)
    seen = {hash_}
    h = row["parent"] if row else None
    while h and h not in seen:
        seen.add(h)
        res = [r for r in store.evaluations(run_id, h) if r["gate"] == "_result"]
        if res and res[0]["status"] == "pass":
            text = store.candidate_text(run_id, h)
            return (f"{run_id}:{h}", text) if text else None
        parent = store.candidate(run_id, h)
        h = parent["parent"] if parent else None
    return None


# --- IR shapes --------------------------------------------------------------------------------
def _program(text: str) -> Any:
    from cake_core.check import check_text

    return check_text(text, "kernel.cake").program


def failing_shapes(evidence: Evidence) -> tuple[list[str], list[str]]:
    """IR shapes at the failing line of each failing kernel, and problems met."""
    from cake_agents.mining.pattern import shapes_at_line

    shapes: list[str] = []
    problems: list[str] = []
    for k in evidence.failing:
        if k.line is None:
            problems.append(f"{k.hash[:10]}: the failing construct is not in its text")
            continue
        program = _program(k.text)
        kernels = [] if program is None else [
            kern for kern in program.kernels
            if kern.span.start.line <= k.line <= kern.span.end.line]
        found = [s for kern in kernels for s in shapes_at_line(kern, k.line)]
        if not found:
            problems.append(f"{k.hash[:10]}: no op on line {k.line + 1}")
        shapes.extend(s for s in found if s not in shapes)
    return shapes, problems


def shapes_in(text: str) -> set[str]:
    from cake_agents.mining.pattern import ShapeIndex

    program = _program(text)
    out: set[str] = set()
    for kern in program.kernels if program is not None else []:
        index = ShapeIndex(kern)
        out.update(index.shape(op) for op in kern.ops())
    return out


def project_examples(examples_dir: Path | None) -> list[Path]:
    return sorted(examples_dir.glob("*.cake")) if examples_dir and examples_dir.is_dir() else []


def default_examples_dir() -> Path | None:
    here = Path.cwd() / "examples"
    if here.is_dir():
        return here
    import cake_core

    repo = Path(cake_core.__file__).resolve().parents[1] / "examples"
    return repo if repo.is_dir() else None


def select_patterns(shapes: list[str], evidence: Evidence, examples: list[Path]
                    ) -> tuple[list[str], list[str]]:
    """Drop the shapes clean kernels also have; returns (patterns, problems)."""
    clean_texts = [(f"clean twin {ref.split(':')[-1][:10]}", t) for ref, t in evidence.clean]
    clean_texts += [(str(p.name), p.read_text(encoding="utf-8")) for p in examples]
    problems: list[str] = []
    keep = list(shapes)
    for label, text in clean_texts:
        bad = [s for s in keep if s in shapes_in(text)]
        for s in bad:
            problems.append(f"the shape {s} also occurs in {label}, which is correct")
        keep = [s for s in keep if s not in bad]
    if not keep:
        problems.append("no shape tells the failing kernels from correct ones: the skeleton "
                        "matches every shape seen; narrow it in refine()")
        return shapes, problems
    uncovered = [k.hash[:10] for k in evidence.failing
                 if k.line is not None and not (shapes_in(k.text) & set(keep))]
    if uncovered:
        problems.append("failing kernels the kept shapes do not match: " + ", ".join(uncovered))
    return keep, problems


# --- building the item ------------------------------------------------------------------------
def _kebab(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "promoted"


def _failure_rule(code: str) -> tuple[str, str, str]:
    """(name, summary, severity) of the failure's own code."""
    from cake_core.diagnostics.codes import lookup

    rule = lookup(code)
    if rule is None:
        return code.lower(), f"the {code} failure", "ERROR"
    sev = "WARNING" if rule.severity.value == "warning" else "ERROR"
    return rule.name, rule.summary, sev


def _snippet(text: str, line: int | None, context: int = 2) -> str:
    if line is None:
        return ""
    lines = text.splitlines()
    lo, hi = max(0, line - context), min(len(lines), line + context + 1)
    return "\n".join(lines[lo:hi])


def _twin_lines(bad: str, good: str, line: int | None) -> str:
    """The lines of the clean twin that correspond to the failing line."""
    if line is None or not good:
        return ""
    a, b = bad.splitlines(), good.splitlines()
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes():
        if tag != "equal" and i1 <= line < max(i2, i1 + 1):
            return "\n".join(b[j1:j2])
    return ""


def _call_arity(text: str, name: str) -> tuple[int, list[str]]:
    from cake_core.source import SourceFile
    from cake_core.syntax import ast as cast
    from cake_core.syntax.parser import parse

    module = parse(SourceFile(text, "kernel.cake")).module
    n, kws = 0, []
    for node in cast.walk(module):
        if isinstance(node, cast.Call) and isinstance(node.func, cast.Name) and \
                node.func.id == name:
            n = max(n, len(node.args))
            kws += [k.name for k in node.keywords if k.name not in kws]
    return n, kws


def build_spec(kind: str, evidence: Evidence, pkg: PluginPackage, name: str | None,
               examples: list[Path]) -> tuple[ItemSpec, list[str]]:
    c = evidence.cluster
    fname, fsummary, severity = _failure_rule(c.code)
    runs = len(c.runs)
    first = evidence.failing[0]
    bad = _snippet(first.text, first.line)
    twin = evidence.clean[0][1] if evidence.clean else ""
    spec = ItemSpec(kind=kind, name="", module="", plugin=pkg.name, code="",
                    digest=c.digest, signature=c.key, stage=c.stage, failure_code=c.code,
                    failure_name=fname, failure_summary=fsummary, count=c.count, runs=runs,
                    first_seen=_day(c.first_seen), last_seen=_day(c.last_seen),
                    date=time.strftime("%Y-%m-%d"), examples=[], severity=severity,
                    bad=bad, good=_twin_lines(first.text, twin, first.line))
    problems: list[str] = []
    if kind in ("rule", "tactic"):
        shapes, problems = failing_shapes(evidence)
        if not shapes:
            if kind == "rule":
                raise PromotionError(
                    f"{c.digest}: the failing line holds no CAKE op "
                    f"({c.construct or 'no construct'}), so a rule has nothing to match; "
                    "promote it as a tactic or calibration, or write the rule by hand")
        else:
            spec.patterns, more = select_patterns(shapes, evidence, examples)
            problems += more
        spec.primitive = spec.patterns[0].split("(")[0] if spec.patterns else "op"
        stage = STAGE_WORDS.get(c.stage, c.stage)
        spec.message = (f"`{spec.primitive}` here has the shape of a construct that failed "
                        f"{stage} {c.count} times with {c.code} ({fname}): "
                        f"{fsummary[:1].lower()}{fsummary[1:].rstrip('.')}")
        spec.notes = [f"promoted from failure signature {c.digest}: {c.key}",
                      f"one of those failures: {(first.message.splitlines() or [''])[0][:200]}"]
        default = f"{spec.primitive}-{re.sub(r'^(sim|gpu|cuda|lower)-', '', fname)}"
    elif kind == "primitive":
        m = next((m for k in evidence.failing if (m := _UNKNOWN_PRIMITIVE.search(k.message))),
                 None)
        prim = m.group(1) if m else (name or "").replace("-", "_")
        if not prim.isidentifier():
            raise PromotionError(f"{c.digest}: no unknown primitive named in the failures; "
                                 "give the primitive's name with --name")
        spec.primitive = prim
        nargs, spec.keywords = _call_arity(first.text, prim)
        spec.params = [f"arg{i}" for i in range(nargs)]
        default = prim
    else:
        from cake_core.cost.calibration import default_coefficients
        from cake_core.hardware import default_gpu, get_arch

        program = _program(first.text)
        arch = program.kernels[0].arch if program is not None and program.kernels else ""
        spec.arch = arch if get_arch(arch) else "sm_90a"
        spec.coefficients = default_coefficients(default_gpu(spec.arch)).as_mapping()
        default = f"{spec.arch}-{c.code.lower()}"
    spec.name = pkg.unique_name(_kebab(name or default))
    spec.module = f"{kind}_{spec.name.replace('-', '_')}"
    if kind == "rule":
        spec.code = pkg.next_code()
    spec.examples = [f"tests/examples/{spec.module}/fail_{i + 1}.cake"
                     for i in range(len(evidence.failing))]
    return spec, problems


def _day(t: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(t)) if t else "?"


MODULE_TEXT = {"rule": rule_module, "tactic": tactic_module, "primitive": primitive_module,
               "calibration": calibration_module}


# --- validation -------------------------------------------------------------------------------
def run_item_tests(pkg: PluginPackage, module: str, examples_dir: Path | None,
                   timeout_s: float = TEST_TIMEOUT_S) -> tuple[bool, str]:
    """Run the item's tests in a subprocess with the plugin folder on PYTHONPATH."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(pkg.root.resolve()),
                                                     env.get("PYTHONPATH", "")) if p)
    env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"  # the item's tests need no pytest plugins
    if examples_dir is not None:
        env["CAKE_EXAMPLES_DIR"] = str(examples_dir.resolve())
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-k", module,
           str((pkg.root / "tests" / "test_promoted.py").resolve())]
    try:
        r = subprocess.run(cmd, env=env, cwd=pkg.root, capture_output=True, text=True,
                           timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired:
        return False, f"the tests ran longer than {timeout_s:g} s"
    out = (r.stdout + r.stderr)[-4000:]
    if "No module named pytest" in out:
        return False, "pytest is not installed: the item's tests were not run"
    return r.returncode == 0, out


# --- the whole promotion ----------------------------------------------------------------------
def promote(runs_dir: Path, signature: str, kind: str, *, plugin_dir: Path,
            name: str | None = None, examples_dir: Path | None = None, model: Any = None,
            force: bool = False, run_refs: list[str] | None = None,
            run_tests: bool = True) -> PromotionResult:
    """Promote one signature; see the module docstring.  Raises PromotionError."""
    from cake_agents.mining.clusters import resolve_runs
    from cake_agents.store import STORE_NAME, StoreError

    if kind not in KINDS:
        raise PromotionError(f"--as must be one of {', '.join(KINDS)}, not {kind!r}")
    path = Path(runs_dir) / STORE_NAME
    if not path.is_file():
        raise PromotionError(f"no runs store at {path}")
    store = RunsStore(path)
    ledger = Ledger.beside(Path(runs_dir))
    try:
        try:
            run_ids = resolve_runs(store, run_refs or [])
        except StoreError as exc:
            raise PromotionError(str(exc)) from exc
        cluster = find_cluster(store, signature, run_ids, ledger)
        earlier = [p for p in ledger.by_digest(cluster.digest) if p.kind == kind]
        if earlier and not force:
            p = earlier[-1]
            raise PromotionError(f"{cluster.digest} was already promoted as {kind} "
                                 f"{p.name!r} into {p.plugin} (ledger #{p.id}); give --force "
                                 "to write another")
        evidence = gather(store, cluster, run_ids)
        examples = project_examples(examples_dir)
        try:
            # nothing is written until the item is: a refusal below leaves no folder
            pkg = PluginPackage.open_or_create(Path(plugin_dir), write=False)
        except ValueError as exc:
            raise PromotionError(str(exc)) from exc
        from cake_core.check import default_plugins

        default_plugins()  # registers the installed plugins' codes: a new code avoids them
        spec, problems = build_spec(kind, evidence, pkg, name, examples)
        module_text = MODULE_TEXT[kind](spec)
        files = {rel: k.text for rel, k in zip(spec.examples, evidence.failing, strict=True)}
        files.update({f"tests/examples/{spec.module}/clean_{i + 1}.cake": text
                      for i, (_, text) in enumerate(evidence.clean)})
        entry = ItemEntry(kind, spec.name, spec.module, spec.code, cluster.digest, cluster.key,
                          spec.date, spec.examples,
                          [r for r in files if "/clean_" in r])
        pkg.prepare()
        written = pkg.add(entry, module_text, doc=rule_doc(spec) if kind == "rule" else None,
                          examples=files)
        drafted_by, output, notes, tested = "skeleton", "", [], False
        if model is not None and kind in ("rule", "tactic"):
            from cake_agents.mining.draft import draft_item

            outcome = draft_item(model, spec, module_text, evidence, pkg, examples_dir)
            notes += outcome.problems
            if outcome.kept:
                drafted_by = f"model:{getattr(model, 'name', 'model')}"
                output, tested = outcome.output, True
        ok = not problems
        if run_tests and not tested:
            passed, output = run_item_tests(pkg, spec.module, examples_dir)
            if not passed:
                problems.append("the item's tests fail: " + _last_line(output))
            ok = ok and passed
        promo = Promotion(
            kind=kind, name=spec.name, codes=[spec.code] if spec.code else [],
            plugin=pkg.name, plugin_dir=str(pkg.root.resolve()),
            module=f"{pkg.pkg}.promoted.{spec.module}", digest=cluster.digest,
            signature=cluster.key, gate=cluster.stage, code=cluster.code,
            construct=cluster.construct, count=cluster.count, runs=cluster.runs,
            candidates=cluster.candidates, patterns=spec.patterns,
            tests=[f"tests/test_promoted.py::test_{spec.module}_*"],
            examples=[*spec.examples, *entry.clean], drafted_by=drafted_by, validated=ok,
            problems=[*problems, *(f"note: {n}" for n in notes)], created=time.time())
        promo.id = ledger.add(promo)
        return PromotionResult(promo, pkg, written, output)
    finally:
        ledger.close()
        store.close()


def _last_line(text: str) -> str:
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1][:200] if lines else "no output"
