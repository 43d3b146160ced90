"""CAKE's hardware table: one place for every architecture and GPU figure the compiler uses.

Checks (feature gates, smem and register budgets) and cost models (roofline peaks) read these
numbers from here so that a corrected figure is corrected everywhere at once. The module holds
plain data and a few lookups only, so importing it stays cheap for the CLI and the language
server. Every figure is cited in ``docs/hardware.md`` under the keys listed in
``GpuSpec.sources``; ``tests/test_hardware.py`` checks the figures against each other.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field
from enum import StrEnum

_KB = 1024
_MB = 1024 * _KB
_GB = 1024 * _MB


class Feature(StrEnum):
    """Hardware capabilities that gate CAKE primitives.

    Named after the PTX instruction family they unlock, because ptxas is the authority that
    accepts or rejects a target, and that is what a diagnostic has to predict.
    """

    MMA_SYNC = "mma_sync"
    LDMATRIX = "ldmatrix"
    CP_ASYNC = "cp_async"
    MBARRIER = "mbarrier"
    MBARRIER_TX = "mbarrier_tx"
    TMA = "tma"
    WGMMA = "wgmma"
    SETMAXNREG = "setmaxnreg"
    CLUSTERS = "clusters"
    TCGEN05 = "tcgen05"
    TMEM = "tmem"
    BF16 = "bf16"
    FP8 = "fp8"
    STMATRIX = "stmatrix"


@dataclass(frozen=True)
class ArchSpec:
    """Per-SM limits and instruction availability of one compilation target."""

    name: str
    compute_capability: tuple[int, int]
    features: frozenset[Feature]
    smem_per_sm: int
    smem_per_block_optin: int
    smem_static_limit: int
    smem_reserved_per_block: int
    smem_alloc_granularity: int
    regs_per_sm: int
    max_regs_per_thread: int
    reg_alloc_granularity: int
    max_threads_per_sm: int
    max_warps_per_sm: int
    max_blocks_per_sm: int
    max_threads_per_block: int
    max_cluster_size: int
    setmaxnreg_range: tuple[int, int] | None
    dtypes: frozenset[str]

    def has(self, feature: Feature) -> bool:
        return feature in self.features


@dataclass(frozen=True)
class GpuSpec:
    """One product's throughput figures, for roofline estimates on a given architecture.

    Peaks are dense (no structured sparsity): NVIDIA datasheets often headline the sparse
    figure, which is twice the dense one and never reached by ordinary GEMMs.
    """

    name: str
    arch: str
    sms: int
    l2_bytes: int
    hbm_bytes: int
    hbm_bandwidth: float
    clock_hz: float
    l2_bandwidth: float
    """L2 -> SM read bandwidth of the whole chip, bytes per second (docs/hardware.md says
    which figures are published and which are assumptions)."""
    tensor_peak: dict[str, float] = field(hash=False)
    fp32_peak: float
    achievable: dict[str, float] = field(hash=False)
    sources: tuple[str, ...]


_F = Feature
_AMPERE = frozenset({_F.MMA_SYNC, _F.LDMATRIX, _F.CP_ASYNC, _F.MBARRIER, _F.BF16})
_HOPPER = _AMPERE | {_F.FP8, _F.STMATRIX, _F.MBARRIER_TX, _F.TMA, _F.CLUSTERS}
_AMPERE_DTYPES = frozenset({"f16", "bf16", "tf32", "i8"})
_FP8_DTYPES = _AMPERE_DTYPES | {"e4m3", "e5m2"}


def _arch(
    name: str,
    cc: tuple[int, int],
    features: frozenset[Feature],
    *,
    smem_per_sm_kb: int,
    static_limit: int,
    threads_per_sm: int,
    blocks_per_sm: int,
    dtypes: frozenset[str],
) -> ArchSpec:
    """Build an ArchSpec from the figures that differ between targets.

    The opt-in per-block limit is derived (per-SM capacity minus the 1 KB the driver reserves
    per block) rather than typed in, so the two cannot drift apart.
    """
    reserved = 1 * _KB
    smem = smem_per_sm_kb * _KB
    clusters = Feature.CLUSTERS in features
    return ArchSpec(
        name=name,
        compute_capability=cc,
        features=features,
        smem_per_sm=smem,
        smem_per_block_optin=smem - reserved,
        smem_static_limit=static_limit,
        smem_reserved_per_block=reserved,
        smem_alloc_granularity=128,
        regs_per_sm=65536,
        max_regs_per_thread=255,
        reg_alloc_granularity=256,
        max_threads_per_sm=threads_per_sm,
        max_warps_per_sm=threads_per_sm // 32,
        max_blocks_per_sm=blocks_per_sm,
        max_threads_per_block=1024,
        max_cluster_size=8 if clusters else 1,
        setmaxnreg_range=(24, 256) if Feature.SETMAXNREG in features else None,
        dtypes=dtypes,
    )


_STATIC_48K = 48 * _KB
_STATIC_OPTIN = 232448

ARCHES: dict[str, ArchSpec] = {
    a.name: a
    for a in (
        _arch(
            "sm_80",
            (8, 0),
            _AMPERE,
            smem_per_sm_kb=164,
            static_limit=_STATIC_48K,
            threads_per_sm=2048,
            blocks_per_sm=32,
            dtypes=_AMPERE_DTYPES,
        ),
        _arch(
            "sm_86",
            (8, 6),
            _AMPERE,
            smem_per_sm_kb=100,
            static_limit=_STATIC_48K,
            threads_per_sm=1536,
            blocks_per_sm=16,
            dtypes=_AMPERE_DTYPES,
        ),
        _arch(
            "sm_89",
            (8, 9),
            _AMPERE | {_F.FP8},
            smem_per_sm_kb=100,
            static_limit=_STATIC_48K,
            threads_per_sm=1536,
            blocks_per_sm=24,
            dtypes=_FP8_DTYPES,
        ),
        _arch(
            "sm_90",
            (9, 0),
            _HOPPER,
            smem_per_sm_kb=228,
            static_limit=_STATIC_48K,
            threads_per_sm=2048,
            blocks_per_sm=32,
            dtypes=_FP8_DTYPES,
        ),
        _arch(
            "sm_90a",
            (9, 0),
            _HOPPER | {_F.WGMMA, _F.SETMAXNREG},
            smem_per_sm_kb=228,
            static_limit=_STATIC_OPTIN,
            threads_per_sm=2048,
            blocks_per_sm=32,
            dtypes=_FP8_DTYPES,
        ),
        _arch(
            "sm_100a",
            (10, 0),
            _HOPPER | {_F.SETMAXNREG, _F.TCGEN05, _F.TMEM},
            smem_per_sm_kb=228,
            static_limit=_STATIC_OPTIN,
            threads_per_sm=2048,
            blocks_per_sm=32,
            dtypes=_FP8_DTYPES,
        ),
    )
}

_T = 1e12

GPUS: dict[str, GpuSpec] = {
    g.name: g
    for g in (
        GpuSpec(
            name="A100-SXM4-80GB",
            arch="sm_80",
            sms=108,
            l2_bytes=40 * _MB,
            hbm_bytes=80 * _GB,
            hbm_bandwidth=2.039e12,
            clock_hz=1.41e9,
            l2_bandwidth=5120 * 1.41e9,  # whitepaper: 5120 B/clk [A100WP]
            tensor_peak={"f16": 312 * _T, "bf16": 312 * _T, "tf32": 156 * _T, "i8": 624 * _T},
            fp32_peak=19.5 * _T,
            achievable={"bf16": 0.869},
            sources=("A", "A100WP", "H", "K", "S"),
        ),
        GpuSpec(
            name="A10",
            arch="sm_86",
            sms=72,
            l2_bytes=6 * _MB,
            hbm_bytes=24 * _GB,
            hbm_bandwidth=600e9,
            clock_hz=1.695e9,
            l2_bandwidth=48 * 72 * 1.695e9,  # assumption: the A100's 48 B/clk per SM
            tensor_peak={"f16": 125 * _T, "bf16": 125 * _T, "tf32": 62.5 * _T, "i8": 250 * _T},
            fp32_peak=31.2 * _T,
            achievable={},
            sources=("A10DS", "TPU-A10", "GA102WP"),
        ),
        GpuSpec(
            name="L40S",
            arch="sm_89",
            sms=142,
            l2_bytes=96 * _MB,
            hbm_bytes=48 * _GB,
            hbm_bandwidth=864e9,
            clock_hz=2.52e9,
            l2_bandwidth=48 * 142 * 2.52e9,  # assumption: the A100's 48 B/clk per SM
            tensor_peak={
                "f16": 362.05 * _T,
                "bf16": 362.05 * _T,
                "tf32": 183 * _T,
                "e4m3": 733 * _T,
                "e5m2": 733 * _T,
                "i8": 733 * _T,
            },
            fp32_peak=91.6 * _T,
            achievable={},
            sources=("L40SDS", "TPU-L40S", "ADAWP"),
        ),
        GpuSpec(
            name="H100-SXM5",
            arch="sm_90a",
            sms=132,
            l2_bytes=50 * _MB,
            hbm_bytes=80 * _GB,
            hbm_bandwidth=3.35e12,
            clock_hz=1.83e9,
            l2_bandwidth=48 * 132 * 1.83e9,  # assumption (A100 per-SM rate); >= 8.1e12 measured
            tensor_peak={
                "f16": 989.4 * _T,
                "bf16": 989.4 * _T,
                "tf32": 494.7 * _T,
                "e4m3": 1978.9 * _T,
                "e5m2": 1978.9 * _T,
                "i8": 1978.9 * _T,
            },
            fp32_peak=66.9 * _T,
            achievable={"bf16": 0.803, "e4m3": 0.709, "hbm": 0.92},
            sources=("B", "F", "H100DS", "S", "T"),
        ),
        GpuSpec(
            name="H200-SXM",
            arch="sm_90a",
            sms=132,
            l2_bytes=50 * _MB,
            hbm_bytes=141 * _GB,
            hbm_bandwidth=4.8e12,
            clock_hz=1.83e9,
            l2_bandwidth=48 * 132 * 1.83e9,  # assumption (A100 per-SM rate); >= 8.1e12 measured
            tensor_peak={
                "f16": 989.4 * _T,
                "bf16": 989.4 * _T,
                "tf32": 494.7 * _T,
                "e4m3": 1978.9 * _T,
                "e5m2": 1978.9 * _T,
                "i8": 1978.9 * _T,
            },
            fp32_peak=66.9 * _T,
            achievable={"bf16": 0.803, "e4m3": 0.734},
            sources=("B", "C", "F", "S"),
        ),
        GpuSpec(
            name="B200",
            arch="sm_100a",
            sms=148,
            l2_bytes=int(126.5 * _MB),
            hbm_bytes=180 * _GB,
            hbm_bandwidth=7.7e12,
            clock_hz=1.86e9,
            l2_bandwidth=48 * 148 * 1.86e9,  # assumption: the A100's 48 B/clk per SM
            tensor_peak={
                "f16": 2250 * _T,
                "bf16": 2250 * _T,
                "tf32": 1100 * _T,
                "e4m3": 4500 * _T,
                "e5m2": 4500 * _T,
                "i8": 4500 * _T,
            },
            fp32_peak=75 * _T,
            achievable={"bf16": 0.776, "e4m3": 0.763},
            sources=("D", "E", "G", "J", "S"),
        ),
    )
}

DEFAULT_GPU: dict[str, str] = {
    "sm_80": "A100-SXM4-80GB",
    "sm_86": "A10",
    "sm_89": "L40S",
    "sm_90": "H100-SXM5",
    "sm_90a": "H100-SXM5",
    "sm_100a": "B200",
}

_GPU_ALIASES: dict[str, str] = {
    "a100": "A100-SXM4-80GB",
    "a10": "A10",
    "l40s": "L40S",
    "h100": "H100-SXM5",
    "h200": "H200-SXM",
    "b200": "B200",
}

_ARCH_RE = re.compile(r"^(?:sm)?_?(\d+)([a-z]?)$")


def _normalise_arch(name: str) -> str:
    """Map the spellings people type ("90a", "sm90a", "SM_90A") onto the canonical key."""
    text = name.strip().lower()
    match = _ARCH_RE.match(text)
    return f"sm_{match.group(1)}{match.group(2)}" if match else text


def get_arch(name: str) -> ArchSpec | None:
    return ARCHES.get(_normalise_arch(name))


def arch_names() -> list[str]:
    return list(ARCHES)


def get_gpu(name: str) -> GpuSpec | None:
    key = name.strip().lower()
    for gpu_name, spec in GPUS.items():
        if gpu_name.lower() == key:
            return spec
    alias = _GPU_ALIASES.get(key)
    return GPUS[alias] if alias else None


def default_gpu(arch: str) -> GpuSpec:
    """The GPU whose figures a cost estimate uses when only the target is known.

    Raises KeyError for an unknown arch: a caller reaching here has already validated it.
    """
    spec = get_arch(arch)
    if spec is None:
        raise KeyError(f"unknown architecture {arch!r}")
    return GPUS[DEFAULT_GPU[spec.name]]


def suggest_arch(name: str) -> str | None:
    """Closest known arch for a "did you mean" hint, or None when nothing is close."""
    matches = difflib.get_close_matches(_normalise_arch(name), arch_names(), n=1, cutoff=0.6)
    return matches[0] if matches else None
