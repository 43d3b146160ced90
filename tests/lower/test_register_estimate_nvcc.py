"""The one register estimate against ptxas, on every example and every tactic output.

Without setmaxnreg ptxas chooses the count, and the estimate (which the occupancy of
`cake check --resources` and `cake cost` rests on) must land within ESTIMATE_BAND of it.
With setmaxnreg ptxas reports the launch-bound ceiling, not what the roles need, so there
the like-for-like figure is the launch allocation the occupancy reserves: it must be exact.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from cake_core.check import check_text
from cake_core.diagnostics.model import apply_edits
from cake_core.hardware import get_arch
from cake_core.lower.build import build_source
from cake_core.lower.toolchain import find_nvcc, find_toolchain
from cake_core.source import SourceFile
from cake_core.verify.register_estimate import kernel_estimate, role_estimates
from cake_core.verify.registers import allocated, occupancy, register_budget
from cake_core.verify.smem_plan import smem_plan

# Builds every example and every tactic output (~150 nvcc runs): the tests marked slow.
pytestmark = [pytest.mark.nvcc, pytest.mark.slow,
              pytest.mark.skipif(find_nvcc() is None, reason="nvcc is not installed")]

ROOT = Path(__file__).resolve().parents[2]
#: estimate / ptxas measured 0.98..1.27 (docs/cost.md); the band leaves a little room.
ESTIMATE_BAND = (0.9, 1.35)
#: Kernels known to fall outside the band (with their tactic variants), and why; each must
#: still be outside, so that a better estimate shows here.
KNOWN_OUTSIDE = {
    "softmax_sm90": "a 4096-wide row per warp: 128 f32 per lane live across two reductions; "
                    "ptxas takes all 255 registers (0 spills), the estimate 217 (0.85)",
    "softmax_sm90_online": "the estimate keeps a 1024-column chunk and its exp2 both live "
                           "(104); ptxas streams the element-wise chain into the row sums "
                           "(56, 1.86)",
    "attention_decode_combine_sm90": "the estimate keeps the next split's prefetched rows and "
                                     "the accumulator all live (44); ptxas packs them in 32 "
                                     "(1.38)",
}


def _kernels() -> list[tuple[str, str]]:
    """Every example, then every variant every applicable first-party tactic offers."""
    plugin = pytest.importorskip("cake_tactics").plugin
    out: list[tuple[str, str]] = []
    for path in sorted((ROOT / "examples").glob("*.cake")):
        text = path.read_text(encoding="utf-8")
        out.append((path.stem, text))
        res = check_text(text, path.name)
        kernel = res.program.kernels[0]
        for tactic in plugin.tactics:
            if tactic.applies(kernel, res.source) is None:
                continue
            for i, params in enumerate(tactic.variants(kernel, res.source)):
                rewrite = tactic.apply(kernel, res.source, params)
                if rewrite is not None:
                    out.append((f"{path.stem}+{tactic.name}{i}", apply_edits(text, rewrite.edits)))
    return out


@pytest.fixture(scope="module")
def ratios(tmp_path_factory: pytest.TempPathFactory) -> dict[str, float]:
    """estimate / ptxas per kernel without setmaxnreg; setmaxnreg kernels checked inline."""
    cache, toolchain = tmp_path_factory.mktemp("cake-cache"), find_toolchain()
    out: dict[str, float] = {}
    for name, text in _kernels():
        rep = build_source(SourceFile(text, f"{name}.cake"), toolchain=toolchain, cache=cache)
        assert rep.ok, (name, [d.message for d in rep.diagnostics])
        kernel = check_text(text, f"{name}.cake").program.kernels[0]
        arch = get_arch(kernel.arch)
        assert arch is not None
        got = rep.kernels[0].resources
        assert got is not None and got.registers is not None, name
        budget = register_budget(kernel, arch)
        if budget.uses_setmaxnreg:
            occ = occupancy(kernel, arch, smem_plan(kernel, arch).total, budget)
            # ptxas uses the launch ceiling; occupancy counts its allocation, which rounds
            # 255 (8 warps: the per-thread maximum) up to the 256 a warp really holds
            assert got.registers == budget.launch_regs, name
            assert occ.regs_per_thread == allocated(got.registers, arch), name
            continue
        out[name] = kernel_estimate(role_estimates(kernel, arch)) / got.registers
    return out


def test_estimate_is_within_the_band_of_ptxas(ratios: dict[str, float]) -> None:
    low, high = ESTIMATE_BAND
    assert ratios
    outside = {n: round(r, 2) for n, r in ratios.items() if not low <= r <= high}
    known = {n for n in outside if n.split("+", 1)[0] in KNOWN_OUTSIDE}
    assert not set(outside) - known, {n: outside[n] for n in set(outside) - known}
    back_in = {k for k in KNOWN_OUTSIDE if k in ratios and k not in outside}
    assert not back_in, f"now within the band, drop from KNOWN_OUTSIDE: {back_in}"


def test_tactic_outputs_are_measured_too(ratios: dict[str, float]) -> None:
    assert any("+" in name for name in ratios)
