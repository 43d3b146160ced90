"""Kernel texts the tests share, read from the files the project ships them in, so a
change to the canonical kernel reaches every test that exercises it."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

GEMM_SM90_BLOCK = ROOT / "bench" / "data" / "gemm_sm90_block.cake"
"""The warp-specialised sm_90a GEMM (TMA producer, wgmma consumer) as one block: its
constants and dims, a `# --- kernel ---` marker, then the kernel."""

GEMM_SM90 = GEMM_SM90_BLOCK.read_text(encoding="utf-8").replace("# --- kernel ---\n", "")
GEMM_SM90 = GEMM_SM90.rstrip("\n") + "\n"
"""That GEMM as one file with no marker (constants, dims, a blank line, `gemm`); it checks
clean, and tests build their variants from it by textual replacement."""
