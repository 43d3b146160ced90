"""A lane, warp or thread guard on an arrival means what it says, in every view of it.

`cake_core/verify/arrivers.py` counts a guarded arrival from the threads its condition
admits; the simulator (`cake_core/sim/lanes.py`) runs the same threads; the lowering
emits the arrival inside the same `if`.  Each case below is checked statically and, where
it is correct, simulated and lowered, so the three stay one answer.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from cake_core.check import check_text
from cake_core.lower import lower_source
from cake_core.sim import SimKernel, run_schedules
from cake_core.sim.inputs import default_dims, random_inputs
from cake_core.source import SourceFile

GEMM = (Path(__file__).resolve().parent / "corpus" /
        "mbar_leader_arrive_gemm.fixed.cake").read_text(encoding="utf-8")
"""A warp-specialised GEMM over raw mbarriers: 8 consumer warps (256 threads, warps
4-11) hand each stage back with `empty[s].arrive(per="warp")` on `mbarrier(count=8)`."""
ARRIVE = '            empty[s].arrive(per="warp")\n'
COUNT = "empty = mbarrier(count=8"
assert ARRIVE in GEMM and COUNT in GEMM


def kernel(body: str, count: int) -> str:
    """The GEMM with the consumers' arrival replaced by `body` and the count by `count`."""
    return GEMM.replace(ARRIVE, body).replace(COUNT, f"empty = mbarrier(count={count}")


def findings(text: str) -> list[tuple[str, int]]:
    return [(d.code, d.span.start.line + 1) for d in check_text(text, "k.cake").diagnostics]


def message(text: str) -> str:
    [d] = check_text(text, "k.cake").diagnostics
    return d.message


def line_of(text: str, needle: str) -> int:
    return next(i for i, s in enumerate(text.split("\n"), 1) if needle in s)


def simulated(text: str) -> list[str]:
    sk = SimKernel.from_text(text, "k.cake")
    dims = default_dims(sk, 512)  # K = 512: the 6-stage ring wraps
    results = run_schedules(sk, dims, random_inputs(sk, dims, skip=("C",)), n=2,
                            blocks=[(0, 0)])
    return sorted({d.code for r in results for d in r.diagnostics})


def lowered(text: str) -> str:
    res = lower_source(SourceFile(text, "k.cake"))
    assert res.cu is not None, [d.message for d in res.diagnostics]
    return res.cu.split("__global__", 1)[1]


MEET = "            barrier_sync(1, 8)\n"
"""The consumer warps meet: an arrival some warps make then vouches for all of them."""
LANE0 = '            if lane.id == 0:\n                empty[s].arrive(per="thread")\n'
WARP0 = MEET + '            if warp.rank == 0:\n                empty[s].arrive(per="thread")\n'
FIRST = MEET + '            if thread.id == 128:\n                empty[s].arrive(per="thread")\n'
ELECT = MEET + '            with elect_one():\n                empty[s].arrive()\n'
HALF = MEET + '            if warp.rank < 4:\n                empty[s].arrive(per="warp")\n'
LOOP = ('            for j in range(lane.id // 16 + 1):\n'
        '                empty[s].arrive(per="thread")\n')

#: (name, body, the count the body's arrivals make per phase)
RIGHT = [("lane 0 of each warp, per thread", LANE0, 8),
         ("the 32 threads of warp 0, per thread", WARP0, 32),
         ("the role's first thread, per thread", FIRST, 1),
         ("the elected thread in elect_one", ELECT, 1),
         ("the first four warps, per warp", HALF, 4),
         ("a per-lane trip count: 1 for lanes 0-15, 2 for 16-31", LOOP, 384)]


@pytest.mark.parametrize(("body", "count"), [pytest.param(b, c, id=n) for n, b, c in RIGHT])
def test_a_guarded_arrival_counted_right_is_clean_checked_and_simulated(
        body: str, count: int) -> None:
    text = kernel(body, count)
    assert findings(text) == []
    assert simulated(text) == []


@pytest.mark.parametrize(("body", "count"), [pytest.param(b, c, id=n) for n, b, c in RIGHT])
def test_a_guarded_arrival_against_another_count_is_ck303_at_the_arrive(
        body: str, count: int) -> None:
    """The count every thread (or every warp) would make is what an author who forgot the
    guard writes; the condition is the bug's place, so the finding is at the arrival."""
    wrong = 256 if count != 256 else 8
    text = kernel(body, wrong)
    arrive = "empty[s].arrive("
    assert findings(text) == [("CK303", line_of(text, arrive))]


@pytest.mark.parametrize("body", [WARP0, FIRST, HALF])
def test_warps_a_guard_keeps_out_must_meet_the_others_first(body: str) -> None:
    """Without the named barrier the warps that do not arrive may still be reading the
    stage when the producer refills it: CK313 at the arrival, statically, and the
    simulator's race (CK501), for the count that is right."""
    counts = {WARP0: 32, FIRST: 1, HALF: 4}
    text = kernel(body.replace(MEET, ""), counts[body])
    assert findings(text) == [("CK313", line_of(text, "empty[s].arrive("))]
    assert "CK501" in simulated(text)


