"""`cake check --format sarif` as GitHub code scanning takes it.

Two validators check the real command's output on every bug in tests/bugs: the official
SARIF 2.1.0 JSON schema, and Microsoft's SARIF Multitool (`validate --rule-kind Gh;Sarif`),
which runs the SARIF specification's rules and GitHub Advanced Security's ingestion rules
(GH1xxx/GH2xxx: rule `help` and `fullDescription`, absolute `helpUri`, ...).  The Multitool
comes from the npm package @microsoft/sarif-multitool, pinned in tests/tools/package.json
and installed by `make test`; without it that test is skipped and says how to install it.
(The PyPI package sarif-tools was considered: it summarises, diffs and converts SARIF but
validates nothing.)  The GitHub requirements are also asserted here one by one, so a
machine without npm still checks them.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import jsonschema
import pytest
from click.testing import CliRunner

from cake_cli.main import main
from cake_core import __version__
from cake_core.diagnostics.codes import lookup
from cake_core.diagnostics.sarif import HELP_BASE_URI, SRCROOT, repository_root, what_it_does
from cake_core.docs import rule_doc

REPO = Path(__file__).resolve().parent.parent
SARIF_SCHEMA = REPO / "tests" / "data" / "sarif-2.1.0-rtm.5.json"
MULTITOOL_PACKAGE = REPO / "tests" / "tools" / "node_modules" / "@microsoft" / "sarif-multitool"
BUGS = sorted((REPO / "tests" / "bugs").glob("*.cake"))
BUGS = [b for b in BUGS if not b.name.endswith(".fixed.cake")]
FP8 = REPO / "tests" / "bugs" / "fp8_on_sm80.cake"


def check_sarif(*args: str) -> dict[str, Any]:
    result = CliRunner().invoke(main, ["check", "--format", "sarif", *args])
    assert result.exit_code == 1, result.output
    log: dict[str, Any] = json.loads(result.output)
    return log


@pytest.fixture(scope="module")
def bugs_log() -> dict[str, Any]:
    """The report on every bug in tests/bugs, run from the repository root."""
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(REPO)
        return check_sarif(*(str(b.relative_to(REPO)) for b in BUGS))


def github_problems(log: dict[str, Any]) -> list[str]:
    """What GitHub code scanning would reject or mislocate in `log`, one line each."""
    problems: list[str] = []
    (run,) = log["runs"]
    for rule in run["tool"]["driver"]["rules"]:
        rid = rule["id"]
        if not rule.get("fullDescription", {}).get("text"):
            problems.append(f"{rid}: no fullDescription")
        help_ = rule.get("help", {})
        if not help_.get("text") or not help_.get("markdown"):
            problems.append(f"{rid}: help lacks text or markdown")
        url = urlsplit(rule.get("helpUri", ""))
        if url.scheme != "https" or not url.netloc:
            problems.append(f"{rid}: helpUri {rule.get('helpUri')!r} is not an absolute URL")
    bases = run.get("originalUriBaseIds", {})
    for name, base in bases.items():
        if not (base["uri"].startswith("file:///") and base["uri"].endswith("/")):
            problems.append(f"base {name}: {base['uri']!r} is not a file URI ending in /")
    for i, result in enumerate(run["results"]):
        loc = result["locations"][0]["physicalLocation"]
        artifact = loc["artifactLocation"]
        uri = artifact["uri"]
        if artifact.get("uriBaseId") not in bases:
            problems.append(f"result {i}: {uri!r} has no known uriBaseId")
        if urlsplit(uri).scheme or uri.startswith("/") or ".." in uri.split("/"):
            problems.append(f"result {i}: {uri!r} is not a relative path below its base")
        region = loc["region"]
        if region["startLine"] < 1 or region["startColumn"] < 1:
            problems.append(f"result {i}: region {region} is not 1-based")
        fingerprint = result.get("partialFingerprints", {}).get("primaryLocationLineHash")
        if not fingerprint:
            problems.append(f"result {i}: no primaryLocationLineHash")
    return problems


def test_bugs_report_meets_github_requirements(bugs_log: dict[str, Any]) -> None:
    run = bugs_log["runs"][0]
    assert len(run["results"]) >= len(BUGS)
    assert len(run["tool"]["driver"]["rules"]) > 10
    assert github_problems(bugs_log) == []
    assert run["originalUriBaseIds"] == {SRCROOT: {"uri": repository_root(REPO).as_uri() + "/"}}


def test_github_checks_catch_what_code_scanning_rejects(bugs_log: dict[str, Any]) -> None:
    run = json.loads(json.dumps(bugs_log))["runs"][0]
    rule = run["tool"]["driver"]["rules"][0]
    rule["helpUri"] = "docs/rules/" + rule["id"] + ".md"
    del rule["help"]
    artifact = run["results"][0]["locations"][0]["physicalLocation"]["artifactLocation"]
    artifact["uri"] = "file:///elsewhere/k.cake"
    del artifact["uriBaseId"]
    run["results"][1]["locations"][0]["physicalLocation"]["region"]["startColumn"] = 0
    problems = github_problems({"runs": [run]})
    assert len(problems) == 5, problems


def test_bugs_report_validates_against_schema(bugs_log: dict[str, Any]) -> None:
    schema = json.loads(SARIF_SCHEMA.read_text())
    jsonschema.Draft4Validator(schema).validate(bugs_log)


def test_rule_help_is_the_docs_page(bugs_log: dict[str, Any]) -> None:
    for descriptor in bugs_log["runs"][0]["tool"]["driver"]["rules"]:
        rule = lookup(descriptor["id"])
        assert rule is not None
        page = rule_doc(rule)
        assert descriptor["help"] == {"text": page, "markdown": page}
        assert descriptor["helpUri"] == f"{HELP_BASE_URI}docs/rules/{rule.code}.md"
        assert descriptor["fullDescription"]["text"] == what_it_does(page)
    fp8 = next(r for r in bugs_log["runs"][0]["tool"]["driver"]["rules"] if r["id"] == "CK212")
    assert fp8["fullDescription"]["text"].startswith("Reports ")


def test_what_it_does_is_the_first_paragraph() -> None:
    page = ("# CK1: x\n\n## What it does\n\nReports a thing\nover two lines.\n\nMore.\n\n"
            "## Why is this bad?\n\nBecause.\n")
    assert what_it_does(page) == "Reports a thing over two lines."
    assert what_it_does("# CK1: x\n\n## What it does\n\n## Why\n") is None
    assert what_it_does("# CK1: x\n\nno sections\n") is None


def test_help_base_option(tmp_path: Path) -> None:
    log = check_sarif(str(FP8), "--sarif-help-base", "https://docs.example.org/cake/v1")
    (rule,) = log["runs"][0]["tool"]["driver"]["rules"]
    assert rule["helpUri"] == "https://docs.example.org/cake/v1/docs/rules/CK212.md"
    for bad in ("docs/", "/abs/path/", "example.org/cake/"):
        result = CliRunner().invoke(main, ["check", "--format", "sarif", str(FP8),
                                           "--sarif-help-base", bad])
        assert result.exit_code == 2
        assert "is not an absolute URL" in result.output


def test_uris_are_relative_to_the_repository_root(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Run from a subdirectory, a file beside it is still named from the repository root;
    only a file outside the repository gets an absolute URI."""
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / "kernels" / "sub").mkdir(parents=True)
    (repo / "other").mkdir()
    text = FP8.read_text()
    (repo / "kernels" / "sub" / "a.cake").write_text(text)
    (repo / "other" / "b c.cake").write_text(text)
    (tmp_path / "outside.cake").write_text(text)
    monkeypatch.chdir(repo / "kernels")
    log = check_sarif("sub/a.cake", "../other/b c.cake", "../../outside.cake")
    run = log["runs"][0]
    assert run["originalUriBaseIds"] == {SRCROOT: {"uri": repo.as_uri() + "/"}}
    locations = [r["locations"][0]["physicalLocation"]["artifactLocation"]
                 for r in run["results"]]
    assert locations == [
        {"uri": "kernels/sub/a.cake", "uriBaseId": SRCROOT},
        {"uri": "other/b%20c.cake", "uriBaseId": SRCROOT},
        {"uri": (tmp_path / "outside.cake").resolve().as_uri()},
    ]


