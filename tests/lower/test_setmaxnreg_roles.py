"""Registers when one role declares `regs=` and another does not.

The one resource model (`verify/registers.py`): every warp starts with the launch ceiling
R of `__launch_bounds__(threads, 1)`, a role with `regs=` moves to its own count, a role
without keeps R.  The lowered code, `launch_regs` in the metadata, the model `cake compile`
compares ptxas with, the cost model's occupancy and ptxas itself must all say the same.
The launch budget used to become the smallest declared count (40) with no setmaxnreg at
all, while ptxas allocated on its own.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from cake_core.check import check_text
from cake_core.cost.resources import resource_report
from cake_core.hardware import get_arch
from cake_core.lower import LowerResult, lower_source
from cake_core.lower.build import build_source, expected_registers
from cake_core.lower.toolchain import find_nvcc, find_toolchain
from cake_core.source import SourceFile
from cake_core.verify.registers import allocated, launch_registers

ROOT = Path(__file__).resolve().parents[2]


def _variant(stem: str, *edits: tuple[str, str]) -> str:
    text = (ROOT / "examples" / f"{stem}.cake").read_text(encoding="utf-8")
    for old, new in edits:
        assert old in text, old
        text = text.replace(old, new)
    return text


#: gemm_sm90 (3 warpgroups, R = 168) whose consumers set no count; a 128x128 tile keeps
#: them well inside 168, so ptxas, left alone, would pick a count of its own.
MIXED_384 = _variant(
    "gemm_sm90", ("BM, BN, BK = 128, 256, 64", "BM, BN, BK = 128, 128, 64"),
    ('role("mma", warps=range(4, 12), regs=232)', 'role("mma", warps=range(4, 12))'))
#: tinygemm (2 warpgroups, R = 255, allocated as 256) whose producer gives registers back.
MIXED_256 = _variant(
    "tinygemm_sm90",
    ('role("load", warps=range(0, 4))', 'role("load", warps=range(0, 4), regs=40)'))
KERNELS = {"mixed_384": MIXED_384, "mixed_256": MIXED_256}


def _lower(name: str) -> LowerResult:
    res = lower_source(SourceFile(KERNELS[name], f"{name}.cake"))
    assert res.cu is not None, [d.message for d in res.diagnostics]
    return res


def _setmaxnregs(cu: str) -> list[tuple[str, str, int]]:
    """(role, inc/dec, count) for every setmaxnreg call, in the order of the code."""
    out = []
    role = ""
    for line in cu.split("// ==== kernel")[1].splitlines():
        m = re.search(r'// role "(\w+)"', line)
        if m:
            role = m.group(1)
        m = re.search(r"cake_setmaxnreg_(inc|dec)<(\d+)>\(\);", line)
        if m:
            out.append((role, m.group(1), int(m.group(2))))
    return out


def test_a_role_without_regs_keeps_the_launch_ceiling() -> None:
    res = _lower("mixed_384")
    assert res.cu is not None
    assert _setmaxnregs(res.cu) == [("load", "dec", 40), ("mma", "dec", 168)]
    assert "__launch_bounds__(384, 1)" in res.cu
    meta = res.kernels[0].meta
    assert meta["launch_regs"] == 168
    assert [(r["name"], r["regs"]) for r in meta["roles"]] == [("load", 40), ("mma", None)]


def test_a_role_without_regs_states_an_allocated_count() -> None:
    """255 is no setmaxnreg count; the role keeps the 256 registers the warp is given."""
    res = _lower("mixed_256")
    assert res.cu is not None
    assert _setmaxnregs(res.cu) == [("load", "dec", 40), ("mma", "inc", 256)]
    assert res.kernels[0].meta["launch_regs"] == 255


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_metadata_and_the_models_agree(name: str) -> None:
    res = _lower(name)
    kernel = check_text(KERNELS[name], f"{name}.cake").program.kernels[0]
    arch = get_arch(kernel.arch)
    assert arch is not None
    launch = res.kernels[0].meta["launch_regs"]
    assert launch == launch_registers(kernel.threads, arch)
    assert expected_registers(kernel) == {"low": launch, "high": launch, "exact": launch}
    assert resource_report(kernel, arch).occupancy.regs_per_thread == allocated(launch, arch)


def test_the_examples_state_only_their_own_counts(
        lowered_examples: dict[str, LowerResult]) -> None:
    """Every role of the examples declares regs= (or none does): nothing extra is emitted."""
    cu = lowered_examples["gemm_sm90"].cu
    assert cu is not None
    assert _setmaxnregs(cu) == [("load", "dec", 40), ("mma", "inc", 232)]
    cu = lowered_examples["tinygemm_sm90"].cu
    assert cu is not None and _setmaxnregs(cu) == []
    assert lowered_examples["tinygemm_sm90"].kernels[0].meta["launch_regs"] is None


@pytest.mark.nvcc
@pytest.mark.skipif(find_nvcc() is None, reason="nvcc is not installed")
@pytest.mark.parametrize("name", sorted(KERNELS))
def test_ptxas_allocates_what_the_metadata_claims(name: str, tmp_path: Path) -> None:
    rep = build_source(SourceFile(KERNELS[name], f"{name}.cake"), toolchain=find_toolchain(),
                       cache=tmp_path)
    assert rep.ok, [d.message for d in rep.diagnostics]
    got = rep.kernels[0].resources
    assert got is not None and got.registers == _lower(name).kernels[0].meta["launch_regs"]
    assert got.spill_stores == 0
    assert not [d.message for d in rep.diagnostics], "no CK607 mismatch, no dropped setmaxnreg"