def test_the_false_positive_is_gone_and_the_every_thread_count_is_caught() -> None:
    """`if lane.id == 0: arrive(per="thread")` is 8 arrivals: a count of 8 is right (it
    used to be CK303, counted as 256) and a count of 256 hangs, found statically as the
    simulator finds it (CK502)."""
    assert findings(kernel(LANE0, 8)) == []
    bad = kernel(LANE0, 256)
    assert "1 lane of each of the 8 warps (8 threads): 8 arrivals" in message(bad)
    assert "CK502" in simulated(bad)


def test_a_thread_outside_the_role_never_arrives() -> None:
    """`thread.id == 0` is a producer thread: no consumer thread takes the branch."""
    text = kernel('            if thread.id == 0:\n                empty[s].arrive(per="thread")\n',
                  1)
    assert findings(text) == [("CK303", line_of(text, "empty[s].arrive("))]
    assert "no thread" in message(text)


def test_an_elected_arrival_under_a_lane_its_thread_is_not_in_never_happens() -> None:
    """`expect_tx` is made by the role's thread 0; under `lane.id == 1` it never is, and
    neither are its bytes: one finding, at the expect_tx, not a CK302 about the bytes."""
    text = GEMM.replace("            full[s].expect_tx(",
                        "            if lane.id == 1:\n                full[s].expect_tx(")
    assert findings(text) == [("CK303", line_of(text, "full[s].expect_tx("))]
    assert "nobody" in message(text)


def test_a_per_warp_arrival_under_a_lane_guard_is_a_split_warp() -> None:
    """`per="warp"` lowers to `__syncwarp(); if (lane == 0) arrive`: the lanes must meet,
    so a condition that splits them is CK314, once, and the count takes the warps."""
    for lane in ("0", "5"):
        text = kernel(f'            if lane.id == {lane}:\n                '
                      'empty[s].arrive(per="warp")\n', 8)
        assert findings(text) == [("CK314", line_of(text, "empty[s].arrive("))]


def test_a_hand_elected_arrival_is_a_split_warp_but_elect_one_is_not() -> None:
    hand = kernel('            barrier_sync(1, 8)\n'
                  '            if warp.rank == 0 and lane.id == 0:\n'
                  '                empty[s].arrive()\n', 1)
    assert findings(hand) == [("CK314", line_of(hand, "empty[s].arrive("))]
    assert findings(kernel(ELECT, 1)) == []


@pytest.mark.parametrize("cond", ["lane.id < K // 64", "lane.id < block.x + K // 512"])
def test_a_guard_known_only_at_launch_is_said_not_guessed(cond: str) -> None:
    text = kernel(f'            if {cond}:\n                empty[s].arrive(per="thread")\n', 8)
    assert findings(text) == [("CK303", line_of(text, "empty[s].arrive("))]
    assert "cannot count the arrivals" in message(text)
    assert "known only at launch" in message(text)


def test_a_per_thread_loop_with_a_blocking_body_is_not_counted() -> None:
    text = kernel('            for j in range(lane.id // 16 + 1):\n'
                  '                empty[s].arrive(per="thread")\n'
                  '                barrier_sync(1, 8)\n', 384)
    assert ("CK303", line_of(text, "empty[s].arrive(")) in findings(text)
    assert "blocks" in message(text)


def test_lowering_emits_the_arrivals_the_count_takes() -> None:
    lane = lowered(kernel(LANE0, 8))
    assert "cake_mbar_init(empty + 8 * bi, 8)" in lane
    body = lane.split("if (lane == 0) {", 1)[1].split("}", 1)[0]
    assert "cake_mbar_arrive(empty" in body and "__syncwarp" not in body
    elect = lowered(kernel(ELECT, 1))
    inside = elect.split("if (thread_rank == 0) {", 1)[1].split("}", 1)[0]
    assert "cake_mbar_arrive(empty" in inside
    assert "__syncwarp" not in inside  # one thread: no lanes to meet, none to wait for
    loop = lowered(kernel(LOOP, 384))
    assert "cake_mbar_init(empty + 8 * bi, 384)" in loop
    assert "j < lane / 16 + 1" in loop


def test_the_rule_page_lane_guard_examples_are_true() -> None:
    """docs/rules/CK303.md shows a lane-guarded pair after the main one; the page test
    checks the first block of each section only, so the second ones are checked here."""
    page = (Path(__file__).resolve().parents[1] / "docs" / "rules" / "CK303.md").read_text(
        encoding="utf-8")
    example = page.split("## Example", 1)[1].split("## Use instead", 1)[0]
    instead = page.split("## Use instead", 1)[1].split("## Fix safety", 1)[0]
    bad = example.split("```python\n")[2].split("```", 1)[0]
    good = instead.split("```python\n")[2].split("```", 1)[0]
    assert "if lane.id == 0:" in bad and "if lane.id == 0:" in good
    assert findings(bad) == [("CK303", line_of(bad, 'empty[s].arrive(per="thread")'))]
    assert findings(good) == []
