"""Finding the host compiler, building and caching emulation libraries."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest
from emulate_support import needs_cxx

from cake_core.emulate import build as emu_build
from cake_core.emulate.build import (
    EMULATE_FLAGS,
    NO_COMPILER,
    BuildError,
    HostCompiler,
    NoHostCompilerError,
    build_emulated,
    find_host_compiler,
    headers_digest,
    runtime_missing,
)

FAKE_CXX = """#!/bin/sh
# A stand-in compiler: prints a version, records its arguments, writes the -o file.
if [ "$1" = "--version" ]; then echo "{name} (Fake) {version}"; exit 0; fi
echo "$@" >> "$(dirname "$0")/calls.log"
out=""; prev=""
for a in "$@"; do
  if [ "$prev" = "-o" ]; then out="$a"; fi
  prev="$a"
done
printf 'not really a library' > "$out"
"""


def _fake(bin_dir: Path, name: str, version: str = "9.9.9") -> Path:
    bin_dir.mkdir(parents=True, exist_ok=True)
    exe = bin_dir / name
    exe.write_text(FAKE_CXX.format(name=name, version=version))
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return exe


def _calls(bin_dir: Path) -> list[str]:
    log = bin_dir / "calls.log"
    return log.read_text().splitlines() if log.is_file() else []


# --- discovery -----------------------------------------------------------------------------
def test_cxx_then_gxx_then_clang(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    gxx = _fake(bin_dir, "g++", "12.2.0")
    clang = _fake(bin_dir, "clang++", "14.0.6")
    env = {"PATH": str(bin_dir)}
    assert find_host_compiler(env).command == (str(gxx),)
    picked = find_host_compiler({**env, "CXX": "clang++ -stdlib=libc++"})
    assert picked.command == (str(clang), "-stdlib=libc++")
    assert picked.label == "clang++ 14.0.6" and "Fake" in picked.version
    gxx.unlink()
    assert find_host_compiler(env).command == (str(clang),)


def test_no_compiler_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(NoHostCompilerError) as exc:
        find_host_compiler({"PATH": str(tmp_path)})
    assert str(exc.value) == NO_COMPILER
    assert str(exc.value) == ("no host C++ compiler (g++ or clang++) found; install one or "
                              "set CXX")
    assert isinstance(exc.value, BuildError)


def test_a_cxx_that_is_not_there_is_not_silently_replaced(tmp_path: Path) -> None:
    _fake(tmp_path / "bin", "g++")
    with pytest.raises(NoHostCompilerError, match=r"CXX=my-c\+\+ is not an executable"):
        find_host_compiler({"PATH": str(tmp_path / "bin"), "CXX": "my-c++"})


def test_label_takes_the_last_version_number() -> None:
    c = HostCompiler(("/usr/bin/g++",), "g++ (Debian 12.2.0-14+deb12u1) 12.2.0")
    assert c.label == "g++ 12.2.0" and c.name == "g++"
    assert HostCompiler(("/x/c++",), "unknown").label == "c++"


# --- the runtime folder --------------------------------------------------------------------
def test_runtime_missing_names_the_header(tmp_path: Path) -> None:
    why = runtime_missing(tmp_path)
    assert why is not None and "cake_emulate.h" in why and str(tmp_path) in why
    (tmp_path / "cake_emulate.h").write_text("// x\n")
    assert runtime_missing(tmp_path) is None


def test_headers_digest_covers_every_file_below(tmp_path: Path) -> None:
    empty = headers_digest(tmp_path)
    (tmp_path / "a.h").write_text("int a;\n")
    one = headers_digest(tmp_path)
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.h").write_text("int b;\n")
    two = headers_digest(tmp_path)
    (tmp_path / "sub" / "b.h").write_text("int c;\n")
    three = headers_digest(tmp_path)
    assert len({empty, one, two, three}) == 4
    assert headers_digest(tmp_path) == three


# --- building and the cache ----------------------------------------------------------------
def test_cache_hits_and_misses(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    cxx = find_host_compiler({"PATH": str(_fake(bin_dir, "g++").parent)})
    inc = tmp_path / "include"
    inc.mkdir()
    (inc / "cake_emulate.h").write_text("// v1\n")
    cache = tmp_path / "cache"

    def build(text: str = "int k;\n") -> tuple[Path, bool]:
        lib = build_emulated(text, name="k", compiler=cxx, cache=cache, include_dir=inc)
        return lib.path, lib.cached

    first, cached = build()
    assert not cached and first.is_file() and first.parent == cache / "lib"
    assert "-emu-" in first.name
    again, cached = build()
    assert cached and again == first and len(_calls(bin_dir)) == 1
    other, cached = build("int j;\n")  # another source
    assert not cached and other != first
    (inc / "cake_emulate.h").write_text("// v2\n")  # the runtime changed
    rebuilt, cached = build()
    assert not cached and rebuilt != first
    assert len(_calls(bin_dir)) == 3
    argv = _calls(bin_dir)[0].split()
    assert argv[: len(EMULATE_FLAGS)] == list(EMULATE_FLAGS)
    assert ["-I", str(inc)] == argv[len(EMULATE_FLAGS): len(EMULATE_FLAGS) + 2]
    assert argv[argv.index("-x") + 1] == "c++"


def test_default_include_folder_is_the_package_one(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    assert Path(emu_build.__file__).resolve().parent / "include" == emu_build.INCLUDE_DIR
    monkeypatch.setattr(emu_build, "INCLUDE_DIR", tmp_path)
    assert runtime_missing() is not None and str(tmp_path) in str(runtime_missing())


@needs_cxx
def test_a_compile_error_comes_back_with_the_log(tmp_path: Path) -> None:
    with pytest.raises(BuildError) as exc:
        build_emulated('#line 7 "k.cake"\nthis is not C++;\n', name="broken",
                       cache=tmp_path, include_dir=tmp_path)
    assert "failed (exit" in str(exc.value) and "building broken for the CPU" in str(exc.value)
    assert "k.cake:7" in exc.value.log and "error" in exc.value.log
    assert not list((tmp_path / "lib").glob("*.so"))  # nothing half-built is cached
