"""The compile-time limits: each input past one gets its finding at once, at its place.

Integers are limited to 64 bits (CK115), integer expressions in size and depth (CK116),
a file to 256 kernels (CK117); the verifier's unrolling counts empty loop iterations,
the stage-count fix bisects, bank analysis skips buffers larger than any shared memory,
and the simulator bounds loop iterations, blocks and memory (CK510).  The limits
themselves are in docs/language.md.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from cake_core.check import check_text
from cake_core.diagnostics.model import Diagnostic
from cake_core.elab.builder import MAX_KERNELS
from cake_core.ir import symbolic as S
from cake_core.sim import interp
from cake_core.sim.engine import simulate
from cake_core.sim.program import SimKernel

ROOT = Path(__file__).resolve().parent.parent
GEMM = (ROOT / "examples" / "gemm_sm80.cake").read_text()
FIRST_LOOP = "    for p in range(STAGES - 1):"
ENDLESS = "    for q in range(10**12):\n        pass\n" + FIRST_LOOP
RULES = ROOT / "docs" / "rules"


def check(text: str) -> tuple[list[Diagnostic], float]:
    start = time.perf_counter()
    found = check_text(text, "k.cake").diagnostics
    return found, time.perf_counter() - start


def only(found: list[Diagnostic], code: str) -> Diagnostic:
    mine = [d for d in found if d.code == code]
    assert len(mine) == 1, [(d.code, d.message) for d in found]
    assert not any(d.code.startswith("CK9") for d in found)
    return mine[0]


@pytest.mark.parametrize(("text", "fragment"), [
    ("X = 10**400\n", "needs more than 64 bits"),
    ("X = 10**10**10\n", "needs more than 64 bits"),
    ("X = (-10)**10**8\n", "needs more than 64 bits"),
    ("X = 1 << 10**10\n", "needs more than 64 bits"),
    ("X = 1 << -1\n", "negative shift count"),
    ("X = 2**63 * 2**63\n", "the value needs 127 bits"),
    ("a0 = 2\n" + "".join(f"a{i + 1} = a{i} * a{i}\n" for i in range(40)),
     "the value needs 65 bits"),
])
def test_a_constant_past_64_bits_is_one_finding_at_once(text: str, fragment: str) -> None:
    found, took = check(text)
    diag = only(found, "CK115")
    assert fragment in diag.message
    assert took < 2.0
    line = text.splitlines()[diag.span.start.line]
    assert "*" in line or "<<" in line  # at the operation that overflows


def test_64_bit_constants_still_fold() -> None:
    found, _ = check("X = 2**63\nY = 1 << 63\nZ = (2**32) * (2**31) - 1\n")
    assert {d.code for d in found} == {"CK004"}  # no kernel, nothing else


def test_an_expression_that_doubles_per_name_is_refused() -> None:
    text = GEMM.replace("ktiles = cdiv(K, BK)", "ktiles = cdiv(K, BK)\n    t0 = ktiles\n" + "".join(
        f"    t{i + 1} = t{i} + t{i}\n" for i in range(40)) + "    ktiles = t40")
    found, took = check(text)
    diag = only(found, "CK116")
    assert f"limit is {S.MAX_EXPR_NODES}" in diag.message
    assert took < 2.0


def test_long_chains_fold_without_recursion() -> None:
    found, _ = check("X = " + " + ".join(["1"] * 20_000) + "\n")
    assert {d.code for d in found} == {"CK004"}
    text = GEMM.replace("ktiles = cdiv(K, BK)", "ktiles = " + " + ".join(["K"] * 600))
    diag = only(check(text)[0], "CK116")
    assert "nested 100" not in diag.message and "deep" in diag.message


def test_loops_too_long_to_unroll_are_cut_short() -> None:
    text = GEMM.replace(FIRST_LOOP, ENDLESS)
    found, took = check(text)
    assert found == [] and took < 3.0


@pytest.mark.parametrize(("old", "new"), [
    ("BM, BN, BK = 128, 128, 32", "BM, BN, BK = 2**40, 128, 32"),
    ("BM, BN, BK = 128, 128, 32", "BM, BN, BK = 128, 128, 2**40"),
    ("STAGES = 3", "STAGES = 10**9"),
])
def test_huge_buffers_are_an_overflow_not_a_hang(old: str, new: str) -> None:
    found, took = check(GEMM.replace(old, new))
    diag = only(found, "CK201")
    assert took < 3.0
    if "STAGES" in new:  # the stage fix bisects down to the largest count that fits
        fits = int(diag.notes[0].split("STAGES = ")[1].split()[0])
        assert "CK201" not in {d.code for d in check(GEMM.replace(old, f"STAGES = {fits}"))[0]}
        assert "CK201" in {d.code for d in check(GEMM.replace(old, f"STAGES = {fits + 1}"))[0]}


def test_too_many_kernels_is_one_finding_at_the_first_one_past() -> None:
    page = (RULES / "CK117.md").read_text()
    kernel = page.split("```python\n")[1].split("```")[0]
    text = "".join(kernel.replace("k0", f"k{i}") for i in range(MAX_KERNELS + 1))
    found, took = check(text)
    diag = only(found, "CK117")
    assert text.splitlines()[diag.span.start.line] == f"def k{MAX_KERNELS}():"
    assert took < 5.0
    clean = "".join(kernel.replace("k0", f"k{i}") for i in range(MAX_KERNELS))
    assert check(clean)[0] == []


def _sim(text: str) -> list[Diagnostic]:
    sk = SimKernel.from_text(text, "k.cake", "gemm_sm80")
    return simulate(sk, {"M": 64, "N": 64, "K": 64}, {}).diagnostics


def test_the_simulator_stops_an_endless_loop_at_the_loop(monkeypatch: pytest.MonkeyPatch
                                                         ) -> None:
    monkeypatch.setattr(interp, "MAX_LOOP_ITERATIONS", 1000)
    text = GEMM.replace(FIRST_LOOP, ENDLESS)
    diag = only(_sim(text), "CK510")
    assert "loop iterations" in diag.message
    assert text.splitlines()[diag.span.start.line].strip().startswith("for q in")


@pytest.mark.parametrize(("old", "new", "fragment"), [
    ("grid=(cdiv(M, BM), cdiv(N, BN))", "grid=(2**62, 2**62)", "blocks"),
    ("BM, BN, BK = 128, 128, 32", "BM, BN, BK = 2**40, 128, 32", "shared memory"),
])
def test_the_simulator_refuses_launches_it_cannot_hold(old: str, new: str,
                                                       fragment: str) -> None:
    diag = only(_sim(GEMM.replace(old, new)), "CK510")
    assert fragment in diag.message


def test_a_shape_too_large_to_simulate_is_an_error_line() -> None:
    from cake_core.sim.tasks_run import run_task
    from cake_core.tasks import load_task

    sk = SimKernel.from_text(GEMM, "k.cake", "gemm_sm80")
    report = run_task(load_task("gemm_f16_sm80"), sk,
                      shapes=[{"M": 10**8, "N": 10**8, "K": 64}], n_schedules=1)
    (shape,) = report.shapes
    assert shape.error is not None and "too large to simulate" in shape.error
