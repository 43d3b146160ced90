"""GEMM tile-configuration variants of the sm_90a template, as .cake text.

Each variant rewrites the template's two constant lines: tile sizes (BM, BN, BK), pipeline
stages, the number of consumer warpgroups, the setmaxnreg split and the swizzle span that
matches BK.  Only configurations a real kernel could use are generated: shared memory
within the 227 KB opt-in limit, and the accumulator plus addressing within the consumers'
setmaxnreg share of the register file.
Used by bench/cost_bench.py (the comparison with nvMatmulHeuristics) and tests/cost.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

TEMPLATE = Path(__file__).resolve().parent / "data" / "gemm_sm90_template.cake"
SMEM_LIMIT = 232448
_LINE1 = re.compile(r"^BM, BN, BK, STAGES = .*$", re.M)
_LINE2 = re.compile(r"^WARPS, LOAD_REGS, MMA_REGS, SWIZZLE = .*$", re.M)


@dataclass(frozen=True, slots=True)
class Variant:
    bm: int
    bn: int
    bk: int
    stages: int

    @property
    def name(self) -> str:
        return f"gemm_{self.bm}x{self.bn}x{self.bk}_s{self.stages}"

    @property
    def consumer_warpgroups(self) -> int:
        return self.bm // 64  # one 64-row slab of the accumulator per warpgroup

    @property
    def warps(self) -> int:
        return 4 + 4 * self.consumer_warpgroups

    @property
    def smem_bytes(self) -> int:
        return self.stages * (self.bm + self.bn) * self.bk * 2 + 2 * self.stages * 8

    @property
    def acc_regs(self) -> int:
        return self.bm * self.bn // (self.consumer_warpgroups * 128)

    @property
    def regs(self) -> tuple[int, int]:
        """(load, mma) setmaxnreg values: the consumers get their accumulator plus 56
        registers of headroom, within what the launch pool of the block leaves them."""
        threads = self.warps * 32
        launch = min(255, 65536 // threads // 8 * 8)
        pool = launch * self.warps
        mma_warps = self.warps - 4
        cap = min(240, (pool - 4 * 40) // mma_warps // 8 * 8)
        return 40, min(cap, -(-(self.acc_regs + 56) // 8) * 8)

    @property
    def valid(self) -> bool:
        return self.smem_bytes <= SMEM_LIMIT and self.acc_regs + 32 <= self.regs[1]

    def text(self) -> str:
        base = TEMPLATE.read_text(encoding="utf-8")
        load, mma = self.regs
        swizzle = self.bk * 2 if self.bk * 2 in (32, 64, 128) else 128
        base = _LINE1.sub(f"BM, BN, BK, STAGES = {self.bm}, {self.bn}, {self.bk}, "
                          f"{self.stages}", base)
        return _LINE2.sub(f"WARPS, LOAD_REGS, MMA_REGS, SWIZZLE = {self.warps}, {load}, "
                          f"{mma}, {swizzle}", base)


def all_variants() -> list[Variant]:
    """Every valid configuration of the sweep, in a fixed order."""
    out = []
    for bm in (64, 128, 256):
        for bn in (64, 128, 256):
            for bk in (64, 32):
                for stages in (2, 3, 4, 5, 6, 8):
                    v = Variant(bm, bn, bk, stages)
                    if v.valid:
                        out.append(v)
    return out


def sweep(limit: int | None = None) -> list[Variant]:
    """A spread of configurations: every tile shape at BK=64 with 2, 3, 4 and the deepest
    stage count that fits, plus BK=32 at 4 stages."""
    chosen: list[Variant] = []
    by_tile: dict[tuple[int, int, int], list[Variant]] = {}
    for v in all_variants():
        by_tile.setdefault((v.bm, v.bn, v.bk), []).append(v)
    for (_bm, _bn, bk), vs in by_tile.items():
        stages = {v.stages: v for v in vs}
        picks = [2, 3, 4, max(stages)] if bk == 64 else [4]
        for s in picks:
            if s in stages and stages[s] not in chosen:
                chosen.append(stages[s])
    return chosen[:limit] if limit else chosen
