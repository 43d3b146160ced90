"""A kernel whose TMA store and its wait run in `elect_one()` compiles with nvcc/ptxas."""

from __future__ import annotations

from pathlib import Path

import pytest

from cake_core.lower.build import build_source
from cake_core.lower.toolchain import find_nvcc, find_toolchain
from cake_core.source import SourceFile

ROOT = Path(__file__).resolve().parents[2]
TINY = (ROOT / "examples" / "tinygemm_sm90.cake").read_text(encoding="utf-8")
ELECTED = TINY.replace(
    "        tma_store(C.tile((BM, BN), (0, block.x)), sc)\n        tma_store_wait(0)",
    "        with elect_one():\n            tma_store(C.tile((BM, BN), (0, block.x)), sc)\n"
    "            tma_store_wait(0)  #")

pytestmark = [pytest.mark.nvcc,
              pytest.mark.skipif(find_nvcc() is None, reason="nvcc is not installed")]


def test_elect_one_compiles(tmp_path_factory: pytest.TempPathFactory) -> None:
    assert "elect_one" in ELECTED
    rep = build_source(SourceFile(ELECTED, "k.cake"), toolchain=find_toolchain(),
                       cache=tmp_path_factory.mktemp("cake-cache"))
    assert rep.ok and rep.diagnostics == [], [d.message for d in rep.diagnostics]
    (k,) = rep.kernels
    assert k.result is not None and k.result.cubin[:4] == b"\x7fELF"
