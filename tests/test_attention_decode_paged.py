"""Decode attention over a paged KV cache: the split kernel reads each key tile's page from
a block table and each sequence's length from memory.  It must match its task on ragged
batches (every length its own, pages in random order, unused pages full of noise), compose
with the unchanged combine kernel into decode attention over each sequence's own keys, and
fail the reference when it ignores the block table or the lengths.
"""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest
from kernel_support import assert_builds_clean, assert_emulates

from cake_core.check import check_text
from cake_core.emulate.build import host_compiler_present
from cake_core.sim import SimKernel
from cake_core.sim.engine import simulate
from cake_core.sim.tasks_run import run_task
from cake_core.tasks import load_task

ROOT = Path(__file__).resolve().parents[1]
PAGED = ROOT / "examples" / "attention_decode_split_sm90_paged.cake"
COMBINE = ROOT / "examples" / "attention_decode_combine_sm90.cake"
SRC = PAGED.read_text(encoding="utf-8")
H, HKV, G, D = 32, 8, 4, 128

PAGE_LINE = ("            pg = load_scalar(PageTable, (block.z, first + j), expect=0)"
             "   # its pool page\n")
LOGICAL_PAGE = "            pg = first + j\n"
LENGTH_LINE = "    n = load_scalar(SeqLens, (block.z,), expect=MAXPAGES * PAGE)\n"
FULL_TABLE = "    n = MAXPAGES * PAGE\n"
PAGE_256 = "PAGE = 256                        # keys per page: a multiple of BN\n"


