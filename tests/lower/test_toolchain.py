"""Finding nvcc, caching compiles and reading ptxas output (no real CUDA toolkit needed)."""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

import pytest

from cake_core.lower import ptxas, toolchain
from cake_core.source import SourceFile

FAKE_LOG = """\
ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'gemm' for 'sm_90a'
ptxas info    : (C7514) Potential Performance Loss: wgmma.mma_async instructions are \
serialized due to non wgmma instructions reading accumulator registers of  a wgmma between \
start and end of the pipeline stage in the function 'gemm'
ptxas info    : Function properties for gemm
    8 bytes stack frame, 16 bytes spill stores, 24 bytes spill loads
ptxas info    : Used 168 registers, used 2 barriers, 1024 bytes smem, 388 bytes cmem[0]
ptxas info    : Compile time = 12.000 ms
"""


def _script(path: Path, body: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n" + body, encoding="utf-8")
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


def _fake_nvcc(bin_dir: Path, counter: Path) -> Path:
    """An nvcc stand-in: writes a cubin to -o and the canned ptxas log to stderr."""
    log = FAKE_LOG.replace("'", "'\"'\"'")
    return _script(bin_dir / "nvcc", f"""
if [ "$1" = "--version" ]; then echo "Cuda compilation tools, release 99.9, V99.9.1"; exit 0; fi
echo run >> '{counter}'
out=""
while [ $# -gt 0 ]; do if [ "$1" = "-o" ]; then out="$2"; shift; fi; shift; done
printf 'CUBIN' > "$out"
printf '%s' '{log}' >&2
""")


needs_posix = pytest.mark.skipif(sys.platform == "win32", reason="shell-script stand-ins")


@needs_posix
def test_nvcc_on_path_comes_first(tmp_path: Path) -> None:
    nvcc = _script(tmp_path / "bin" / "nvcc", "exit 0\n")
    home = tmp_path / "cuda"
    _script(home / "bin" / "nvcc", "exit 0\n")
    env = {"PATH": str(nvcc.parent), "CUDA_HOME": str(home)}
    assert toolchain.find_nvcc(env, site_dirs=[]) == nvcc


@needs_posix
@pytest.mark.parametrize("var", ["CUDA_HOME", "CUDA_PATH"])
def test_nvcc_from_cuda_home(tmp_path: Path, var: str) -> None:
    home = tmp_path / "cuda-13.0"
    nvcc = _script(home / "bin" / "nvcc", "exit 0\n")
    _script(home / "bin" / "ptxas", "exit 0\n")
    env = {"PATH": str(tmp_path / "empty"), var: str(home)}
    assert toolchain.find_nvcc(env, site_dirs=[]) == home / "bin" / "nvcc"
    assert toolchain.find_ptxas(nvcc, env) == home / "bin" / "ptxas"


@needs_posix
@pytest.mark.parametrize("layout", ["nvidia/cu13/bin", "nvidia/cuda_nvcc/bin"])
def test_nvcc_from_the_pip_wheel(tmp_path: Path, layout: str) -> None:
    site = tmp_path / "site-packages"
    nvcc = _script(site / layout / "nvcc", "exit 0\n")
    env = {"PATH": str(tmp_path / "empty")}
    assert toolchain.find_nvcc(env, site_dirs=[tmp_path / "elsewhere", site]) == nvcc


def test_no_nvcc_anywhere(tmp_path: Path) -> None:
    env = {"PATH": str(tmp_path)}
    assert toolchain.find_nvcc(env, site_dirs=[tmp_path]) is None
    assert "pip install nvidia-cuda-nvcc" in toolchain.NOT_FOUND


def test_cache_dir_override(tmp_path: Path) -> None:
    assert toolchain.cache_dir({"CAKE_CACHE_DIR": str(tmp_path)}) == tmp_path
    assert toolchain.cache_dir({"HOME": "/h", "XDG_CACHE_HOME": "/x"}) == Path("/x/cake")
    assert toolchain.cache_dir({}).name == "cake"


def test_cache_key_covers_source_flags_and_version() -> None:
    tc = toolchain.Toolchain(Path("/bin/nvcc"), None, "V13.0.88")
    flags = toolchain.compile_flags("sm_90a")
    assert flags[:2] == ["-arch=sm_90a", "-cubin"] and "-lineinfo" in flags
    k = toolchain.cache_key("code", flags, tc)
    assert k == toolchain.cache_key("code", flags, tc)
    assert k != toolchain.cache_key("code2", flags, tc)
    assert k != toolchain.cache_key("code", toolchain.compile_flags("sm_80"), tc)
    assert k != toolchain.cache_key("code", flags, toolchain.Toolchain(Path("/bin/nvcc"), None,
                                                                       "V13.1.0"))


@needs_posix
def test_compile_runs_nvcc_once_then_hits_the_cache(tmp_path: Path) -> None:
    counter = tmp_path / "runs"
    nvcc = _fake_nvcc(tmp_path / "bin", counter)
    tc = toolchain.Toolchain(nvcc, None, "fake")
    cache = tmp_path / "cache"
    first = toolchain.compile_cu("// kernel\n", "sm_90a", toolchain=tc, cache=cache)
    assert first.ok and not first.cached and first.cubin == b"CUBIN"
    assert "Used 168 registers" in first.log
    second = toolchain.compile_cu("// kernel\n", "sm_90a", toolchain=tc, cache=cache)
    assert second.cached and second.cubin == b"CUBIN" and second.log == first.log
    assert counter.read_text().count("run") == 1
    third = toolchain.compile_cu("// other kernel\n", "sm_90a", toolchain=tc, cache=cache)
    assert not third.cached and counter.read_text().count("run") == 2
    fresh = toolchain.compile_cu("// kernel\n", "sm_90a", toolchain=tc, cache=cache,
                                 use_cache=False)
    assert not fresh.cached and counter.read_text().count("run") == 3


def test_parse_ptxas_resources_and_findings() -> None:
    funcs, findings = ptxas.parse_log(FAKE_LOG)
    g = funcs["gemm"]
    assert (g.arch, g.registers, g.barriers, g.smem_static) == ("sm_90a", 168, 2, 1024)
    assert (g.stack, g.spill_stores, g.spill_loads) == (8, 16, 24)
    assert g.cmem == {"cmem[0]": 388}
    (f,) = findings
    assert f.code == "C7514" and f.function == "gemm" and f.tool == "ptxas"


def test_ptxas_findings_become_diagnostics() -> None:
    src = SourceFile("line one\n    bogus()\n", "k.cake")
    funcs, findings = ptxas.parse_log(
        FAKE_LOG + "k.cake(2): error: identifier \"x\" is undefined\n"
        "k.cu(120): warning #177-D: variable \"y\" was declared but never referenced\n"
        "ptxas warning : (C7602) register shortage in function 'gemm'\n")
    default = src.span(0, 4)
    diags = ptxas.diagnostics(findings, funcs, src, default)
    by_code = {d.code: d for d in diags}
    assert set(by_code) == {"CK602", "CK603", "CK604", "CK605", "CK608"}
    assert src.snippet(by_code["CK602"].span) == "bogus()"  # the .cake line, unindented
    assert "generated k.cu:120" in by_code["CK608"].message
    assert by_code["CK603"].data["spill_stores"] == 16
    assert all(d.path == "k.cake" for d in diags)


def test_local_memory_without_spills_is_its_own_finding() -> None:
    src = SourceFile("x\n", "k.cake")
    log = FAKE_LOG.replace("16 bytes spill stores, 24 bytes spill loads",
                           "0 bytes spill stores, 0 bytes spill loads")
    funcs, _ = ptxas.parse_log(log)
    diags = ptxas.diagnostics([], funcs, src, src.span(0, 1))
    assert [d.code for d in diags] == ["CK606"]


def test_find_toolchain_uses_the_environment(monkeypatch: pytest.MonkeyPatch,
                                             tmp_path: Path) -> None:
    monkeypatch.setattr(toolchain, "_site_dirs", lambda: [])
    assert toolchain.find_toolchain({"PATH": str(tmp_path)}) is None
    if os.name == "posix":
        nvcc = _fake_nvcc(tmp_path / "bin", tmp_path / "runs")
        tc = toolchain.find_toolchain({"PATH": str(nvcc.parent)})
        assert tc is not None and tc.nvcc == nvcc and "99.9" in tc.version
