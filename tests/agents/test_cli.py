"""`cake evolve` and `cake runs` from the command line."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from agent_support import ROOT, run
from click.testing import CliRunner

from cake_cli.main import main


def test_cli_start_up_imports_no_agent_machinery() -> None:
    code = ("import sys\n"
            "from cake_cli.main import main\n"
            "main.get_command(None, 'evolve'); main.get_command(None, 'runs')\n"
            "bad = [m for m in ('langgraph', 'litellm', 'cake_agents', 'pygls') "
            "if m in sys.modules]\n"
            "print(bad)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, check=True)
    assert out.stdout.strip() == "[]"


def test_usage_errors_exit_2(tmp_path: Path) -> None:
    r = CliRunner().invoke(main, ["evolve", "no_such_task", "--run-dir", str(tmp_path)])
    assert r.exit_code == 2 and "no task 'no_such_task'" in r.output
    r = CliRunner().invoke(main, ["evolve"])
    assert r.exit_code == 2 and "give a TASK" in r.output
    r = CliRunner().invoke(main, ["evolve", "gemm_bf16", "--gates", "sim,nope"])
    assert r.exit_code == 2 and "unknown gate" in r.output
    r = CliRunner().invoke(main, ["experiment", "gemm_bf16", "--arms", "cake", "--gates",
                                  "static,nope"])
    assert r.exit_code == 2 and "unknown gate(s) nope" in r.output
    r = CliRunner().invoke(main, ["runs", "list", "--run-dir", str(tmp_path / "none")])
    assert r.exit_code == 2 and "no runs store" in r.output


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory, lsp: Any) -> tuple[Path, Any]:
    run_dir = tmp_path_factory.mktemp("runs")
    return run_dir, run(run_dir, lsp, budget_evals=3)


def test_runs_list_show_best(finished: tuple[Path, Any]) -> None:
    run_dir, summary = finished
    cli = CliRunner()
    r = cli.invoke(main, ["runs", "list", "--run-dir", str(run_dir)])
    assert r.exit_code == 0
    header, row = (line.split() for line in r.output.splitlines())
    assert header == ["RUN", "TASK", "MODE", "STATUS", "EVALS", "BEST", "STARTED", "MODEL"]
    assert row[:5] == [summary.run_id, "gemm_bf16", "clean", "finished", "3"]
    r = cli.invoke(main, ["runs", "show", summary.run_id[:14], "--run-dir", str(run_dir)])
    assert r.exit_code == 0 and "gemm_bf16 (clean)" in r.output and "3 evaluations" in r.output
    r = cli.invoke(main, ["runs", "best", "latest", "--run-dir", str(run_dir)])
    assert r.exit_code == 0 and "@kernel(" in r.output
    r = cli.invoke(main, ["runs", "show", "nope", "--run-dir", str(run_dir)])
    assert r.exit_code == 2 and "no run 'nope'" in r.output


def test_report_is_self_contained(finished: tuple[Path, Any], tmp_path: Path) -> None:
    run_dir, summary = finished
    out = tmp_path / "r.html"
    r = CliRunner().invoke(main, ["runs", "report", summary.run_id, "--run-dir", str(run_dir),
                                  "-o", str(out)])
    assert r.exit_code == 0 and out.as_uri() in r.output
    page = out.read_text()
    assert page.startswith("<!doctype html>") and page.count("<svg") >= 3
    for external in ("src=\"http", "href=\"http", "<script", "@import", "url("):
        assert external not in page
    assert "Search progress" in page and "Failures by gate" in page