def _task_module() -> ModuleType:
    """The task file as a module, for its input generator at other page sizes."""
    path = ROOT / "examples" / "tasks" / "attention_decode_paged.py"
    spec = importlib.util.spec_from_file_location("attention_decode_paged_task", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


TASK_MOD = _task_module()


def _split(text: str, dims: dict[str, int], x: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    res = simulate(SimKernel.from_text(text, "paged.cake"), dims, x)
    assert not [d for d in res.diagnostics if d.severity.value == "error"]
    return res.outputs


def _matches(out: dict[str, np.ndarray], want: dict[str, np.ndarray]) -> bool:
    # the task's tolerance: P is rounded to bf16 before P @ V (2^-9 relative per weight)
    return all(bool(np.all(np.abs(out[k] - want[k]) <= 2e-2 + 2e-2 * np.abs(want[k])))
               for k in ("Opart", "LSE"))


def _inputs(dims: dict[str, int], page: int = 256, seed: int = 0) -> dict[str, np.ndarray]:
    return TASK_MOD.paged_inputs(dims, np.random.default_rng(seed), page)


RAGGED = {"B": 4, "MAXPAGES": 2, "NPAGES": 11, "NSPLIT": 3}


def test_it_checks_clean() -> None:
    assert check_text(SRC, str(PAGED)).diagnostics == []


def test_the_inputs_are_ragged_and_paged() -> None:
    """What the other tests rely on: lengths of every kind and a non-identity table."""
    x = _inputs(RAGGED)
    lens = [int(n) for n in x["SeqLens"]]
    assert lens[0] % 64 and lens[-1] == 0 and lens[-2] == 1 and len(set(lens)) == 4
    table = x["PageTable"]
    assert len(set(table.reshape(-1).tolist())) == table.size          # distinct pages
    assert not np.array_equal(table[0], np.arange(table.shape[1]))     # not the identity


def test_it_matches_its_task_in_the_simulator() -> None:
    report = run_task(load_task("attention_decode_paged"), SimKernel.from_file(PAGED, PAGED.stem),
                      n_schedules=2)
    assert report.passed, [(s.dims, s.error) for s in report.shapes]
    assert len(report.shapes) >= 2


@pytest.mark.parametrize(("page", "maxpages"), [(64, 6), (128, 3)])
def test_smaller_pages_take_the_same_kernel(page: int, maxpages: int) -> None:
    """PAGE = 64 (one key tile per page, one table read per tile) and 128: the same kernel,
    one constant changed."""
    assert SRC.count(PAGE_256) == 1
    text = SRC.replace(PAGE_256, f"PAGE = {page}\n")
    dims = {"B": 3, "MAXPAGES": maxpages, "NPAGES": 3 * maxpages + 2, "NSPLIT": 4}
    x = _inputs(dims, page)
    assert _matches(_split(text, dims, x), TASK_MOD.reference(x, dims))


def test_a_kernel_that_ignores_the_page_table_fails() -> None:
    assert SRC.count(PAGE_LINE) == 1
    x = _inputs(RAGGED)
    out = _split(SRC.replace(PAGE_LINE, LOGICAL_PAGE), RAGGED, x)
    assert not _matches(out, TASK_MOD.reference(x, RAGGED))   # other sequences' pages, noise


def test_a_kernel_that_ignores_the_lengths_fails() -> None:
    assert SRC.count(LENGTH_LINE) == 1
    x = _inputs(RAGGED)
    out = _split(SRC.replace(LENGTH_LINE, FULL_TABLE), RAGGED, x)
    assert not _matches(out, TASK_MOD.reference(x, RAGGED))   # keys past the end take part


def test_the_task_catches_both_faults() -> None:
    task = load_task("attention_decode_paged")
    for text in (SRC.replace(PAGE_LINE, LOGICAL_PAGE), SRC.replace(LENGTH_LINE, FULL_TABLE)):
        assert not run_task(task, SimKernel.from_text(text, "m.cake"), n_schedules=1).passed


def _decode_reference(x: dict[str, np.ndarray]) -> np.ndarray:
    """softmax(q . k / sqrt(D)) @ v over each sequence's own keys, float64; 0 for none."""
    b, page = x["Q"].shape[0], x["K"].shape[2]
    o = np.zeros((b, HKV, G, D))
    for i in range(b):
        n = int(x["SeqLens"][i])
        if n == 0:
            continue
        pages = x["PageTable"][i, : -(-n // page)]
        k = np.concatenate([x["K"][p] for p in pages], axis=1)[:, :n].astype(np.float64)
        v = np.concatenate([np.swapaxes(x["Vt"][p], 1, 2) for p in pages],
                           axis=1)[:, :n].astype(np.float64)
        s = x["Q"][i].astype(np.float64) @ np.swapaxes(k, 1, 2) / np.sqrt(D)
        p = np.exp(s - s.max(-1, keepdims=True))
        o[i] = (p @ v) / p.sum(-1, keepdims=True)
    return o.reshape(b, H, D)


@pytest.mark.parametrize("nsplit", [1, 3, 8])
def test_split_then_combine_is_decode_attention(nsplit: int) -> None:
    """The unchanged combine kernel turns the paged partials into each sequence's decode
    attention; a length-0 sequence (all splits empty, equal LSEs) comes out as 0."""
    dims = {**RAGGED, "NSPLIT": nsplit}
    b = dims["B"]
    x = _inputs(dims, seed=nsplit)
    part = _split(SRC, dims, x)
    res = simulate(SimKernel.from_file(COMBINE, COMBINE.stem), {"B": b, "NSPLIT": nsplit},
                   {"Opart": part["Opart"].reshape(nsplit * b * H, D),
                    "LSE": part["LSE"].reshape(nsplit * b * H)})
    assert not [d for d in res.diagnostics if d.severity.value == "error"]
    got, want = res.outputs["O"], _decode_reference(x)
    assert np.all(np.isfinite(got)) and np.all(got[-1] == 0.0)
    assert np.all(np.abs(got - want) <= 2e-2 + 2e-2 * np.abs(want)), \
        float(np.abs(got - want).max())


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
def test_nvcc_builds_it_without_spills() -> None:
    assert_builds_clean(PAGED)


@pytest.mark.slow
@pytest.mark.skipif(not host_compiler_present(), reason="needs a host C++ compiler")
def test_the_emulated_lowering_matches_the_reference() -> None:
    assert_emulates(PAGED, load_task("attention_decode_paged"), RAGGED)
