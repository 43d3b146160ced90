"""Reusing per-kernel verifier findings gives exactly what a fresh check gives."""

from __future__ import annotations

from pathlib import Path

import pytest

from cake_core.check import check_text
from cake_core.plugins import load_plugins

ROOT = Path(__file__).resolve().parent.parent
BUGS = sorted(p for p in (ROOT / "tests" / "bugs").glob("*.cake")
              if not p.name.endswith(".fixed.cake"))


def _fresh(text: str) -> list:
    return check_text(text, "k.cake", plugins=load_plugins(include_installed=False)).diagnostics


@pytest.mark.parametrize("path", BUGS[:12], ids=lambda p: p.stem)
def test_moved_kernels_reuse_their_findings_exactly(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    ps = load_plugins(include_installed=False)
    first = check_text(text, "k.cake", plugins=ps).diagnostics
    # the same kernels two lines further down: findings reused, moved, and equal to fresh ones
    moved = "# a comment\n\n" + text
    again = check_text(moved, "k.cake", plugins=ps).diagnostics
    assert again == _fresh(moved)
    assert [d.code for d in again] == [d.code for d in first]
    assert ps.verdicts.hits >= 1 or any(d.fixes for d in first)


def test_an_edit_inside_one_kernel_reverifies_only_that_kernel() -> None:
    one = (ROOT / "examples" / "gemm_sm90.cake").read_text(encoding="utf-8")
    two = one + "\n\n" + one.split("@kernel", 1)[1].join(["@kernel", ""]).replace(
        "def gemm_sm90(", "def gemm_sm90_b(")
    ps = load_plugins(include_installed=False)
    assert check_text(two, "k.cake", plugins=ps).diagnostics == []
    broken = two.replace("wgmma_wait(0)\n        ab.release()", "ab.release()", 1)
    misses = ps.verdicts.misses
    res = check_text(broken, "k.cake", plugins=ps).diagnostics
    assert ps.verdicts.misses == misses + 1  # only the edited kernel ran the verifier again
    assert res == _fresh(broken) and res
