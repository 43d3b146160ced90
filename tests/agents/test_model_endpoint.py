"""The model path end to end, through a real HTTP server on loopback.

litellm talks to `model_server.ModelServer` (`openai/<name>` with `api_base`) exactly as it
would to a provider: these tests see what a run does when the endpoint answers well,
answers badly, refuses the key, fails, is slow, is gone, or ignores `max_tokens`.  Every
run is bounded, and every test says how it ended: status, exit code, calls, spend.
"""

from __future__ import annotations

import importlib.util
import time
from pathlib import Path
from typing import Any

import pytest
from agent_support import GEMM, fenced, run, store
from click.testing import CliRunner
from model_server import KEY, ModelServer, Reply, tokens

from cake_cli.main import main

pytestmark = [pytest.mark.skipif(importlib.util.find_spec("litellm") is None,
                                 reason="needs litellm"),
              pytest.mark.filterwarnings("ignore::DeprecationWarning"),
              pytest.mark.filterwarnings("ignore::UserWarning")]

MODEL = "openai/cake-test"
BROKEN = GEMM.replace("def gemm_sm90(", "def gemm_sm90((", 1)
"""A kernel with a syntax error: the language server has no fix for it."""
BETTER = GEMM.replace("STAGES = 4", "STAGES = 3", 1)
assert BROKEN != GEMM and BETTER != GEMM


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.delenv("OPENAI_API_BASE", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)


def _run(run_dir: Path, lsp: Any, server: ModelServer, **kw: Any) -> Any:
    base: dict[str, Any] = {"model": MODEL, "api_base": server.api_base, "batch": 1,
                            "budget_evals": 3, "patience": 2, "model_timeout_s": 5.0}
    return run(run_dir, lsp, **{**base, **kw})


def _status(run_dir: Path, run_id: str) -> tuple[str, str]:
    row = store(run_dir).run(run_id)
    return row["status"], row["stop_reason"]


def _store_bytes(run_dir: Path) -> int:
    return sum(p.stat().st_size for p in run_dir.rglob("*.sqlite*"))


# --- the two figures of the issue, through the command line --------------------------------
def test_broken_kernels_under_a_token_budget_end_fast(tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]
                                                      ) -> None:
    run_dir = tmp_path / "runs"
    with ModelServer([Reply(fenced(BROKEN))]) as server:
        t0 = time.monotonic()
        r = CliRunner().invoke(main, ["evolve", "gemm_bf16", "--model", MODEL, "--api-base",
                                      server.api_base, "--budget-tokens", "3000", "--run-dir",
                                      str(run_dir), "--executor", "inline", "--gates",
                                      "static,sim,cost", "--quiet"])
        seconds = time.monotonic() - t0
    size = _store_bytes(run_dir)
    rows = store(run_dir).usage(store(run_dir).find_run("latest"))
    spent = sum(u["tokens_in"] + u["tokens_out"] for u in rows)
    with capsys.disabled():
        print(f"\n[broken kernels, --budget-tokens 3000] exit {r.exit_code}, {seconds:.1f} s, "
              f"{len(server.requests)} requests, {spent} tokens, store {size / 1e6:.2f} MB")
    assert r.exit_code == 1, r.output
    assert "the model wrote no kernel that checks" in r.output
    assert "model failures:" in r.output or "calls (0 failed)" in r.output
    assert seconds < 60 and size < 50e6
    assert rows and spent <= 3000 and len(server.requests) == len(rows)


