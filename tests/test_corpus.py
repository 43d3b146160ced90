"""The planted-bug corpus (tests/corpus): each bad kernel gives exactly its one finding, at
its line, and each fixed twin checks clean.

`tests/corpus/NAME.cake` starts with `# expect: CODE LINE`; `NAME.fixed.cake` is the same
kernel without the bug.  The files come from tests/corpus/make_corpus.py, which plants
each bug by an edit of a correct kernel, so the expected line is where the bug was put,
not what the checker happened to say.  A case the checker misses stays in the corpus as
a strict xfail naming the gap: when the rule learns the case, the xfail turns into a
failure and the entry must go.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from cake_core.check import check_text

CORPUS = Path(__file__).resolve().parent / "corpus"
_EXPECT = re.compile(r"^# expect: (CK\d{3}) (\d+)\s*$")

# Known gaps of the checker, case by case (see the report in CHANGELOG.md).
KNOWN_GAPS: dict[str, str] = {}


def _expectation(path: Path) -> tuple[str, int]:
    first = path.read_text(encoding="utf-8").split("\n", 1)[0]
    m = _EXPECT.match(first)
    assert m is not None, f"{path.name}: first line must be `# expect: CODE LINE`"
    return m.group(1), int(m.group(2))


BAD = sorted(p for p in CORPUS.glob("*.cake") if not p.name.endswith(".fixed.cake"))


def _param(path: Path) -> object:
    reason = KNOWN_GAPS.get(path.stem)
    marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
    return pytest.param(path, id=path.stem, marks=marks)


def _found(path: Path) -> list[tuple[str, int, str]]:
    result = check_text(path.read_text(encoding="utf-8"), str(path))
    return [(d.code, d.span.start.line + 1, d.message) for d in result.diagnostics]


def test_corpus_is_big_and_covers_the_families() -> None:
    assert len(BAD) >= 60
    codes = {_expectation(p)[0] for p in BAD}
    assert {"CK301", "CK302", "CK303", "CK306", "CK307", "CK308", "CK309", "CK310", "CK312",
            "CK313", "CK314", "CK315", "CK316", "CK317", "CK318", "CK201", "CK202", "CK401",
            "CK402", "CK106", "CK311"} <= codes
    assert set(KNOWN_GAPS) <= {p.stem for p in BAD}, "a gap names a case that is gone"


@pytest.mark.parametrize("path", [_param(p) for p in BAD])
def test_bad_kernel_gives_exactly_its_finding(path: Path) -> None:
    code, line = _expectation(path)
    found = _found(path)
    assert [(c, n) for c, n, _ in found] == [(code, line)], found


@pytest.mark.parametrize("path", BAD, ids=[p.stem for p in BAD])
def test_fixed_twin_is_clean(path: Path) -> None:
    twin = path.with_name(path.stem + ".fixed.cake")
    assert twin.is_file(), f"{path.name} has no fixed twin"
    assert _found(twin) == []


@pytest.mark.slow
@pytest.mark.parametrize("path", BAD, ids=[p.stem for p in BAD])
def test_fixed_twin_simulates_clean(path: Path) -> None:
    """The simulator agrees the twin is right: no dynamic (CK5xx) finding on small dims."""
    from cake_core.sim import SimKernel, run_schedules
    from cake_core.sim.inputs import default_dims, random_inputs

    twin = path.with_name(path.stem + ".fixed.cake")
    sk = SimKernel.from_text(twin.read_text(encoding="utf-8"), str(twin))
    dims = default_dims(sk, 256)
    outputs = tuple(p for p in ("C", "Y", "out") if p in twin.read_text(encoding="utf-8"))
    inputs = random_inputs(sk, dims, skip=outputs)
    found = {d.code for r in run_schedules(sk, dims, inputs, n=1) for d in r.diagnostics}
    assert not {c for c in found if c.startswith("CK5")}, sorted(found)
