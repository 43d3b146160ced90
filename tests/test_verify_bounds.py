"""CK405: shared-memory views whose coordinates or indices can leave their buffer.

Each case is a small sm_80 kernel over one `(4, 64, 64)` buffer; the body under test is
spliced in.  A finding must name the coordinate, the value it reaches and the iteration;
ranges the checker cannot know (launch-time dims, dependent loop bounds, a loop variable
read after its loop) must stay silent.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from cake_core.check import check_text
from cake_core.diagnostics import codes
from cake_core.diagnostics.model import Diagnostic
from cake_core.plugins.builtin import builtin_plugin
from cake_core.verify import BUILTIN_PASSES, bounds

ROOT = Path(__file__).resolve().parent.parent
CODE = codes.SMEM_VIEW_OUT_OF_BOUNDS.code

HEAD = '''M = dim("M")

@kernel(arch="sm_80", grid=(cdiv(M, 64), 4), warps=4)
def k(X: Tensor[f16, (M, 64)], Y: Tensor[f16, (M, 64)]):
    buf = smem(f16, (4, 64, 64))
'''


def _kernel(body: str) -> str:
    return HEAD + "".join(f"    {ln}\n" for ln in body.strip("\n").splitlines())


def _findings(body: str) -> list[Diagnostic]:
    res = check_text(_kernel(body), "k.cake", passes=[bounds.check])
    assert not res.errors or all(d.code == CODE for d in res.errors), \
        [(d.code, d.message) for d in res.diagnostics]
    return [d for d in res.diagnostics if d.code == CODE]


def _one(body: str) -> Diagnostic:
    found = _findings(body)
    assert len(found) == 1, [d.message for d in found]
    return found[0]


def _at(body: str, d: Diagnostic) -> str:
    return _kernel(body).splitlines()[d.span.start.line]


# --- findings ------------------------------------------------------------------------------
def test_the_last_iteration_of_a_loop_past_the_view() -> None:
    body = '''
for kk in range(4):
    x = load(buf[0].tile((16, 64), (kk + 1, 0)))
    store(Y.tile((16, 64), (block.x, 0)), x)
'''
    d = _one(body)
    assert d.message.startswith("coordinate 0 (`kk + 1`) reaches 4 on the last iteration of "
                                "`for kk in range(4)` (kk = 3), but `buf[0]` holds 4 tiles of "
                                "16 along that axis (0..3)")
    assert "kk + 1" in _at(body, d) and d.span.end.offset - d.span.start.offset == len("kk + 1")
    (rel,) = d.related
    assert rel.message == "`kk` takes the values 0, 1, 2, 3"
    assert _kernel(body).splitlines()[rel.span.start.line].strip().startswith("for kk in")
    assert d.data["range"] == [None, 4] and d.data["tiles"] == 4
    assert not d.fixes


def test_a_loop_with_a_step() -> None:
    bad = '''
for i in range(1, 8, 2):
    x = load(buf[0].tile((16, 64), (i // 2 + 1, 0)))
    store(Y.tile((16, 64), (block.x, 0)), x)
'''
    d = _one(bad)
    assert "reaches 4 on the last iteration of `for i in range(1, 8, 2)` (i = 7)" in d.message
    assert d.related[0].message == "`i` takes the values 1, 3, 5, 7"
    assert _findings(bad.replace("i // 2 + 1", "i // 2")) == []


def test_an_unrolled_body_that_forgets_the_step_is_one_finding() -> None:
    bad = '''
for kk in range(4):
    x = load(buf[0].tile((16, 64), (kk, 0)))
    y = load(buf[1].tile((16, 64), (kk + 1, 0)))
    z = load(buf[2].tile((64, 16), (0, kk + 1)))
    store(Y.tile((16, 64), (block.x, 0)), x + y)
    store(Y.tile((64, 16), (block.x, 0)), z)
'''
    d = _one(bad)
    assert "`buf[1]`" in d.message and d.data["views"] == 2
    assert any("`kk + 1` is 4 there too" in r.message and "`buf[2]`" in r.message
               for r in d.related)
    assert _findings(bad.replace("range(4)", "range(0, 4, 2)")) == []


def test_nested_loops() -> None:
    ok = '''
for i in range(2):
    for j in range(2):
        x = load(buf[0].tile((16, 32), (i * 2 + j, j)))
        store(Y.tile((16, 32), (block.x, 0)), x)
'''
    assert _findings(ok) == []
    d = _one(ok.replace("range(2):\n        x", "range(3):\n        x"))
    assert "(`i * 2 + j`) reaches 4" in d.message
    assert "last iteration of `for i in range(2)` (i = 1)" in d.message
    assert "last iteration of `for j in range(3)` (j = 2)" in d.message
    assert len(d.related) == 2


def test_an_offset_below_zero() -> None:
    d = _one('''
for i in range(4):
    x = load(buf[0].tile((16, 64), (i - 1, 0)))
    store(Y.tile((16, 64), (block.x, 0)), x)
''')
    assert "(`i - 1`) is -1 on the first iteration of `for i in range(4)` (i = 0)" in d.message
    assert d.data["range"] == [-1, None]


def test_a_constant_coordinate() -> None:
    d = _one('''
x = load(buf[3].tile((16, 64), (4, 0)))
store(Y.tile((16, 64), (block.x, 0)), x)
''')
    assert d.message.startswith("coordinate 0 (`4`) is 4, but `buf[3]` holds 4 tiles")
    assert d.related == ()


def test_a_buffer_index_over_a_loop() -> None:
    body = '''
for i in range(5):
    x = load(buf[i].tile((16, 64), (0, 0)))
    store(Y.tile((16, 64), (block.x, 0)), x)
'''
    d = _one(body)
    assert d.message.startswith("index 0 (`i`) reaches 4 on the last iteration of "
                                "`for i in range(5)` (i = 4), but dimension 0 of `buf` has "
                                "extent 4 (0..3)")
    assert _at(body, d)[d.span.start.col_byte:d.span.end.col_byte] == "i"
    assert _findings(body.replace("buf[i]", "buf[i % 4]")) == []


def test_indices_of_a_rank_4_buffer() -> None:
    two = 'buf2 = smem(f16, (2, 4, 16, 64))\nfor i in range(3):\n    x = load(buf2{}.tile(' \
          '(16, 64), (0, 0)))\n    store(Y.tile((16, 64), (block.x, 0)), x + load(buf[0]' \
          '.tile((16, 64), (0, 0))))\n'
    assert "index 1 (`i + 2`) reaches 4" in _one(two.format("[1, i + 2]")).message
    assert "dimension 0 of `buf2[1]` has extent 4" in _one(two.format("[1][i + 2]")).message
    assert "dimension 0 of `buf2` has extent 2" in _one(two.format("[i][1]")).message
    assert _findings(two.format("[i % 2][i + 1]")) == []


def test_a_view_bound_to_a_name_and_a_transposed_view() -> None:
    assert "index 0 (`i + 1`) reaches 4" in _one('''
for i in range(4):
    v = buf[i + 1]
    store(Y.tile((16, 64), (block.x, 0)), load(v.tile((16, 64), (0, 0))))
''').message
    assert "`buf[0].T` holds 4 tiles of 16" in _one('''
for i in range(4):
    x = load(buf[0].T.tile((64, 16), (0, i + 1)))
    store(Y.tile((64, 16), (block.x, 0)), x)
''').message


def test_warp_lane_and_block_indices() -> None:
    assert "(`warp.id`) reaches 3 when warp.id = 3" in _one('''
x = load(buf[0].tile((32, 64), (warp.id, 0)))
store(Y.tile((32, 64), (block.x, 0)), x)
''').message
    assert "(`lane.id % 8`) reaches 7 when lane.id = 7" in _one('''
x = load(buf[0].tile((16, 16), (0, lane.id % 8)))
store(Y.tile((16, 16), (block.x, 0)), x)
''').message
    assert "(`block.y + 1`) reaches 4 when block.y = 3" in _one('''
x = load(buf[block.y + 1].tile((16, 64), (0, 0)))
store(Y.tile((16, 64), (block.x, 0)), x)
''').message
    assert _findings('''
x = load(buf[block.y].tile((16, 64), (warp.id, lane.id % 4)))
store(Y.tile((16, 16), (block.x, 0)), x)
'''.replace("(16, 64), (warp.id", "(16, 16), (warp.id")) == []


def test_the_else_side_of_a_guard() -> None:
    body = '''
for i in range(4):
    if i + 1 < 4:
        x = load(buf[0].tile((16, 64), (i + 1, 0)))
        store(Y.tile((16, 64), (block.x, 0)), x)
    else:
        x = load(buf[0].tile((16, 64), (i, 0)))
        store(Y.tile((16, 64), (block.x, 0)), x)
'''
    assert _findings(body) == []
    bad = body.replace("(i, 0)", "(i + 1, 0)")
    d = _one(bad)
    assert "reaches 4 on the last iteration" in d.message
    assert _kernel(bad).splitlines()[d.span.start.line - 1].strip() == "else:"


def test_a_large_monotone_range_is_decided_at_its_corners() -> None:
    body = '''
for i in range(100):
    for j in range(100):
        x = load(buf[0].tile((16, 16), (j // 25, i // 20 + j // 50)))
        store(Y.tile((16, 16), (block.x, 0)), x)
'''
    assert bounds.MAX_COMBINATIONS < 100 * 100
    d = _one(body)
    assert "(`i // 20 + j // 50`) reaches 5" in d.message
    assert _findings(body.replace("i // 20 + j // 50", "i // 50 + j // 50")) == []


# --- silent ----------------------------------------------------------------------------
@pytest.mark.parametrize("body", [
    # a loop over a launch-time dim: its length is not known
    '''
for i in range(cdiv(M, 64)):
    x = load(buf[0].tile((16, 64), (i + 5, 0)))
    store(Y.tile((16, 64), (block.x, 0)), x)
''',
    # a guard over a launch-time dim constrains the index
    '''
for i in range(4):
    if i + 1 < cdiv(M, 64):
        x = load(buf[0].tile((16, 64), (i + 1, 0)))
        store(Y.tile((16, 64), (block.x, 0)), x)
''',
    # block.x of a grid sized by a dim
    '''
x = load(buf[block.x].tile((16, 64), (0, 0)))
store(Y.tile((16, 64), (block.x, 0)), x)
''',
    # bounds of the inner loop depend on the outer one
    '''
for i in range(4):
    for j in range(i, 8):
        x = load(buf[0].tile((16, 64), (j, 0)))
        store(Y.tile((16, 64), (block.x, 0)), x)
''',
    # a loop variable read after its loop
    '''
for i in range(8):
    pass
x = load(buf[0].tile((16, 64), (i, 0)))
store(Y.tile((16, 64), (block.x, 0)), x)
''',
    # a loop that never runs
    '''
for i in range(4, 4):
    x = load(buf[0].tile((16, 64), (i, 0)))
    store(Y.tile((16, 64), (block.x, 0)), x)
''',
    # correlated uses of one index, which interval arithmetic would over-estimate
    '''
for i in range(8):
    x = load(buf[i % 4].tile((16, 16), (2 * i - i - i // 2 - i // 2 - i % 2, (2 * i) % 4)))
    store(Y.tile((16, 16), (block.x, 0)), x)
''',
    # too many combinations for a form whose extremes are not at the corners
    '''
for i in range(100):
    for j in range(100):
        x = load(buf[0].tile((16, 16), (j % 4, (i + j) % 60 // 20)))
        store(Y.tile((16, 16), (block.x, 0)), x)
''',
])
def test_unknown_or_in_bounds_ranges_stay_silent(body: str) -> None:
    assert _findings(body) == []


def test_role_ranges_are_the_roles() -> None:
    base = (ROOT / "examples" / "tinygemm_sm90.cake").read_text(encoding="utf-8")
    anchor = "        store(sc, cast(acc, bf16))\n"
    assert anchor in base

    def with_read(coord: str, guard: str = "") -> list[Diagnostic]:
        pad = "        "
        read = (f"x = load(sc.tile((16, 32), ({coord}, 0)))\n"
                f"{pad}{'    ' if guard else ''}store(C.tile((16, 32), (0, block.x)), x)\n")
        extra = f"{pad}if {guard}:\n{pad}    {read}" if guard else f"{pad}{read}"
        res = check_text(base.replace(anchor, anchor + extra), "t.cake", passes=[bounds.check])
        assert not [d for d in res.diagnostics if d.code != CODE], res.diagnostics
        return res.diagnostics

    # the "mma" role runs on warps 4..7: warp.id - 4 and warp.rank are 0..3
    assert with_read("warp.id - 4") == [] and with_read("warp.rank") == []
    (d,) = with_read("warp.id")
    assert "reaches 7 when warp.id = 7" in d.message
    (d,) = with_read("warp.rank + 1")
    assert "reaches 4 when warp.rank = 3" in d.message
    assert with_read("warp.rank + 1", guard="warp.rank < 3") == []


# --- registration and the corpus -------------------------------------------------------------
def test_the_pass_is_a_builtin_with_its_code() -> None:
    assert "bounds" in BUILTIN_PASSES
    assert codes.lookup("CK405") is codes.SMEM_VIEW_OUT_OF_BOUNDS
    (item,) = [r for r in builtin_plugin().rules if r.name == "bounds"]
    assert CODE in {c.code for c in item.codes}


_EXPECT = re.compile(r"^# expect: (CK\d{3})")
CORPUS = sorted(p for d in ("examples", "tests") for p in (ROOT / d).rglob("*.cake"))


def test_no_other_kernel_of_the_repository_leaves_a_buffer() -> None:
    """Every kernel under examples/ and tests/ keeps its views inside their buffers,
    except a planted bug that says so (the simulator's own test data goes out of bounds
    only at launch sizes, which this rule leaves to it)."""
    assert len(CORPUS) > 50
    flagged = []
    for p in CORPUS:
        text = p.read_text(encoding="utf-8", errors="replace")
        m = _EXPECT.match(text)
        found = [d for d in check_text(text, str(p), passes=[bounds.check]).diagnostics
                 if d.code == CODE]
        if found and not (m and m.group(1) == CODE):
            flagged.append((str(p.relative_to(ROOT)), [d.message for d in found]))
    assert flagged == []
