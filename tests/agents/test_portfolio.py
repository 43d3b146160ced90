"""Portfolio mode: a winner per shape bucket and a dispatcher that picks it per shape."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from agent_support import run, store

from cake_agents.portfolio import dispatcher_cpp, select
from cake_agents.scoring import bucket_key, make_buckets, score, shape_specs, weighted_geomean

TABLE = {
    "schema": "cake.dispatch/1", "task": "t", "kernel": "k", "dims": ["M", "N"],
    "buckets": [
        {"bucket": "M~4096,N~4096", "center": {"M": 4096.0, "N": 4096.0}, "symbol": "k_a",
         "kernel": "a", "shapes": [], "constraints": {"N": {"multiple_of": 256, "max": None}}},
        {"bucket": "M~16,N~4096", "center": {"M": 16.0, "N": 4096.0}, "symbol": "k_b",
         "kernel": "b", "shapes": [], "constraints": {"M": {"multiple_of": 1, "max": 512}}},
    ],
}
PROBES = [{"M": 4096, "N": 4096}, {"M": 16, "N": 4096}, {"M": 1, "N": 8192},
          {"M": 8192, "N": 8192}, {"M": 4096, "N": 4100}, {"M": 200, "N": 4100},
          {"M": 48, "N": 256}, {"M": 1000, "N": 100}, {"M": 300, "N": 4100}]


def test_select_nearest_admitting_bucket() -> None:
    # (300, 4100) is nearest to bucket 0, which needs N % 256 == 0: it falls back to 1;
    # (4096, 4100) and (1000, 100) fit no kernel's constraints
    assert [select(TABLE, p) for p in PROBES] == [0, 1, 1, 0, -1, 1, 1, -1, 1]


@pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++")
def test_generated_cpp_agrees_with_python(tmp_path: Path) -> None:
    header = tmp_path / "dispatch.hpp"
    header.write_text(dispatcher_cpp(TABLE))
    calls = "\n".join(f'  std::printf("%d\\n", cake_dispatch_t::select({p["M"]}, {p["N"]}));'
                      for p in PROBES)
    (tmp_path / "main.cpp").write_text(
        f'#include <cstdio>\n#include "dispatch.hpp"\nint main() {{\n{calls}\n}}\n')
    subprocess.run(["g++", "-std=c++17", "-Wall", "-Werror", "-o", str(tmp_path / "m"),
                    str(tmp_path / "main.cpp")], check=True, cwd=tmp_path)
    out = subprocess.run([str(tmp_path / "m")], capture_output=True, text=True, check=True)
    assert [int(x) for x in out.stdout.split()] == [select(TABLE, p) for p in PROBES]


def test_buckets_and_weighted_score() -> None:
    specs = shape_specs([({"M": 4096, "N": 4096}, 1.0, "headline"),
                         ({"M": 4000, "N": 4104}, 0.5, "ragged"),
                         ({"M": 2048, "N": 2048}, 0.5, "")])
    assert bucket_key({"M": 4000, "N": 4104}) == "M~4096,N~4096"
    buckets = make_buckets(specs)
    assert [len(b.shapes) for b in buckets] == [2, 1]
    base = {s.key: 1.0 for s in specs}
    # one shape with an absurd time moves the score by at most its share of log(cap)
    absurd = {specs[0].key: 1.0, specs[1].key: 1.0, specs[2].key: 1e-12}
    got = score(absurd, base, {}, specs)
    assert got is not None and got == pytest.approx(10 ** (0.5 / 2.0))
    assert weighted_geomean([(2.0, 1.0), (8.0, 1.0)]) == pytest.approx(4.0)


def test_portfolio_run_dispatches_each_shape_to_its_bucket_winner(run_dir: Path,
                                                                  lsp: Any) -> None:
    summary = run(run_dir, lsp, mode="portfolio", budget_evals=5)
    table = json.loads((summary.run_dir / "dispatch.json").read_text())
    s = store(run_dir)
    row = s.run(summary.run_id)
    assert row is not None
    winners = summary.winners
    assert len(table["buckets"]) == len(winners) == 3  # gemm_bf16: 4 shapes, 3 buckets
    for i, b in enumerate(table["buckets"]):
        assert b["kernel"] == winners[b["bucket"]]
        for key in b["shapes"]:
            dims = dict(part.split("=") for part in key.split(","))
            assert select(table, {k: int(v) for k, v in dims.items()}) == i
        assert (summary.run_dir / f"{b['symbol']}.cake").read_text() == \
            s.candidate_text(summary.run_id, b["kernel"])
    assert "cake_dispatch_gemm_bf16" in (summary.run_dir / "dispatch.hpp").read_text()
