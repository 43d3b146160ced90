"""Kernel texts the tests share, read from the files the project ships them in, so a
change to the canonical kernel reaches every test that exercises it."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from cake_core.check import CheckResult
from cake_core.sim import SimKernel, simulate
from cake_core.tasks import as_dtype

ROOT = Path(__file__).resolve().parents[1]

GEMM_SM90_BLOCK = ROOT / "bench" / "data" / "gemm_sm90_block.cake"
"""The warp-specialised sm_90a GEMM (TMA producer, wgmma consumer) as one block: its
constants and dims, a `# --- kernel ---` marker, then the kernel."""

GEMM_SM90 = GEMM_SM90_BLOCK.read_text(encoding="utf-8").replace("# --- kernel ---\n", "")
GEMM_SM90 = GEMM_SM90.rstrip("\n") + "\n"
"""That GEMM as one file with no marker (constants, dims, a blank line, `gemm`); it checks
clean, and tests build their variants from it by textual replacement."""

GEMM_SM80 = (ROOT / "examples" / "gemm_sm80.cake").read_text(encoding="utf-8")
"""The sm_80 GEMM example (C = A @ B.T, f16 in, f32 accumulator); tests vary its epilogue
`cast(acc, f16)` by textual replacement."""

GEMM_VARIANTS = sorted(p for p in (ROOT / "tests" / "cost" / "data").glob("gemm_*.cake")
                       if p.name != "gemm_banks_row_major_sm80.cake")
"""GEMMs built differently from the examples (persistent, prefetching, one role, mbarrier
rings, swizzled sm_80): the cost tests' kernels that check clean, that is all but the
bank-conflicted twin."""


def simulate_gemm_sm80(res: CheckResult, dims: dict[str, int], seed: int
                       ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Simulate a checked variant of GEMM_SM80 on random f16 `A` (M, K) and `B` (N, K);
    returns (A, B, C) after checking that the simulation found no error."""
    assert res.program is not None and res.parse is not None
    sk = SimKernel.prepare(res.program.kernels[0], res.source, res.parse.module)
    rng = np.random.default_rng(seed)
    a = as_dtype(rng.standard_normal((dims["M"], dims["K"])), "f16")
    b = as_dtype(rng.standard_normal((dims["N"], dims["K"])), "f16")
    out = simulate(sk, dims, {"A": a, "B": b})
    assert not [d for d in out.diagnostics if d.severity.value == "error"]
    return a, b, out.outputs["C"]
