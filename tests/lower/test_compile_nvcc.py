"""The examples compile with nvcc/ptxas: no spills, the planned smem, the predicted registers.

Each example is compiled once per module (nvcc takes about a second per kernel) into a
private cache; the tests read the reports.  Skipped where no nvcc can be found.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from cake_core.hardware import get_arch
from cake_core.ir.types import NoneType
from cake_core.lower.build import BuildReport, build_source
from cake_core.lower.toolchain import find_nvcc, find_toolchain
from cake_core.primitives.facets import Facets, Unsupported
from cake_core.primitives.registry import Primitive, extended_registry
from cake_core.source import SourceFile
from cake_core.verify.smem_plan import smem_plan

pytestmark = [pytest.mark.nvcc,
              pytest.mark.skipif(find_nvcc() is None, reason="nvcc is not installed")]

ROOT = Path(__file__).resolve().parents[2]
STEMS = ["gemm_sm80", "gemm_sm90", "kmeans_assign_sm90", "kmeans_assign_sm90_dbuf",
         "kmeans_assign_sm90_pingpong", "tinygemm_sm90", "attention_fwd_sm90",
         "attention_fwd_sm90_pingpong", "attention_fwd_sm90_persistent",
         "attention_fwd_sm90_causal", "attention_fwd_sm90_d64",
         "attention_fwd_sm90_d256", "gemm_sm90_persistent", "grouped_gemm_sm90_routed",
         "attention_fwd_sm90_varlen",
         "attention_decode_split_sm90", "attention_decode_combine_sm90",
         "attention_decode_split_sm90_paged"]
SERIALIZED: dict[str, list[str]] = {}
"""Examples ptxas builds with serialized wgmmas (CK604), with the codes expected: none
today.  The ping-pong attention takes S a multiple of its key tile for this reason (its key
mask made ptxas serialize it; docs/kernels/attention.md, Limits)."""


def _source(stem: str) -> SourceFile:
    p = ROOT / "examples" / f"{stem}.cake"
    return SourceFile(p.read_text(encoding="utf-8"), f"examples/{p.name}")


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("cake-cache")


@pytest.fixture(scope="module")
def builds(cache: Path) -> dict[str, BuildReport]:
    tc = find_toolchain()
    return {s: build_source(_source(s), toolchain=tc, cache=cache) for s in STEMS}


@pytest.mark.parametrize("stem", STEMS)
def test_example_compiles_without_findings(stem: str, builds: dict[str, BuildReport]) -> None:
    rep = builds[stem]
    assert rep.ok, [d.message for d in rep.diagnostics]
    # no spills, no serialized wgmma, resources as predicted; one known exception
    assert [d.code for d in rep.diagnostics] == SERIALIZED.get(stem, [])
    (k,) = rep.kernels
    assert k.result is not None and k.result.cubin and k.result.cubin[:4] == b"\x7fELF"


@pytest.mark.parametrize("stem", STEMS)
def test_no_spills_and_no_stack(stem: str, builds: dict[str, BuildReport]) -> None:
    r = builds[stem].kernels[0].resources
    assert r is not None
    assert (r.spill_stores, r.spill_loads, r.stack) == (0, 0, 0)
    assert r.arch == builds[stem].kernels[0].arch


@pytest.mark.parametrize("stem", STEMS)
def test_smem_is_exactly_the_plan(stem: str, builds: dict[str, BuildReport]) -> None:
    k = builds[stem].kernels[0]
    kernel = k.lowered.kernels[0]
    src = _source(stem)
    from cake_core.check import check_text

    ir = check_text(src.text, src.path).program.kernels[0]
    plan = smem_plan(ir, get_arch(ir.arch))
    assert k.resources is not None and k.resources.smem_static == 0
    assert k.smem_total == plan.total == kernel.smem_bytes == kernel.meta["smem_bytes"]


@pytest.mark.parametrize("stem", STEMS)
def test_registers_within_the_predicted_range(stem: str, builds: dict[str, BuildReport]) -> None:
    k = builds[stem].kernels[0]
    assert k.resources is not None and k.resources.registers is not None
    exp = k.registers_expected
    assert exp["low"] <= k.resources.registers <= exp["high"]


def test_setmaxnreg_kernels_launch_at_the_budget(builds: dict[str, BuildReport]) -> None:
    for stem in ("gemm_sm90", "kmeans_assign_sm90"):
        k = builds[stem].kernels[0]
        assert k.resources is not None
        # 384 threads: 65536 / 384 rounded down to 8; the roles then move registers
        assert k.resources.registers == k.registers_expected["exact"] == 168


def test_second_compile_hits_the_cache(cache: Path, builds: dict[str, BuildReport]) -> None:
    first = builds["tinygemm_sm90"].kernels[0].result
    assert first is not None
    again = build_source(_source("tinygemm_sm90"), cache=cache).kernels[0].result
    assert again is not None and again.cached and again.key == first.key
    assert again.cubin == first.cubin


def test_nvcc_error_points_at_the_cake_line(tmp_path: Path) -> None:
    """A (plugin) lower facet that emits an undeclared identifier: nvcc's error lands on the
    .cake line of the op, through the #line directives."""
    untested = Unsupported("test primitive")
    bogus = Primitive("bogus", "sync", (), lambda ctx: NoneType(), "Emits invalid C++.",
                      plugin="test", facets=Facets(
                          cost=untested, simulate=untested,
                          lower=lambda op, ctx: "this_is_not_declared = 1;"))
    text = _source("gemm_sm80").text.replace("    cp_async_wait(0)\n",
                                             "    cp_async_wait(0)\n    bogus()\n")
    src = SourceFile(text, "examples/gemm_sm80_bad.cake")
    rep = build_source(src, registry=extended_registry([bogus]), cache=tmp_path)
    assert not rep.ok
    errors = [d for d in rep.diagnostics if d.code == "CK602"]
    assert errors and "this_is_not_declared" in errors[0].message
    assert src.snippet(errors[0].span) == "bogus()"
    assert errors[0].span.start.line + 1 == text.splitlines().index("    bogus()") + 1


