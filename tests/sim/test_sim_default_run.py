"""The default simulation, with no hand-written schedule, observes the races of a
leader-warp release (CK313) and of a TMA store whose source is overwritten too early
(CK308's miscounted or missing `tma_store_wait`, CK316's wait in the issuing thread only).

"Default" is what `cake run --sim` does: the first two schedules (round-robin, then
adversarial) on small dims.  The dims are 512 so that the deepest ring of these kernels
(6 stages of 64) wraps: a stage is refilled only from the second lap on, and a kernel
whose loop never wraps has no early release to observe.  Each bad kernel's race is
reported on both schedules, at the line the verifier names (`# expect:`): the arrival
for CK313, the write into the store's source for CK308/CK316, and the same finding on
both schedules, so `cake run --sim` shows it once.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from cake_core.sim import SimKernel, run_schedules
from cake_core.sim.inputs import default_dims, random_inputs

TESTS = Path(__file__).resolve().parents[1]
_EXPECT = re.compile(r"^# expect: (CK\d{3}) (\d+)")


def _cases() -> list[tuple[Path, str, int]]:
    out = []
    for path in sorted([*TESTS.glob("corpus/*.cake"), *TESTS.glob("bugs/*.cake")]):
        text = path.read_text(encoding="utf-8")
        m = _EXPECT.match(text)
        if m is None or path.name.endswith(".fixed.cake"):
            continue
        code = m.group(1)
        if code == "CK313" or (code in ("CK308", "CK316") and "tma_store(" in text):
            out.append((path, code, int(m.group(2))))
    return out


CASES = _cases()


def _default_run(path: Path) -> list[list[tuple[str, int, tuple[int, ...]]]]:
    sk = SimKernel.from_file(path)
    dims = default_dims(sk, 512)
    inputs = random_inputs(sk, dims, skip=("C", "Y", "out"))
    return [[(d.code, d.span.start.line + 1, tuple(r.span.start.line + 1 for r in d.related))
             for d in res.diagnostics] for res in run_schedules(sk, dims, inputs, n=2)]


def test_the_cases_cover_both_bugs() -> None:
    assert {code for _, code, _ in CASES} == {"CK308", "CK313", "CK316"}
    assert len(CASES) >= 8


@pytest.mark.parametrize(("path", "code", "line"), CASES, ids=[p.stem for p, _, _ in CASES])
def test_default_run_reports_the_race_at_the_bug(path: Path, code: str, line: int) -> None:
    per_schedule = _default_run(path)
    assert len(per_schedule) == 2
    for found in per_schedule:
        assert [(c, n) for c, n, _ in found] == [("CK501", line)], found
    assert per_schedule[0][0][:2] == per_schedule[1][0][:2]
    if code != "CK313":  # the related range is the store that still reads the source
        assert per_schedule[0] == per_schedule[1]


@pytest.mark.parametrize(("path", "code", "line"), CASES, ids=[p.stem for p, _, _ in CASES])
def test_default_run_of_the_fixed_twin_is_clean(path: Path, code: str, line: int) -> None:
    twin = path.with_name(path.stem + ".fixed.cake")
    assert _default_run(twin) == [[], []]
