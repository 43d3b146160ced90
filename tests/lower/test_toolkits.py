"""Choosing the CUDA toolkit: the newest one the driver supports, and saying why."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cake_core.lower.toolkits import (
    Toolkit,
    choose_toolkit,
    driver_cuda_version,
    driver_version_from_int,
    installed_toolkits,
    parse_release,
)


def _nvcc(root: Path, version: str | None, *, release: str = "", nvvm: bool = True) -> Path:
    """A fake toolkit under `root`: bin/nvcc that prints `release`, optionally version.json
    and nvvm/."""
    (root / "bin").mkdir(parents=True)
    nvcc = root / "bin" / "nvcc"
    nvcc.write_text(f"#!/bin/sh\necho 'Cuda compilation tools, release {release}'\n")
    nvcc.chmod(0o755)
    if version is not None:
        (root / "version.json").write_text(json.dumps({"cuda": {"version": version}}))
    if nvvm:
        (root / "nvvm").mkdir()
    return nvcc


def _never(_: str) -> str:
    raise AssertionError("version.json should have been enough")


def kit(version: tuple[int, int], *, full: bool = True) -> Toolkit:
    return Toolkit(Path(f"/opt/cuda-{version[0]}.{version[1]}/bin/nvcc"), version, "test",
                   full)


def test_release_text_and_driver_integer_parse() -> None:
    assert parse_release("Cuda compilation tools, release 13.0, V13.0.88") == (13, 0)
    assert parse_release("12.8.1") == (12, 8)
    assert parse_release("no version here") is None
    assert driver_version_from_int(13000) == (13, 0)
    assert driver_version_from_int(12080) == (12, 8)
    assert driver_version_from_int(12020) == (12, 2)


def test_toolkits_are_found_under_roots_on_path_and_in_wheels(tmp_path: Path) -> None:
    usr = tmp_path / "usr"
    _nvcc(usr / "cuda-12.8", "12.8.93")
    _nvcc(usr / "cuda-13.0", "13.0.88")
    (usr / "cuda").symlink_to(usr / "cuda-13.0")  # the usual link: the same toolkit
    site = tmp_path / "site"
    _nvcc(site / "nvidia" / "cu13", None, release="13.2, V13.2.51")
    pathkit = _nvcc(tmp_path / "other", "12.4.0")
    found = installed_toolkits(env={"PATH": str(pathkit.parent)}, roots=[usr],
                               site_dirs=[site])
    assert [k.version for k in found] == [(13, 2), (13, 0), (12, 8), (12, 4)]
    assert [k.where for k in found] == ["wheel", f"{usr}/cuda*", f"{usr}/cuda*", "PATH"]
    assert len({k.nvcc.resolve() for k in found}) == 4, "a symlinked toolkit counts once"


def test_version_json_spares_running_nvcc(tmp_path: Path) -> None:
    _nvcc(tmp_path / "cuda-12.6", "12.6.3")
    (k,) = installed_toolkits(env={"PATH": ""}, roots=[tmp_path], site_dirs=[],
                              run_version=_never)
    assert k.version == (12, 6) and k.full


def test_a_wrapper_script_loses_to_the_toolkit_of_the_same_version(tmp_path: Path) -> None:
    real = _nvcc(tmp_path / "cuda-13.0", None, release="13.0, V13.0.88")
    wrap_dir = tmp_path / "wrap" / "bin"
    wrap_dir.mkdir(parents=True)
    wrapper = wrap_dir / "nvcc"
    wrapper.write_text(f"#!/bin/sh\nexec {real} \"$@\"\n")
    wrapper.chmod(0o755)
    found = installed_toolkits(env={"PATH": str(wrap_dir)}, roots=[tmp_path], site_dirs=[])
    assert [k.nvcc for k in found] == [real, wrapper]
    choice = choose_toolkit(found, (13, 0))
    assert choice.toolkit is not None and choice.toolkit.nvcc == real


def test_the_newest_toolkit_the_driver_supports_wins() -> None:
    kits = [kit((12, 8)), kit((13, 2)), kit((13, 0))]
    choice = choose_toolkit(kits, (13, 0))
    assert choice.toolkit is not None and choice.toolkit.version == (13, 0)
    assert "newest toolkit the driver supports" in choice.reason
    assert "driver: CUDA 13.0" in choice.reason and "CUDA 13.2 is newer than the driver" \
        in choice.reason
    assert choose_toolkit(kits, (13, 5)).toolkit == kit((13, 2))
    assert choose_toolkit(kits, (12, 9)).toolkit == kit((12, 8))


def test_when_every_toolkit_is_newer_the_oldest_of_the_drivers_major_is_used() -> None:
    choice = choose_toolkit([kit((12, 8)), kit((12, 6)), kit((13, 0))], (12, 4))
    assert choice.toolkit == kit((12, 6))
    assert "minor-version compatibility" in choice.reason
    none = choose_toolkit([kit((13, 0))], (12, 4))
    assert none.toolkit is None and "no toolkit fits the driver (CUDA 12.4)" in none.reason


def test_no_toolkit_or_no_driver_is_said_plainly() -> None:
    empty = choose_toolkit([], (13, 0))
    assert empty.toolkit is None and "no CUDA toolkit found" in empty.reason
    unknown = choose_toolkit([kit((12, 8)), kit((13, 0))], None)
    assert unknown.toolkit == kit((13, 0)) and "driver's CUDA version is unknown" \
        in unknown.reason


@pytest.mark.parametrize(("text", "want"), [
    ("| NVIDIA-SMI 580.82.07   Driver Version: 580.82.07   CUDA Version: 13.0 |", (13, 0)),
    ("", None),
])
def test_driver_version_falls_back_to_nvidia_smi(text: str, want: tuple[int, int] | None
                                                 ) -> None:
    assert driver_cuda_version(lambda: text, libraries=()) == want