@pytest.mark.parametrize("stem", ["tinygemm_sm90", "gemm_sm90_persistent"])
def test_the_launcher_builds_into_a_shared_library(stem: str, tmp_path: Path) -> None:
    """`-cubin` compiles device code only: build the host launcher too, as a runner would
    (the persistent kernel's launcher asks the runtime for the device's SM count)."""
    import subprocess

    from cake_core.lower import lower_source

    res = lower_source(_source(stem), cu_name="tiny.cu")
    assert res.cu is not None
    (tmp_path / "tiny.cu").write_text(res.cu)
    cmd = res.kernels[0].meta["build"]["shared_library"].split()
    tc = find_toolchain()
    assert tc is not None and cmd[0] == "nvcc"
    proc = subprocess.run([str(tc.nvcc), *cmd[1:]], cwd=tmp_path, capture_output=True,
                          text=True, check=False, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (tmp_path / f"lib{stem}.so").stat().st_size > 0


HOST_PROGRAM = """
#include <cstdio>
int main() {
  for (uint32_t off = 0; off < 4096; off += 16)
    printf("%u %u %u %u\\n", off, cake_swizzle<32>(off), cake_swizzle<64>(off),
           cake_swizzle<128>(off));
  printf("desc %llu\\n", (unsigned long long)cake_wgmma_desc(0x12345u, 16, 1024, 1));
  printf("desc %llu\\n", (unsigned long long)cake_wgmma_desc(0x400u + 32, 16, 512, 2));
  return 0;
}
"""


def test_helpers_agree_with_the_simulator_and_the_isa(tmp_path: Path) -> None:
    """The swizzle the generated code applies is the simulator's; the descriptor packs its
    fields where PTX ISA 9.7.15.5.1 puts them.  Runs the helpers on the host (no GPU)."""
    import subprocess

    from cake_core.lower.prelude import HEADER, render_prelude
    from cake_core.sim.layout import swizzle

    src = tmp_path / "helpers.cu"
    src.write_text(HEADER + render_prelude({"wgmma"}, set()) + HOST_PROGRAM)
    tc = find_toolchain()
    assert tc is not None
    exe = tmp_path / "helpers"
    build = subprocess.run([str(tc.nvcc), "-std=c++17", "-o", str(exe), str(src)],
                           capture_output=True, text=True, check=False, timeout=300)
    assert build.returncode == 0, build.stderr[-2000:]
    out = subprocess.run([str(exe)], capture_output=True, text=True, check=True, timeout=60)
    lines = out.stdout.splitlines()
    for line in lines[:-2]:
        off, s32, s64, s128 = (int(x) for x in line.split())
        assert (s32, s64, s128) == (swizzle(off, 32), swizzle(off, 64), swizzle(off, 128))

    def desc(addr: int, lbo: int, sbo: int, mode: int) -> int:
        return ((addr & 0x3FFFF) >> 4) | ((lbo >> 4) << 16) | ((sbo >> 4) << 32) | (mode << 62)

    assert int(lines[-2].split()[1]) == desc(0x12345, 16, 1024, 1)
    assert int(lines[-1].split()[1]) == desc(0x420, 16, 512, 2)
    # 128B swizzle, SBO 1024: the high word is 0x40000040 (mode 1 at bit 62, 64 at bit 32)
    assert desc(0, 16, 1024, 1) >> 32 == 0x40000040