def test_a_refused_key_stops_after_one_call(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-wrong-key-1234567890")
    run_dir = tmp_path / "runs"
    with ModelServer([Reply(fenced(BETTER))]) as server:
        t0 = time.monotonic()
        r = CliRunner().invoke(main, ["evolve", "gemm_bf16", "--model", MODEL, "--api-base",
                                      server.api_base, "--run-dir", str(run_dir),
                                      "--executor", "inline", "--gates", "static,sim,cost",
                                      "--quiet"])
        seconds = time.monotonic() - t0
    with capsys.disabled():
        print(f"\n[HTTP 401] exit {r.exit_code}, {seconds:.1f} s, "
              f"{len(server.requests)} requests")
    assert r.exit_code == 2, r.output
    assert "stopped: the model endpoint refused the key (HTTP 401" in r.output
    assert "1 AuthenticationError" in r.output and "sk-wrong" not in r.output
    assert len(server.requests) == 1
    status, why = _status(run_dir, store(run_dir).find_run("latest"))
    assert status == "stopped" and "refused the key" in why


def test_a_budget_too_small_for_one_call_is_not_a_success(run_dir: Path, lsp: Any) -> None:
    with ModelServer([Reply(fenced(BETTER))]) as server:
        summary = _run(run_dir, lsp, server, budget_tokens=500)
    assert summary.exit_code == 1 and not server.requests
    assert "the budget cannot pay for one model call" in summary.stop_reason


# --- replies -----------------------------------------------------------------------------
def test_a_good_reply_is_charged_what_the_server_reports(run_dir: Path, lsp: Any) -> None:
    with ModelServer([Reply(fenced(BETTER))]) as server:
        summary = _run(run_dir, lsp, server, budget_evals=2)
    assert summary.exit_code == 0 and summary.status == "finished"
    (call, *_) = store(run_dir).usage(summary.run_id)
    body = server.requests[0]
    assert body["stream"] is True and body["max_tokens"] == 4096
    assert call["ok"] and call["tokens_out"] >= tokens(fenced(BETTER))
    assert call["tokens_in"] == sum(tokens(m["content"]) for m in body["messages"])
    assert summary.evals == 2 and summary.best_hash


@pytest.mark.parametrize("stream", [True, False], ids=["sse", "json"])
def test_a_server_that_ignores_max_tokens(run_dir: Path, lsp: Any, stream: bool) -> None:
    long = "".join(f"# line {i}: the model rambles on\n" for i in range(3000))  # ~24k tokens
    with ModelServer([Reply(long, ignore_max_tokens=True)]) as server:
        summary = _run(run_dir, lsp, server, budget_tokens=6000, max_tokens=1000,
                       stream=stream, max_failures=50)
    rows = store(run_dir).usage(summary.run_id)
    spent = sum(u["tokens_in"] + u["tokens_out"] for u in rows)
    if stream:
        # reading stops at max_tokens: each reply overshoots by less than one chunk
        assert all(u["tokens_out"] <= 1000 + 16 for u in rows)
        assert spent <= 6000 + 16 * len(rows)
    else:
        # the whole reply is paid for (at least what the server reports), then nothing more
        assert rows[0]["tokens_out"] >= tokens(long)
        assert len(rows) == 1
    assert "token budget" in summary.stop_reason and summary.exit_code == 1


def test_a_cut_off_reply_is_a_recorded_failure(run_dir: Path, lsp: Any) -> None:
    cut = fenced(BETTER)[: len(fenced(BETTER)) // 2]
    with ModelServer([Reply(cut, finish="length"), Reply(fenced(BETTER))]) as server:
        summary = _run(run_dir, lsp, server, budget_evals=2)
    codes = [f["code"] for f in store(run_dir).failures(summary.run_id) if f["gate"] == "model"]
    assert codes == ["E-TRUNCATED"] and summary.model_failures == {"truncated": 1}
    assert summary.exit_code == 0 and len(server.requests) == 2


# --- bounds ------------------------------------------------------------------------------
def test_no_code_block_forever_stops_at_max_failures(run_dir: Path, lsp: Any) -> None:
    with ModelServer([Reply("I would rather not.")]) as server:
        summary = _run(run_dir, lsp, server, max_failures=3, patience=50, budget_evals=50)
    assert summary.status == "stopped" and summary.exit_code == 3
    assert "3 model calls in a row" in summary.stop_reason
    assert len(server.requests) == 3 and summary.model_failures == {"no-code-block": 3}
    assert _status(run_dir, summary.run_id) == ("stopped", summary.stop_reason)


def test_calls_per_node_are_bounded(run_dir: Path, lsp: Any) -> None:
    with ModelServer([Reply("still no kernel")]) as server:
        summary = _run(run_dir, lsp, server, max_calls_per_node=2, model_retries=5)
    assert summary.exit_code == 3 and "--max-calls-per-node 2" in summary.stop_reason
    assert len(server.requests) == 2


def test_calls_per_generation_are_bounded(run_dir: Path, lsp: Any) -> None:
    # each broken kernel costs a coder call and a repair call per round
    with ModelServer([Reply(fenced(BROKEN))]) as server:
        summary = _run(run_dir, lsp, server, max_calls_per_generation=2, max_repairs=5)
    assert summary.exit_code == 3 and "--max-calls-per-generation 2" in summary.stop_reason
    assert len(server.requests) == 2


def test_repairs_of_a_broken_kernel_are_bounded(run_dir: Path, lsp: Any) -> None:
    """The loop of the issue: a syntax error, repaired into the same syntax error."""
    with ModelServer([Reply(fenced(BROKEN))]) as server:
        summary = _run(run_dir, lsp, server, max_repairs=2, patience=1, budget_evals=2)
    by_step: dict[int, list[str]] = {}
    for u in store(run_dir).usage(summary.run_id):
        by_step.setdefault(u["step"], []).append(u["node"])
    assert by_step and all(nodes.count("repairer") <= 2 for nodes in by_step.values())
    assert summary.exit_code == 1 and "no kernel that checks" in summary.stop_reason
    assert _store_bytes(run_dir) < 5e6


def test_wall_clock_is_bounded(run_dir: Path, lsp: Any) -> None:
    with ModelServer([Reply(fenced(BETTER))]) as server:
        summary = _run(run_dir, lsp, server, max_minutes=1e-6)
    assert summary.exit_code == 3 and "wall-clock limit" in summary.stop_reason
    assert server.requests == []


def test_store_size_is_bounded(run_dir: Path, lsp: Any) -> None:
    with ModelServer([Reply(fenced(BROKEN))]) as server:
        summary = _run(run_dir, lsp, server, max_store_mb=0.05, patience=50, budget_evals=50)
    assert summary.exit_code == 3 and "store-size limit" in summary.stop_reason
    assert _store_bytes(run_dir) < 2e6


# --- failures ----------------------------------------------------------------------------
def test_server_errors_are_retried_then_counted(run_dir: Path, lsp: Any) -> None:
    with ModelServer([Reply(status=500)]) as server:
        summary = _run(run_dir, lsp, server, model_retries=1, max_failures=2, patience=50)
    assert summary.exit_code == 3 and "2 model calls in a row" in summary.stop_reason
    assert len(server.requests) == 4  # two calls of two attempts
    assert summary.model_failures == {"InternalServerError": 4}


def test_an_unreachable_endpoint_stops_after_its_retries(run_dir: Path, lsp: Any) -> None:
    server = ModelServer([Reply()]).start()
    base = server.api_base
    server.stop()  # the port is closed now: connection refused
    summary = run(run_dir, lsp, model=MODEL, api_base=base, batch=1, model_retries=2)
    assert summary.exit_code == 3
    assert "unreachable: 3 attempts failed" in summary.stop_reason
    assert sum(summary.model_failures.values()) == 3


def test_a_slow_endpoint_times_out_and_stops(run_dir: Path, lsp: Any) -> None:
    with ModelServer([Reply(fenced(BETTER), delay_s=3.0)]) as server:
        summary = _run(run_dir, lsp, server, model_timeout_s=0.5, model_retries=1)
    assert summary.exit_code == 3 and "unreachable: 2 attempts" in summary.stop_reason
    assert len(server.requests) == 2


def test_a_trickling_stream_is_bounded_by_the_call_timeout(run_dir: Path, lsp: Any) -> None:
    with ModelServer([Reply(fenced(BETTER), piece_delay_s=0.05)]) as server:
        t0 = time.monotonic()
        summary = _run(run_dir, lsp, server, model_timeout_s=0.5, model_retries=0)
    assert summary.exit_code == 3 and "took more than 0.5 s" in summary.stop_reason
    assert len(server.requests) == 1 and time.monotonic() - t0 < 30


def test_a_dollar_budget_needs_a_price_on_the_command_line(tmp_path: Path) -> None:
    run_dir = tmp_path / "runs"
    r = CliRunner().invoke(main, ["evolve", "gemm_bf16", "--model", MODEL, "--api-base",
                                  "http://127.0.0.1:9/v1", "--budget-usd", "1",
                                  "--run-dir", str(run_dir), "--quiet"])
    assert r.exit_code == 2 and "--price-per-mtok IN,OUT" in r.output
    assert not (run_dir / "runs.sqlite").exists() or store(run_dir).list_runs() == []
    r = CliRunner().invoke(main, ["evolve", "gemm_bf16", "--price-per-mtok", "cheap"])
    assert r.exit_code == 2 and "--price-per-mtok takes IN,OUT" in r.output


def test_a_dollar_budget_needs_a_price(run_dir: Path, lsp: Any) -> None:
    from cake_agents.context import SetupError

    with ModelServer([Reply(fenced(BETTER))]) as server:
        with pytest.raises(SetupError, match="--price-per-mtok"):
            _run(run_dir, lsp, server, budget_usd=1.0)
        assert server.requests == []
        summary = _run(run_dir, lsp, server, budget_usd=1.0, price_per_mtok=(1.0, 2.0),
                       budget_evals=2)
    (call, *_) = store(run_dir).usage(summary.run_id)
    assert call["usd"] == pytest.approx(call["tokens_in"] * 1e-6 + call["tokens_out"] * 2e-6)
    assert summary.exit_code == 0
