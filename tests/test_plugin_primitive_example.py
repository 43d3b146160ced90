"""The third-party primitive of docs/plugins.md: one module, every facet, used end to end.

`tests/relu_plugin.py` is the module the docs show (the docs' code block must stay equal to it).
Loaded as a plugin, `relu` passes the facet completeness check, and a GEMM whose epilogue
applies it checks clean, simulates to relu(A @ B.T), is priced with its CUDA-core work,
lowers to `fmaxf` on every register of the accumulator, and compiles with nvcc.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
import relu_plugin
from kernels import GEMM_SM80 as GEMM
from kernels import simulate_gemm_sm80

from cake_core.check import check_source
from cake_core.cost.model import predict
from cake_core.diagnostics import codes
from cake_core.lower import lower_checked
from cake_core.lower.build import build_source
from cake_core.lower.toolchain import find_nvcc
from cake_core.plugins import load_plugins
from cake_core.primitives.facets import FACET_KINDS, check_facet
from cake_core.source import SourceFile

ROOT = Path(__file__).resolve().parents[1]
PLUGINS = load_plugins(include_installed=False, extra=[relu_plugin.plugin])


def _kernel(relu: bool) -> SourceFile:
    text = GEMM.replace("cast(acc, f16)", "cast(relu(acc), f16)") if relu else GEMM
    assert relu is (text != GEMM)
    return SourceFile(text, "gemm_relu.cake")


def test_the_docs_show_this_module_verbatim() -> None:
    docs = (ROOT / "docs" / "plugins.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", docs, flags=re.S)
    module = Path(relu_plugin.__file__).read_text(encoding="utf-8")
    assert module in blocks


def test_the_plugin_loads_and_its_facets_are_complete() -> None:
    assert not PLUGINS.failures
    prim = PLUGINS.registry.function("relu")
    assert prim is relu_plugin.RELU
    assert all(check_facet(prim.facets.ref(kind)) is None for kind in FACET_KINDS)


def test_a_kernel_using_it_checks_clean_and_a_wrong_dtype_is_reported() -> None:
    res = check_source(_kernel(relu=True), plugins=PLUGINS)
    assert not res.diagnostics
    bad = SourceFile(GEMM.replace("cast(acc, f16)", "relu(cast(acc, f16) < 0.0)"), "bad.cake")
    errors = check_source(bad, plugins=PLUGINS).errors
    assert [d.code for d in errors] == [codes.DTYPE_MISMATCH.code]
    assert "floating-point fragment" in errors[0].message


def test_it_simulates_to_relu_of_the_product() -> None:
    res = check_source(_kernel(relu=True), plugins=PLUGINS)
    a, b, c = simulate_gemm_sm80(res, {"M": 128, "N": 128, "K": 64}, seed=3)
    want = np.maximum(a.astype(np.float64) @ b.astype(np.float64).T, 0.0)
    got = c.astype(np.float64)
    assert (got >= 0).all() and (got == 0).any()
    np.testing.assert_allclose(got, want, rtol=2e-2, atol=2e-2)


def test_it_is_priced_as_cuda_core_work() -> None:
    dims = {"M": 4096, "N": 4096, "K": 4096}
    base, with_relu = (check_source(_kernel(relu=r), plugins=PLUGINS) for r in (False, True))
    assert base.program is not None and with_relu.program is not None
    p0 = predict(base.program.kernels[0], dims)
    p1 = predict(with_relu.program.kernels[0], dims)
    # one op per element of C: M * N in all
    assert p1.cuda_ops - p0.cuda_ops == pytest.approx(4096 * 4096)
    assert not [w for w in p1.warnings if "relu" in w]


def test_it_lowers_to_fmaxf_on_the_accumulator_registers() -> None:
    low = lower_checked(check_source(_kernel(relu=True), plugins=PLUGINS))
    assert low.cu is not None, [d.message for d in low.diagnostics]
    assert "fmaxf(" in low.cu and "0.0f)" in low.cu


@pytest.mark.nvcc
@pytest.mark.skipif(find_nvcc() is None, reason="nvcc is not installed")
def test_the_lowered_kernel_compiles(tmp_path: Path) -> None:
    rep = build_source(_kernel(relu=True), registry=PLUGINS.registry, cache=tmp_path)
    assert rep.ok, [d.message for d in rep.diagnostics]