def test_repository_root_is_the_nearest_git_directory(tmp_path: Path) -> None:
    (tmp_path / "r" / ".git").mkdir(parents=True)
    (tmp_path / "r" / "a" / "b").mkdir(parents=True)
    (tmp_path / "r" / "w").mkdir()
    (tmp_path / "r" / "w" / ".git").write_text("gitdir: ../.git/worktrees/w\n")
    assert repository_root(tmp_path / "r" / "a" / "b") == tmp_path / "r"
    assert repository_root(tmp_path / "r" / "w") == tmp_path / "r" / "w"
    assert repository_root(tmp_path) == tmp_path  # no repository: the directory itself


def multitool() -> Path:
    """The Multitool executable for this platform, as its npm package names it."""
    if not MULTITOOL_PACKAGE.is_dir():
        pytest.skip("SARIF Multitool not installed: run `make test` or "
                    "`npm ci --prefix tests/tools` (needs npm)")
    out = subprocess.run(["node", "-p", f"require({str(MULTITOOL_PACKAGE)!r})"],
                         capture_output=True, text=True, check=True)
    return Path(out.stdout.strip())


@pytest.mark.slow
def test_multitool_finds_nothing_to_fix(bugs_log: dict[str, Any], tmp_path: Path) -> None:
    """One Multitool run over two logs: the real report, which must raise nothing (not
    even a note), and a copy broken the way GitHub rejects, which must raise the GitHub
    rules (so a silently idle validator cannot pass)."""
    tool = multitool()
    good = tmp_path / "cake.sarif"
    good.write_text(json.dumps(bugs_log))
    broken = json.loads(json.dumps(bugs_log))
    rule = broken["runs"][0]["tool"]["driver"]["rules"][0]
    rule["helpUri"] = "docs/rules/" + rule["id"] + ".md"
    del rule["help"], rule["fullDescription"]
    bad = tmp_path / "broken.sarif"
    bad.write_text(json.dumps(broken))
    report = tmp_path / "validation.sarif"
    proc = subprocess.run([str(tool), "validate", "--rule-kind", "Gh;Sarif", "--output",
                           str(report), str(good), str(bad)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (run,) = json.loads(report.read_text())["runs"]
    assert run["invocations"][0]["executionSuccessful"] is True
    found: dict[str, set[str]] = {good.name: set(), bad.name: set()}
    for result in run["results"]:
        uri = result["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
        found[uri.rsplit("/", 1)[-1]].add(result["ruleId"])
    assert found[good.name] == set(), proc.stdout
    assert {"GH2012", "SARIF1005"} <= found[bad.name], proc.stdout


def test_documented_default_help_base_is_the_one_used() -> None:
    page = (REPO / "docs" / "diagnostics.md").read_text()
    documented = re.search(r"`(https://[^`]*<version>[^`]*)`", page)
    assert documented is not None
    assert documented.group(1).replace("<version>", __version__) == HELP_BASE_URI
