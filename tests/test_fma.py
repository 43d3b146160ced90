"""`fma(a, b, c)`: element-wise fused multiply-add, through every facet.

A GEMM epilogue `cast(fma(acc, acc, bias_like), f16)` checks clean, simulates to the f64
product-plus-sum rounded to f32, is priced as one CUDA-core op per element, lowers to
`__fmaf_rn` and compiles; integer operands are refused with the spelled-out alternative.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from kernels import GEMM_SM80 as GEMM
from kernels import simulate_gemm_sm80

from cake_core.check import check_source
from cake_core.cost.model import predict
from cake_core.diagnostics import codes
from cake_core.lower import lower_checked
from cake_core.lower.build import build_source
from cake_core.lower.toolchain import find_nvcc
from cake_core.source import SourceFile
from cake_core.tasks import as_dtype

EPILOGUE = "cast(acc, f16)"


def _source(expr: str) -> SourceFile:
    assert EPILOGUE in GEMM
    return SourceFile(GEMM.replace(EPILOGUE, expr), "gemm_fma.cake")


def test_fma_checks_clean_and_refuses_integers() -> None:
    assert not check_source(_source("cast(fma(acc, acc, 0.5), f16)")).diagnostics
    bad = _source("cast(fma(cast(acc, i32), 2, 1), f16)")
    errors = check_source(bad).errors
    assert [d.code for d in errors] == [codes.DTYPE_MISMATCH.code]
    assert "a * b + c" in errors[0].message


def test_fma_simulates_as_one_rounding_of_the_exact_product_plus_c() -> None:
    res = check_source(_source("cast(fma(acc, acc, -1.0), f16)"))
    a, b, c = simulate_gemm_sm80(res, {"M": 64, "N": 64, "K": 32}, seed=5)
    acc = (a.astype(np.float64) @ b.astype(np.float64).T).astype(np.float32).astype(np.float64)
    want = as_dtype((acc * acc - 1.0).astype(np.float32), "f16").astype(np.float64)
    got = c.astype(np.float64)
    np.testing.assert_allclose(got, want, rtol=1e-2, atol=1e-2)


def test_fma_is_one_cuda_core_op_per_element() -> None:
    dims = {"M": 4096, "N": 4096, "K": 4096}
    base = check_source(_source(EPILOGUE)).program
    fused = check_source(_source("cast(fma(acc, acc, 0.5), f16)")).program
    two = check_source(_source("cast(acc * acc + 0.5, f16)")).program
    assert base is not None and fused is not None and two is not None
    p0, p1, p2 = (predict(p.kernels[0], dims) for p in (base, fused, two))
    assert p1.cuda_ops - p0.cuda_ops == pytest.approx(4096 * 4096)
    assert p2.cuda_ops - p0.cuda_ops == pytest.approx(2 * 4096 * 4096)


def test_fma_lowers_to_fmaf_rn() -> None:
    low = lower_checked(check_source(_source("cast(fma(acc, acc, 0.5), f16)")))
    assert low.cu is not None, [d.message for d in low.diagnostics]
    assert "__fmaf_rn(" in low.cu


@pytest.mark.nvcc
@pytest.mark.skipif(find_nvcc() is None, reason="nvcc is not installed")
def test_fma_compiles(tmp_path: Path) -> None:
    rep = build_source(_source("cast(fma(acc, acc, 0.5), f16)"), cache=tmp_path)
    assert rep.ok, [d.message for d in rep.diagnostics]
