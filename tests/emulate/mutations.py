"""Planted lowering bugs: the mutation test of `cake run --emulate` (docs/emulation.md).

Each `Mutation` is a textual edit of the CUDA that `cake lower` writes for one example: the
kind of bug a lowering change could introduce and that the IR simulator cannot see, since
the .cake is unchanged.  The emulator must catch every one of them (a wrong result, or a
failed launch of the kind in `caught_by`) while the unmutated kernel passes at the same
dims; tests/emulate/test_mutations.py checks that, bench/emulate_bench.py tabulates it.

`count` is how many times `old` occurs in the lowered .cu.  It is asserted, so a lowering
change that removes or duplicates the pattern fails loudly instead of silently testing an
unmutated (or differently mutated) kernel; then update the catalogue to the new text.

Imported by the tests as `mutations` (tests/emulate is on sys.path) and by the bench by
path: it depends on nothing but cake_core.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from cake_core.run.results import ShapeResult

ROOT = Path(__file__).resolve().parent.parent.parent
EXAMPLES = ROOT / "examples"

#: How a mutation can be caught: a wrong result (CK701/CK702), a launch the launcher
#: refused (a size contract or an argument check), or an emulator finding of that kind.
OUTCOMES = ("wrong", "refused", "deadlock", "mbarrier", "global_bounds", "smem_bounds",
            "uninitialized_read", "proxy_fence", "barrier", "tensor_map", "collective", "trap",
            "fault")


@dataclass(frozen=True)
class Mutation:
    name: str
    """A short identifier (a test id, a row of the bench's table)."""
    example: str
    """The example's file stem under examples/ (its first kernel is mutated)."""
    task: str
    dims: Mapping[str, int] = field(hash=False)
    """A shape at which the bug shows (and the unmutated kernel passes)."""
    old: str
    new: str
    count: int
    """Occurrences of `old` in the lowered .cu; every one is replaced."""
    caught_by: tuple[str, ...]
    """The outcomes (`OUTCOMES`) that count as catching it: the first is the one seen
    when the catalogue was written, the others are equally valid diagnoses that another
    schedule may reach first."""
    why: str = ""
    """The bug in words: what goes wrong at run time."""

    @property
    def path(self) -> Path:
        return EXAMPLES / f"{self.example}.cake"


@functools.cache
def lowered(example: str) -> tuple[str, dict[str, Any]]:
    """The .cu text and launch metadata of an example's first kernel, as `cake lower`."""
    from cake_core.lower import lower_source
    from cake_core.source import SourceFile

    path = EXAMPLES / f"{example}.cake"
    res = lower_source(SourceFile.read(path, str(path.relative_to(ROOT))))
    if not res.ok or not res.kernels or res.cu is None:
        raise RuntimeError(f"{path} does not lower: {res.diagnostics}")
    return res.cu, dict(res.kernels[0].meta)


class StaleMutation(AssertionError):
    """The lowered text no longer holds the pattern a mutation edits `count` times."""


def apply(m: Mutation) -> str:
    """The mutated .cu; StaleMutation when `old` does not occur exactly `count` times."""
    cu, _ = lowered(m.example)
    found = cu.count(m.old)
    if found != m.count:
        raise StaleMutation(f"mutation {m.name}: {m.old!r} occurs {found} times in the "
                            f"lowered {m.example}.cu, the catalogue expects {m.count}; the "
                            "lowering changed: update tests/emulate/mutations.py")
    return cu.replace(m.old, m.new)


_TX = "cake_pipe_acquire(ring_acquire, ring_full, ring_empty, 8, "

MUTATIONS: tuple[Mutation, ...] = (
    Mutation(
        "wgmma_desc_lbo_sbo_swapped", "gemm_sm90", "gemm_bf16",
        {"M": 200, "N": 136, "K": 72},
        "kk * 32, 16, 1024, 1)", "kk * 32, 1024, 16, 1)", 4, ("wrong",),
        "8-row groups 16 bytes apart instead of 1024: the operands read the wrong rows"),
    Mutation(
        "wgmma_desc_swizzle_64b", "tinygemm_sm90", "gemm_bf16",
        {"M": 48, "N": 72, "K": 200},
        "kk * 32, 16, 1024, 1)", "kk * 32, 16, 1024, 2)", 2, ("wrong",),
        "the descriptor's swizzle disagrees with the one TMA wrote the tile in"),
    Mutation(
        "swizzle64_row_bit", "tinygemm_sm90", "gemm_bf16",
        {"M": 48, "N": 72, "K": 200},
        "(SPAN == 64) return off ^ (((off >> 7) & 3u) << 4);",
        "(SPAN == 64) return off ^ (((off >> 7) & 1u) << 4);", 1, ("wrong",),
        "the epilogue's generic stores disagree with the TMA store's swizzle(64)"),
    Mutation(
        "wgmma_acc_rows_off_by_8", "gemm_sm90", "gemm_bf16",
        {"M": 200, "N": 136, "K": 72},
        "lane / 4 + i * 8, gcol", "lane / 4 + (1 - i) * 8, gcol", 1, ("wrong",),
        "each thread's two row halves are stored to each other's rows"),
    Mutation(
        "parity_not_flipped", "tinygemm_sm90", "gemm_bf16",
        {"M": 16, "N": 32, "K": 1024},
        "c.stage = 0; c.phase ^= 1u;", "c.stage = 0;", 2, ("mbarrier", "deadlock"),
        "after the ring wraps, both sides wait on the parity of a phase that already "
        "completed: the producer overwrites a full stage and arrives on its barrier again"),
    Mutation(
        "expect_tx_short_one_box", "tinygemm_sm90", "gemm_bf16",
        {"M": 48, "N": 72, "K": 200},
        _TX + "12288u, true)", _TX + "8192u, true)", 1,
        ("deadlock", "mbarrier", "uninitialized_read", "wrong"),
        "W's 4 KB box is not announced: its bytes drive the transaction count below zero "
        "(the phase never completes) or land after the phase completed"),
    Mutation(
        "tensor_map_stride_plus_16", "tinygemm_sm90", "gemm_bf16",
        {"M": 48, "N": 72, "K": 200},
        "{(cuuint64_t)2 * N};", "{(cuuint64_t)2 * N + 16};", 1, ("global_bounds", "wrong"),
        "C's TMA store map strides rows by 2N + 16 bytes: its extent reaches past C (the "
        "launcher's encode finds it) and the rows would land shifted"),
    Mutation(
        "launcher_m_n_swapped", "gemm_sm90", "gemm_bf16",
        {"M": 200, "N": 136, "K": 72},
        "int M, int N, int K, cudaStream_t stream)", "int N, int M, int K, cudaStream_t stream)",
        1, ("global_bounds", "wrong"),
        "the launcher reads the caller's N as M and M as N: A's tensor map reaches past A, "
        "the grid and the bounds guards use the swapped extents"),
    Mutation(
        "cp_async_wait_2", "gemm_sm80", "gemm_f16_sm80",
        {"M": 200, "N": 136, "K": 136},
        "cake_cp_async_wait<1>();", "cake_cp_async_wait<2>();", 1,
        ("uninitialized_read", "wrong"),
        "the mma reads stage k before its cp.async group has completed"),
    Mutation(
        "mma_acc_rows_off_by_8", "gemm_sm80", "gemm_f16_sm80",
        {"M": 200, "N": 136, "K": 72},
        "lane / 4 + mt * 16 + i * 8, gcol", "lane / 4 + mt * 16 + (1 - i) * 8, gcol", 1,
        ("wrong",),
        "each thread's two row halves are stored to each other's rows"),
    Mutation(
        "fence_proxy_async_removed", "tinygemm_sm90", "gemm_bf16",
        {"M": 48, "N": 72, "K": 200},
        "    cake_fence_proxy_async();\n", "", 1, ("proxy_fence",),
        "the TMA store (async proxy) reads smem the generic proxy wrote, unfenced"),
)


def emulate(cu: str, meta: Mapping[str, Any], task_name: str, dims: Mapping[str, int], *,
            name: str, cache: Path, order: str = "both", seed: int = 0) -> ShapeResult:
    """Build `cu` for the CPU with the real runtime and run one shape under the protocol
    (two input seeds, each launched twice), with the findings at their .cake lines."""
    from cake_core.emulate.build import build_emulated
    from cake_core.run.emulated import EmulatedKernel
    from cake_core.run.host_device import HostDevice
    from cake_core.run.protocol import TimingConfig, run_shape
    from cake_core.tasks import load_task

    task = load_task(task_name)
    lib = build_emulated(cu, name=name, cache=cache)
    kernel = EmulatedKernel(lib.path, meta, seed=seed, order=order)
    kernel.prepare()
    entry = task.entry(str(meta["kernel"]), ROOT / str(meta["source"]))
    rename = dict(entry.params) if entry is not None else {}
    res = run_shape(HostDevice(), kernel, task, dict(dims), rename=rename,
                    seeds=(seed, seed + 1), timing=TimingConfig(enabled=False))
    kernel.locate(res)
    return res


def outcome(res: ShapeResult) -> str:
    """How a shape failed, as an `OUTCOMES` word (the first emulator finding's kind for a
    failed launch); "ok" when it passed, else the status."""
    if res.status == "ok" and res.correct:
        return "ok"
    if res.status == "wrong":
        return "wrong"
    for f in res.findings:
        emu = f.data.get("emulator") if isinstance(f.data, dict) else None
        if isinstance(emu, dict) and emu.get("kind"):
            return str(emu["kind"])
    if res.error and "invalid argument (1)" in res.error:
        return "refused"
    return res.status


def by_name(name: str) -> Mutation:
    for m in MUTATIONS:
        if m.name == name:
            return m
    raise KeyError(name)


__all__ = ["EXAMPLES", "MUTATIONS", "OUTCOMES", "Mutation", "StaleMutation", "apply",
           "by_name", "emulate", "lowered", "outcome"]
