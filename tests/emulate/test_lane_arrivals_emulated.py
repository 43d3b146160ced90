"""Guarded mbarrier arrivals run as counted: the lowered CUDA of kernels the verifier
counts clean, compiled for the CPU and run (`cake run --emulate`), completes with the
right result.  The `elect_one()` case is the one that hung before: the elected arrival
was lowered with a `__syncwarp()` that waited for lanes outside the block.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from emulate_support import needs_cxx

from cake_cli.main import main
from cake_core.check import check_text

GEMM = (Path(__file__).resolve().parents[1] / "corpus" /
        "mbar_count_per_warp_short.fixed.cake").read_text(encoding="utf-8")
"""A bf16 warp-specialised GEMM over raw mbarriers: 8 consumer warps, `count=8`."""
ARRIVE = '            empty[s].arrive(per="warp")\n'
assert ARRIVE in GEMM

CASES = {
    "lane0_per_thread": ('            if lane.id == 0:\n'
                         '                empty[s].arrive(per="thread")\n', 8),
    "elect_one_role": ('            barrier_sync(1, 8)\n            with elect_one():\n'
                       '                empty[s].arrive()\n', 1),
    "per_lane_loop": ('            for j in range(lane.id // 16 + 1):\n'
                      '                empty[s].arrive(per="thread")\n', 384),
}

pytestmark = [pytest.mark.slow, needs_cxx]


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_lowered_kernel_completes_correctly(name: str, tmp_path: Path) -> None:
    body, count = CASES[name]
    text = GEMM.replace(ARRIVE, body).replace("empty = mbarrier(count=8",
                                              f"empty = mbarrier(count={count}")
    assert check_text(text, "k.cake").diagnostics == []
    path = tmp_path / f"{name}.cake"
    path.write_text(text, encoding="utf-8")
    r = CliRunner().invoke(main, ["run", str(path), "--task", "gemm_bf16", "--emulate",
                                  "--dims", "M=128,N=256,K=512"])
    assert r.exit_code == 0, r.output
    assert "1/1 shapes correct" in r.output, r.output
