"""Disassembling a cubin for the SASS tests: `cuobjdump -sass`, from the CUDA toolkit or
from NVIDIA's pip wheels (nvidia-cuda-cuobjdump and nvidia-cuda-nvdisasm, in the dev extra)."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
from pathlib import Path

import pytest


def find_cuobjdump() -> str | None:
    found = shutil.which("cuobjdump")
    if found:
        return found
    spec = importlib.util.find_spec("nvidia")  # the namespace of NVIDIA's pip wheels
    if spec is None or spec.submodule_search_locations is None:
        return None
    for base in spec.submodule_search_locations:
        for cand in Path(base).glob("*/bin/cuobjdump"):
            return str(cand)
    return None


def sass_of(cubin: Path) -> str:
    """The SASS of `cubin`; skips the test when no cuobjdump can disassemble it."""
    tool = find_cuobjdump()
    if tool is None:
        pytest.skip("needs cuobjdump (pip install nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm)")
    # the wheel's cuobjdump finds nvdisasm (nvidia-cuda-nvdisasm) next to itself
    env = {**os.environ, "PATH": f"{Path(tool).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    sass = subprocess.run([tool, "-sass", str(cubin)], capture_output=True, text=True,
                          env=env, check=False)
    if sass.returncode != 0:
        pytest.skip(f"cuobjdump could not disassemble: {sass.stderr.strip()[:200]}")
    return sass.stdout
