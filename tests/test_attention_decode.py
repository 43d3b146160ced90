"""Decode attention as two launches: the split kernel's partials, fed to the combine kernel,
give the full decode attention.  Both run in the simulator, their composition is compared
with a float64 decode reference, and the two faults that keep each kernel well-formed but
wrong (no mask on the ragged keys; a combine without the LSE rescale) must fail it.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from cake_cli.main import main
from cake_core.check import check_text
from cake_core.emulate.build import host_compiler_present
from cake_core.sim import SimKernel
from cake_core.sim.engine import simulate
from cake_core.sim.tasks_run import run_task
from cake_core.tasks import as_dtype, load_task

ROOT = Path(__file__).resolve().parents[1]
SPLIT = ROOT / "examples" / "attention_decode_split_sm90.cake"
COMBINE = ROOT / "examples" / "attention_decode_combine_sm90.cake"
BOTH = [pytest.param(SPLIT, "attention_decode_split", id="split"),
        pytest.param(COMBINE, "attention_decode_combine", id="combine")]
H, HKV, G, D = 32, 8, 4, 128

MASK_LINE = "            s = where(lt(col_index(s) + t * BN, S), s, MASKED)   # keys past S\n"
RESCALE = "        acc = fma(acc, unsqueeze(alpha, 1), part * unsqueeze(w, 1))\n"
NO_RESCALE = "        acc = acc + part * unsqueeze(w, 1)\n"


def _decode_reference(q: np.ndarray, k: np.ndarray, vt: np.ndarray) -> np.ndarray:
    """softmax(q . k / sqrt(D)) @ v over all S keys, per sequence and query head, float64."""
    b, s = q.shape[0], k.shape[2]
    qf = q.astype(np.float64).reshape(b, HKV, G, D)
    scores = qf @ np.swapaxes(k.astype(np.float64), 2, 3) / np.sqrt(D)     # (B, HKV, G, S)
    p = np.exp(scores - scores.max(-1, keepdims=True))
    o = (p @ np.swapaxes(vt.astype(np.float64), 2, 3)) / p.sum(-1, keepdims=True)
    assert o.shape == (b, HKV, G, D) and s == vt.shape[3]
    return o.reshape(b, H, D)


def _decode(split_text: str, combine_text: str, b: int, s: int, nsplit: int,
            seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """(the two launches' O, the float64 reference) on seeded bf16 inputs."""
    rng = np.random.default_rng(seed)
    # per-head offsets on q spread the scores, so the splits' LSEs differ by several units
    q = as_dtype(rng.standard_normal((b, HKV, G, D)) * rng.uniform(0.5, 3.0, (b, HKV, G, 1)),
                 "bf16")
    k = as_dtype(rng.standard_normal((b, HKV, s, D)), "bf16")
    vt = as_dtype(rng.standard_normal((b, HKV, D, s)), "bf16")
    dims = {"B": b, "S": s, "NSPLIT": nsplit}
    split = simulate(SimKernel.from_text(split_text, "split.cake"), dims,
                     {"Q": q, "K": k, "Vt": vt})
    assert not [d for d in split.diagnostics if d.severity.value == "error"]
    # the split kernel's (NSPLIT, B, HKV, G, .) outputs are the combine's flat rows, as is
    combine = simulate(SimKernel.from_text(combine_text, "combine.cake"),
                       {"B": b, "NSPLIT": nsplit},
                       {"Opart": split.outputs["Opart"].reshape(nsplit * b * H, D),
                        "LSE": split.outputs["LSE"].reshape(nsplit * b * H)})
    assert not [d for d in combine.diagnostics if d.severity.value == "error"]
    return combine.outputs["O"], _decode_reference(q, k, vt)


def _close(got: np.ndarray, want: np.ndarray) -> bool:
    # O is a convex combination of V rows (|V| ~ 1); P is rounded to bf16 before P @ V
    # and O to bf16: the attention tolerance
    return bool(np.all(np.abs(got - want) <= 2e-2 + 2e-2 * np.abs(want)))


SRC = {p: p.read_text(encoding="utf-8") for p in (SPLIT, COMBINE)}


@pytest.mark.parametrize(("b", "s", "nsplit"), [
    (1, 296, 4),    # 5 key tiles, 2 per split: split 2 has a 40-key tile, split 3 no key
    (3, 200, 3),    # a 8-key last tile in split 1, split 2 empty
    (2, 256, 1),    # one split: the combine only divides by its weight
    (1, 512, 8),    # one tile per split
])
def test_split_then_combine_is_decode_attention(b: int, s: int, nsplit: int) -> None:
    got, want = _decode(SRC[SPLIT], SRC[COMBINE], b, s, nsplit)
    assert got.shape == want.shape == (b, H, D)
    assert _close(got, want), float(np.abs(got - want).max())


def test_the_composition_needs_the_ragged_mask() -> None:
    assert SRC[SPLIT].count(MASK_LINE) == 1
    got, want = _decode(SRC[SPLIT].replace(MASK_LINE, ""), SRC[COMBINE], 1, 296, 4)
    assert not _close(got, want)   # zero-filled keys score 0 and take part in the softmax


def test_the_composition_needs_the_rescale_by_the_max() -> None:
    assert SRC[COMBINE].count(RESCALE) == 1
    got, want = _decode(SRC[SPLIT], SRC[COMBINE].replace(RESCALE, NO_RESCALE), 1, 296, 4)
    assert not _close(got, want)   # weights of splits before a larger max are not scaled down


@pytest.mark.parametrize(("path", "task"), BOTH)
def test_it_checks_clean(path: Path, task: str) -> None:
    assert check_text(SRC[path], str(path)).diagnostics == []


@pytest.mark.parametrize(("path", "task"), BOTH)
def test_each_kernel_matches_its_task_in_the_simulator(path: Path, task: str) -> None:
    report = run_task(load_task(task), SimKernel.from_file(path, path.stem), n_schedules=2)
    assert report.passed, [(s.dims, s.error) for s in report.shapes]
    assert len(report.shapes) >= 2


def test_each_task_catches_its_kernels_fault() -> None:
    split = run_task(load_task("attention_decode_split"),
                     SimKernel.from_text(SRC[SPLIT].replace(MASK_LINE, ""), "s.cake"),
                     n_schedules=1)
    combine = run_task(load_task("attention_decode_combine"),
                       SimKernel.from_text(SRC[COMBINE].replace(RESCALE, NO_RESCALE),
                                           "c.cake"), n_schedules=1)
    assert not split.passed and not combine.passed


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
@pytest.mark.parametrize(("path", "task"), BOTH)
def test_nvcc_builds_it_without_spills(path: Path, task: str) -> None:
    out = CliRunner().invoke(main, ["compile", str(path)])
    assert out.exit_code == 0, out.output
    assert "spills 0 B stores / 0 B loads" in out.output, out.output


@pytest.mark.slow
@pytest.mark.skipif(not host_compiler_present(), reason="needs a host C++ compiler")
@pytest.mark.parametrize(("path", "task"), BOTH)
def test_the_emulated_lowering_matches_the_reference(path: Path, task: str) -> None:
    out = CliRunner().invoke(main, ["run", str(path), "--task", task, "--emulate"])
    assert out.exit_code == 0, out.output
    assert "shapes correct" in out.output and " 0/" not in out.output, out.output
