"""Portfolio mode: a winner per shape bucket and a dispatcher that picks it per shape."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from agent_support import ROOT, run, store

from cake_agents.portfolio import MergeError, build_table, dispatcher_cpp, merge_tables, select
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


def _family() -> dict[str, Any]:
    """Two tasks' tables that differ in a fixed size: head dim 64 (two buckets) and 128."""
    def table(task: str, d: int, rows: list[tuple[str, float, str]]) -> dict[str, Any]:
        return {"schema": "cake.dispatch/1", "task": task, "kernel": task, "dims": ["S", "D"],
                "buckets": [{"bucket": f"S~{int(c)},D~{d}", "center": {"S": c, "D": float(d)},
                             "symbol": sym, "kernel": sym, "shapes": [],
                             "constraints": {"D": {"equals": d},
                                             "S": {"multiple_of": 64, "max": None}}}
                            for sym, c, _ in rows]}
    return merge_tables([table("attn_d64", 64, [("a64_short", 1024.0, ""),
                                                ("a64_long", 16384.0, "")]),
                         table("attn_d128", 128, [("a128", 4096.0, "")])], "attn")


FAMILY_PROBES = [{"S": 1024, "D": 64}, {"S": 16384, "D": 64}, {"S": 4096, "D": 64},
                 {"S": 4096, "D": 128}, {"S": 1024, "D": 128}, {"S": 4096, "D": 256},
                 {"S": 100, "D": 128}]


def test_a_family_dispatcher_chooses_by_the_fixed_size_first() -> None:
    family = _family()
    assert [r["task"] for r in family["buckets"]] == ["attn_d64", "attn_d64", "attn_d128"]
    # S=1024 at D=128 is nearest the d64 short bucket, which does not take D=128; no
    # kernel takes head dim 256; S=100 is not a multiple of 64
    assert [select(family, p) for p in FAMILY_PROBES] == [0, 1, 0, 2, 2, -1, -1]


def test_tables_of_different_dims_do_not_merge() -> None:
    gemm = {**TABLE, "task": "g"}
    with pytest.raises(MergeError, match="same dims"):
        merge_tables([_family(), gemm], "x")


def test_a_fixed_size_becomes_a_dim_each_row_admits_only_at_its_value() -> None:
    bucket = type("B", (), {"key": "S~4096", "shapes": ("S=4096",), "center": {"S": 4096.0}})
    text = (ROOT / "examples" / "attention_fwd_sm90.cake").read_text()
    table = build_table(task="attention_fwd", kernel="attention_fwd_sm90", dims=["BH", "S"],
                        buckets=[bucket], winners={"S~4096": "h" * 16},
                        texts={"h" * 16: text}, scores={}, fixed={"D": 128})
    assert table["dims"] == ["BH", "S", "D"]
    (row,) = table["buckets"]
    assert row["constraints"]["D"] == {"equals": 128} and row["center"]["D"] == 128.0
    assert select(table, {"BH": 16, "S": 4096, "D": 128}) == 0
    assert select(table, {"BH": 16, "S": 4096, "D": 64}) == -1


@pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++")
def test_the_family_dispatcher_in_cpp_agrees_with_python(tmp_path: Path) -> None:
    family = _family()
    (tmp_path / "dispatch.hpp").write_text(dispatcher_cpp(family))
    calls = "\n".join(f'  std::printf("%d\\n", cake_dispatch_attn::select({p["S"]}, {p["D"]}));'
                      for p in FAMILY_PROBES)
    (tmp_path / "main.cpp").write_text(
        f'#include <cstdio>\n#include "dispatch.hpp"\nint main() {{\n{calls}\n}}\n')
    subprocess.run(["g++", "-std=c++17", "-Wall", "-Werror", "-o", str(tmp_path / "m"),
                    str(tmp_path / "main.cpp")], check=True, cwd=tmp_path)
    out = subprocess.run([str(tmp_path / "m")], capture_output=True, text=True, check=True)
    assert [int(x) for x in out.stdout.split()] == [select(family, p) for p in FAMILY_PROBES]


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
