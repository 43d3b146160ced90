"""`cake promote`: items written into new and existing plugins, with their failing kernels
as regression tests that pass; a model's draft kept only when those tests pass with it."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path

import pytest
from click.testing import CliRunner
from mining_support import IR_SHAPE, MARK, ROOT, SEED, add_candidate, make_run, variant

from cake_agents.mining.ledger import Ledger
from cake_agents.mining.promote import PromotionError, promote
from cake_agents.models import ScriptedModel
from cake_agents.signature import signature
from cake_agents.store import RunsStore
from cake_cli.main import main
from cake_core.plugins.scaffold import scaffold

EXAMPLES = ROOT / "examples"
DIGEST_RE = re.compile(r"\[PRIME\] ([0-9a-f]{16})")


@pytest.fixture
def runs(tmp_path: Path) -> Path:
    d = tmp_path / "runs"
    s = RunsStore(d / "runs.sqlite")
    make_run(s, "run-a", mistakes=3)
    s.close()
    return d


def _digest(runs: Path) -> str:
    r = CliRunner().invoke(main, ["failures", "--runs-dir", str(runs)])
    m = DIGEST_RE.search(r.output)
    assert m, r.output
    return m.group(1)


def test_promote_a_rule_into_a_new_plugin(runs: Path, tmp_path: Path) -> None:
    digest = _digest(runs)
    plugin = tmp_path / "cake-learned"
    r = CliRunner().invoke(main, ["promote", digest[:8], "--as", "rule", "--plugin",
                                  str(plugin), "--runs-dir", str(runs), "--examples",
                                  str(EXAMPLES)])
    assert r.exit_code == 0, r.output
    assert "rule ldmatrix-out-of-bounds (LE101)" in r.output and ": pass" in r.output
    manifest = json.loads((plugin / "promoted.json").read_text())
    (item,) = manifest["items"]
    assert (item["code"], item["digest"]) == ("LE101", digest)
    assert len(item["examples"]) == 3 and len(item["clean"]) == 1
    for rel in item["examples"]:
        assert MARK in (plugin / rel).read_text()
    assert (plugin / item["clean"][0]).read_text() == SEED
    module = (plugin / "cake_learned" / "promoted" / f"{item['module']}.py").read_text()
    assert IR_SHAPE in module and "Provenance(SIGNATURE" in module
    assert f"DIGEST = {digest!r}" in module
    doc = (plugin / "docs" / "LE101.md").read_text()
    assert "## Use instead" in doc and "(wm, kk)" in doc and MARK in doc
    assert '"cake_learned.promoted"' in (plugin / "pyproject.toml").read_text()
    with Ledger.beside(runs) as ledger:
        (p,) = ledger.promotions()
    assert p.validated and p.drafted_by == "skeleton" and p.codes == ["LE101"]
    assert p.count == 3 and p.runs == ["run-a"] and p.gate == "sim" and p.code == "CK504"
    # promoted signatures are no longer prime, and promoting again needs --force
    out = CliRunner().invoke(main, ["failures", "--runs-dir", str(runs)]).output
    assert "[PRIME]" not in out and "promoted   rule ldmatrix-out-of-bounds" in out
    again = CliRunner().invoke(main, ["promote", digest, "--as", "rule", "--plugin",
                                      str(plugin), "--runs-dir", str(runs)])
    assert again.exit_code == 2 and "already promoted" in again.output
    ledger_out = CliRunner().invoke(main, ["promote", "--ledger", "--runs-dir", str(runs)])
    assert ledger_out.exit_code == 0
    assert "#1" in ledger_out.output and "fired    not yet" in ledger_out.output
    as_json = CliRunner().invoke(main, ["promote", "--ledger", "--runs-dir", str(runs),
                                        "--format", "json"])
    assert json.loads(as_json.output)[0]["digest"] == digest


def test_promote_into_an_existing_plugin_extends_it(runs: Path, tmp_path: Path) -> None:
    root = scaffold("cake-mine", tmp_path)
    res = promote(runs, _digest(runs), "rule", plugin_dir=root, examples_dir=EXAMPLES)
    assert res.validated, res.promotion.problems
    assert res.promotion.codes == ["MI102"]  # MI101 is the scaffold's own rule
    init = (root / "cake_mine" / "__init__.py").read_text()
    assert "plugin = _extend_promoted(plugin)" in init and "SINGLE_STAGE" in init
    assert 'packages = ["cake_mine", "cake_mine.promoted"]' in \
        (root / "pyproject.toml").read_text()
    # a second item regenerates the promoted package and the tests, not the hook
    res2 = promote(runs, res.promotion.digest, "tactic", plugin_dir=root,
                   examples_dir=EXAMPLES)
    assert res2.validated, res2.promotion.problems
    assert (root / "cake_mine" / "__init__.py").read_text() == init
    promoted = (root / "cake_mine" / "promoted" / "__init__.py").read_text()
    assert "RULES: tuple[Any, ...] = (_rule0,)" in promoted
    assert "TACTICS: tuple[Any, ...] = (_tactic1,)" in promoted


def test_primitive_and_calibration_skeletons_pass_their_tests(runs: Path, tmp_path: Path
                                                               ) -> None:
    s = RunsStore(runs / "runs.sqlite")
    seed = add_candidate(s, "run-a", SEED, parent=None, step=1, origin="seed")
    for i in range(2):
        text = variant(20 + i).replace("ldmatrix(sb[s]", "ldmatrix_x4(sb[s]")
        line = next(ln for ln in text.splitlines() if "ldmatrix_x4(" in ln)
        h = add_candidate(s, "run-a", text, parent=seed, step=20 + i)
        msg = "`ldmatrix_x4` is not a CAKE primitive; did you mean `ldmatrix`?"
        s.add_failure("run-a", hash_=h, step=20 + i, sig=signature("check", "CK102", msg, line),
                      message=msg)
    s.close()
    out = CliRunner().invoke(main, ["failures", "--runs-dir", str(runs), "--format", "json"])
    clusters = {c["code"]: c for c in json.loads(out.output)["clusters"]}
    assert clusters["CK102"]["suggest"] == "primitive" and not clusters["CK102"]["prime"]
    plugin = tmp_path / "cake-learned"
    prim = promote(runs, clusters["CK102"]["digest"], "primitive", plugin_dir=plugin)
    assert prim.validated, prim.promotion.problems
    assert prim.promotion.name == "ldmatrix-x4"
    text = (plugin / "cake_learned" / "promoted" / "primitive_ldmatrix_x4.py").read_text()
    assert "'ldmatrix_x4'" in text and "param('arg0'" in text
    cal = promote(runs, clusters["CK504"]["digest"], "calibration", plugin_dir=plugin,
                  name="sm80-ldmatrix")
    assert cal.validated, cal.promotion.problems
    text = (plugin / "cake_learned" / "promoted" / "calibration_sm80_ldmatrix.py").read_text()
    assert "'sm_80'" in text and "'hbm_efficiency'" in text


def test_a_rule_needs_an_op_to_match(runs: Path, tmp_path: Path) -> None:
    s = RunsStore(runs / "runs.sqlite")
    for i in range(2):
        h = add_candidate(s, "run-a", variant(30 + i), parent=None, step=30 + i)
        s.add_failure("run-a", hash_=h, step=30 + i, message="differs",
                      sig=signature("sim", "CK507", "`C` differs", "M = dim(\"M\")"))
    s.close()
    wrong = json.loads(CliRunner().invoke(main, ["failures", "--runs-dir", str(runs),
                                                 "--format", "json"]).output)
    digest = next(c["digest"] for c in wrong["clusters"] if c["code"] == "CK507")
    with pytest.raises(PromotionError, match="no CAKE op"):
        promote(runs, digest, "rule", plugin_dir=tmp_path / "p", run_tests=False)
    assert not (tmp_path / "p").exists(), "a refused promotion must create nothing"
    r = CliRunner().invoke(main, ["promote", digest, "--as", "rule", "--runs-dir", str(runs),
                                  "--plugin", str(tmp_path / "q"), "--no-tests"])
    assert r.exit_code == 2 and "no CAKE op" in r.output
    assert not (tmp_path / "q").exists()
    r = CliRunner().invoke(main, ["promote", "ffff", "--as", "rule", "--runs-dir", str(runs)])
    assert r.exit_code == 2 and "no failure signature" in r.output
    r = CliRunner().invoke(main, ["promote", digest, "--runs-dir", str(runs)])
    assert r.exit_code == 2 and "--as" in r.output


def test_a_refused_promotion_leaves_an_existing_plugin_as_it_was(runs: Path,
                                                                 tmp_path: Path) -> None:
    root = scaffold("cake-mine", tmp_path)
    before = {p: p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}
    s = RunsStore(runs / "runs.sqlite")
    for i in range(2):  # twice: a cluster recurs
        h = add_candidate(s, "run-a", variant(40 + i), parent=None, step=40 + i)
        s.add_failure("run-a", hash_=h, step=40 + i, message="differs",
                      sig=signature("sim", "CK507", "`C` differs", "M = dim(\"M\")"))
    s.close()
    wrong = json.loads(CliRunner().invoke(main, ["failures", "--runs-dir", str(runs),
                                                 "--format", "json"]).output)
    digest = next(c["digest"] for c in wrong["clusters"] if c["code"] == "CK507")
    with pytest.raises(PromotionError, match="no CAKE op"):
        promote(runs, digest, "rule", plugin_dir=root, run_tests=False)
    after = {p: p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}
    assert after == before, "the refused promotion hooked into or wrote to the plugin"


def _skeleton(messages: Sequence[dict[str, str]]) -> str:
    body = messages[-1]["content"]
    return re.findall(r"```python\n(.*?)```", body, re.S)[-1]


def test_a_model_draft_is_kept_when_its_tests_pass(runs: Path, tmp_path: Path) -> None:
    def good(messages: Sequence[dict[str, str]]) -> str:
        text = _skeleton(messages).replace(
            "    return MESSAGE\n", "    return 'reads past the end of its stage: ' + MESSAGE\n")
        return f"Here it is.\n```python\n{text}```\n"

    model = ScriptedModel(["```python\nx = 1\n```", good])
    res = promote(runs, _digest(runs), "rule", plugin_dir=tmp_path / "p", model=model,
                  examples_dir=EXAMPLES)
    assert res.validated and res.promotion.drafted_by == "model:scripted"
    module = Path(res.plugin.module_path("rule_ldmatrix_out_of_bounds")).read_text()
    assert "reads past the end of its stage" in module
    assert len(model.calls) == 2 and "must define RULE" in model.calls[1][-1]["content"]
    assert "CK504" in model.calls[0][-1]["content"]


def test_a_model_draft_that_fails_its_tests_is_dropped(runs: Path, tmp_path: Path) -> None:
    def silent(messages: Sequence[dict[str, str]]) -> str:
        text = _skeleton(messages).replace("    return MESSAGE\n", "    return None\n")
        return f"```python\n{text}```"

    model = ScriptedModel([silent])
    res = promote(runs, _digest(runs), "rule", plugin_dir=tmp_path / "p", model=model,
                  examples_dir=EXAMPLES)
    assert res.promotion.drafted_by == "skeleton" and res.validated
    assert any("model draft rejected" in p for p in res.promotion.problems)
    module = Path(res.plugin.module_path("rule_ldmatrix_out_of_bounds")).read_text()
    assert "    return MESSAGE\n" in module
    assert "failed its tests" in model.calls[1][-1]["content"]
