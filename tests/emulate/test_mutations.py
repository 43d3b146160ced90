"""The mutation test: every planted lowering bug of `mutations.py` is caught by emulation.

The IR simulator runs the .cake, which the mutations leave unchanged, so it passes them
all; the emulator runs the lowered CUDA and must fail each one (a wrong result, or a
failed launch of the kind the catalogue records) while the unmutated kernel passes at the
same dims.  Each build costs about 3 s of g++, so the default run builds the three
examples and one mutation of each family of bugs; the rest are marked slow.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import pytest
from emulate_support import needs_cxx
from mutations import EXAMPLES, MUTATIONS, Mutation, StaleMutation, apply, emulate, lowered, outcome

from cake_core.run.results import ShapeResult
from cake_core.sim.program import SimKernel
from cake_core.sim.tasks_run import run_task
from cake_core.tasks import load_task

#: One mutation per kind of catch (wrong data, mbarrier protocol, uninitialised smem, a
#: missing fence), one per example: the default run.  The others are marked slow.
FAST = ("wgmma_desc_lbo_sbo_swapped", "parity_not_flipped", "cp_async_wait_2",
        "fence_proxy_async_removed")

#: Findings raised inside the kernel body, which the runtime places at a .cake line (a
#: tensor map that reaches past its tensor is found by the launcher, before any thread).
IN_KERNEL = ("deadlock", "mbarrier", "uninitialized_read", "proxy_fence", "smem_bounds")

#: The unmutated runs the catalogue needs: one per (example, task, dims).
BASELINES = sorted({(m.example, m.task, tuple(sorted(m.dims.items()))) for m in MUTATIONS})


def _params() -> list[object]:
    return [pytest.param(m, id=m.name, marks=() if m.name in FAST else pytest.mark.slow)
            for m in MUTATIONS]


def _base_id(base: tuple[str, str, tuple[tuple[str, int], ...]]) -> str:
    return f"{base[0]}-" + ",".join(f"{k}={v}" for k, v in base[2])


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("emu_mutations")


@pytest.fixture(scope="module")
def unmutated(cache: Path) -> dict[tuple[str, str, tuple[tuple[str, int], ...]], ShapeResult]:
    """Each unmutated example's result at each dims, run on first use (one build each)."""

    class Runs(dict[tuple[str, str, tuple[tuple[str, int], ...]], ShapeResult]):
        def __missing__(self, key: tuple[str, str, tuple[tuple[str, int], ...]]
                        ) -> ShapeResult:
            example, task, dims = key
            cu, meta = lowered(example)
            res = self[key] = emulate(cu, meta, task, dict(dims), name=example, cache=cache)
            return res

    return Runs()


def _key(m: Mutation) -> tuple[str, str, tuple[tuple[str, int], ...]]:
    return (m.example, m.task, tuple(sorted(m.dims.items())))


def _describe(res: ShapeResult) -> str:
    return f"status {res.status}, error {res.error!r}, findings " \
           f"{[f.message for f in res.findings]}"


@pytest.mark.parametrize("m", MUTATIONS, ids=[m.name for m in MUTATIONS])
def test_the_mutation_still_applies(m: Mutation) -> None:
    """Without a compiler too: a lowering change that moves the pattern fails here."""
    assert m.count >= 1 and m.old != m.new
    cu, _ = lowered(m.example)
    mutated = apply(m)
    assert mutated != cu and mutated.count(m.new) >= m.count


def test_a_stale_mutation_fails_loudly() -> None:
    m = MUTATIONS[0]
    stale = Mutation(m.name, m.example, m.task, m.dims, m.old, m.new, m.count + 1,
                     m.caught_by)
    with pytest.raises(StaleMutation, match=f"occurs {m.count} times"):
        apply(stale)


def test_mutation_names_are_unique() -> None:
    assert len({m.name for m in MUTATIONS}) == len(MUTATIONS)


@pytest.mark.parametrize("base", BASELINES, ids=[_base_id(b) for b in BASELINES])
def test_the_simulator_passes_every_example_the_mutations_edit(
        base: tuple[str, str, tuple[tuple[str, int], ...]]) -> None:
    """The .cake is unchanged: the IR says nothing about the planted bugs."""
    example, task, dims = base
    sk = SimKernel.from_file(EXAMPLES / f"{example}.cake")
    report = run_task(load_task(task), sk, shapes=[dict(dims)], n_schedules=1, seed=0)
    assert report.shapes and all(s.outcomes for s in report.shapes)
    assert report.passed, [s.error for s in report.shapes]


@needs_cxx
@pytest.mark.parametrize("m", _params())
def test_the_emulator_catches_the_mutation(
        m: Mutation, cache: Path,
        unmutated: Mapping[tuple[str, str, tuple[tuple[str, int], ...]], ShapeResult]) -> None:
    base = unmutated[_key(m)]
    assert outcome(base) == "ok", f"unmutated {m.example} at {m.dims}: {_describe(base)}"
    _, meta = lowered(m.example)
    res = emulate(apply(m), meta, m.task, m.dims, name=f"{m.example}_{m.name}", cache=cache)
    got = outcome(res)
    assert got != "ok", f"{m.name} was not caught: {_describe(res)}"
    assert got in m.caught_by, f"{m.name}: caught as {got}, expected one of " \
                               f"{m.caught_by}: {_describe(res)}"
    located = [f for f in res.findings if f.line]
    assert all(f.file == f"examples/{m.example}.cake" for f in located)
    if got in IN_KERNEL:
        assert located, f"{m.name}: no finding at a .cake line: {_describe(res)}"
