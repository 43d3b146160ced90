"""Helpers for the cost-model tests: compiled kernels (cached) and GEMM variants."""

from __future__ import annotations

import sys
from functools import cache
from pathlib import Path

from cake_core.check import check_text
from cake_core.ir.kernel import Kernel

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT / "bench") not in sys.path:
    sys.path.insert(0, str(ROOT / "bench"))

from gemm_variants import Variant, sweep  # noqa: E402

__all__ = ["ROOT", "Variant", "example", "examples_present", "kernel_from_text", "sweep",
           "variant"]


@cache
def kernel_from_text(text: str, name: str) -> Kernel:
    res = check_text(text, name)
    assert not res.errors, [d.message for d in res.errors]
    assert res.program is not None
    return res.program.kernels[0]


def example(name: str) -> Kernel:
    return kernel_from_text((ROOT / "examples" / name).read_text(encoding="utf-8"), name)


def variant(bm: int, bn: int, bk: int, stages: int) -> Kernel:
    v = Variant(bm, bn, bk, stages)
    assert v.valid, v
    return kernel_from_text(v.text(), v.name + ".cake")


def examples_present() -> list[Path]:
    return sorted((ROOT / "examples").glob("*.cake"))
