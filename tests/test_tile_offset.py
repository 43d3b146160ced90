"""Element offsets and limits on global tiles: `A.tile(shape, coords, offset=, limit=)`.

What a variable-length (packed) batch needs: sequence b's rows start at `cu[b]`, read with
`load_scalar`, which is no multiple of the tile, and end at `cu[b + 1]`, which a store
must not cross (the next rows belong to another block).  Each facet is checked: the type
rule (located findings, CK330 for the copies that cannot honour a limit), the simulator
against numpy on ragged batches (register loads and stores, TMA into a swizzled buffer),
the cost model's view of which blocks share a tile, the lowering under nvcc, and the
lowered C++ under CPU emulation against the same references.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
from kernel_support import assert_builds_clean, assert_emulates

from cake_core.check import check_text
from cake_core.emulate.build import host_compiler_present
from cake_core.ir.types import DType
from cake_core.sim import SimKernel, simulate
from cake_core.sim.dtypes import round_to
from cake_core.tasks import load_task

HEAD = '''BM, D = 16, 32
B = dim("B")
T = dim("T")
SMAX = dim("SMAX")

'''

# Y = 2 X + 1 on every sequence's rows, a query-tile grid per sequence (varlen layout)
AFFINE = HEAD + '''@kernel(arch="sm_90a", grid=(cdiv(SMAX, BM), B), warps=4)
def seg_affine(X: Tensor[f32, (T, D)], Cu: Tensor[i32, (B + 1,)], Y: Tensor[f32, (T, D)]):
    start = load_scalar(Cu, (block.y,))
    end = load_scalar(Cu, (block.y + 1,))
    x = load(X.tile((BM, D), (block.x, 0), offset=(start, 0), limit=(end, D)))
    store(Y.tile((BM, D), (block.x, 0), offset=(start, 0), limit=(end, D)), x * 2.0 + 1.0)
'''

# the same through cp.async into shared memory (an offset tile; the limit is the store's)
CP_ASYNC = HEAD + '''@kernel(arch="sm_80", grid=(cdiv(SMAX, BM), B), warps=4)
def seg_cp_async(X: Tensor[f32, (T, D)], Cu: Tensor[i32, (B + 1,)], Y: Tensor[f32, (T, D)]):
    start = load_scalar(Cu, (block.y,))
    end = load_scalar(Cu, (block.y + 1,))
    sx = smem(f32, (BM, D))
    cp_async(sx, X.tile((BM, D), (block.x, 0), offset=(start, 0)))
    cp_async_commit()
    cp_async_wait(0)
    syncthreads()
    store(Y.tile((BM, D), (block.x, 0), offset=(start, 0), limit=(end, D)), load(sx) * 2.0 + 1.0)
'''

# packed -> padded: P[b, i] = X[cu[b] + i] for i < len(b), zeros past the length
UNPACK = HEAD + '''@kernel(arch="sm_90a", grid=(cdiv(SMAX, BM), B), warps=4)
def unpack(X: Tensor[f32, (T, D)], Cu: Tensor[i32, (B + 1,)], P: Tensor[f32, (B, SMAX, D)]):
    start = load_scalar(Cu, (block.y,))
    end = load_scalar(Cu, (block.y + 1,))
    x = load(X.tile((BM, D), (block.x, 0), offset=(start, 0), limit=(end, D)))
    store(P.tile((1, BM, D), (block.y, block.x, 0)), x)
'''

# a TMA load at an element offset into a swizzled buffer, a limited register store out
TMA = '''BM, D = 64, 64
B = dim("B")
T = dim("T")
SMAX = dim("SMAX")

@kernel(arch="sm_90a", grid=(cdiv(SMAX, BM), B), warps=4)
def seg_tma(X: Tensor[bf16, (T, D)], Cu: Tensor[i32, (B + 1,)], Y: Tensor[bf16, (T, D)]):
    start = load_scalar(Cu, (block.y,))
    end = load_scalar(Cu, (block.y + 1,))
    sx = smem(bf16, (BM, D), layout=swizzle(128))
    bar = mbarrier(count=1)
    fence_barrier_init()
    syncthreads()
    with elect_one():
        bar.expect_tx(BM * D * 2)
        tma_load(sx, X.tile((BM, D), (block.x, 0), offset=(start, 0)), bar)
    bar.wait(0)
    x = cast(load(sx), f32)
    store(Y.tile((BM, D), (block.x, 0), offset=(start, 0), limit=(end, D)), cast(x * 2.0, bf16))
'''

LENGTHS = (5, 23, 0, 17, 40)   # ragged, one empty, none a multiple of the 16-row tile
TMA_LENGTHS = (5, 93, 0, 71)   # against 64-row tiles
SENTINEL = -7.0


def _cu(lengths: tuple[int, ...]) -> np.ndarray:
    return np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)


def _run(text: str, dims: dict[str, int], inputs: dict[str, np.ndarray]
         ) -> dict[str, np.ndarray]:
    res = check_text(text, "k.cake")
    assert res.errors == [], [d.message for d in res.errors]
    out = simulate(SimKernel.from_text(text, "k.cake"), dims, inputs)
    assert out.diagnostics == [], [(d.code, d.message) for d in out.diagnostics]
    return out.outputs


def _affine_inputs(lengths: tuple[int, ...], extra: int, d: int = 32
                   ) -> tuple[dict[str, int], dict[str, np.ndarray]]:
    """A packed batch of `lengths`, `extra` rows after the last sequence, Y preset."""
    cu = _cu(lengths)
    t = int(cu[-1]) + extra
    x = np.random.default_rng(0).standard_normal((t, d)).astype(np.float32)
    dims = {"B": len(lengths), "T": t, "SMAX": max(lengths)}
    return dims, {"X": x, "Cu": cu, "Y": np.full((t, d), SENTINEL, np.float32)}


@pytest.mark.parametrize("text", [AFFINE, CP_ASYNC], ids=["load", "cp_async"])
def test_a_tile_at_a_run_time_element_offset_is_simulated(text: str) -> None:
    dims, inputs = _affine_inputs(LENGTHS, extra=0)
    y = _run(text, dims, inputs)["Y"]
    np.testing.assert_array_equal(y, 2.0 * inputs["X"] + 1.0)


def test_a_limited_store_drops_the_rows_past_the_limit() -> None:
    # rows after the last sequence are no sequence's: the limit keeps their old values
    dims, inputs = _affine_inputs(LENGTHS, extra=11)
    y = _run(AFFINE, dims, inputs)["Y"]
    end = sum(LENGTHS)
    np.testing.assert_array_equal(y[:end], 2.0 * inputs["X"][:end] + 1.0)
    assert (y[end:] == SENTINEL).all()


def test_without_the_limit_a_store_writes_into_the_next_sequence() -> None:
    text = AFFINE.replace("store(Y.tile((BM, D), (block.x, 0), offset=(start, 0), "
                          "limit=(end, D))", "store(Y.tile((BM, D), (block.x, 0), "
                          "offset=(start, 0))")
    assert text != AFFINE
    dims, inputs = _affine_inputs(LENGTHS, extra=11)
    out = simulate(SimKernel.from_text(text, "k.cake"), dims, inputs)
    # the tail of a sequence's last tile lands on the next sequence's rows (and past the
    # batch): blocks race for them, and the rows after the batch are overwritten
    assert "CK501" in {d.code for d in out.diagnostics}
    assert not (out.outputs["Y"][sum(LENGTHS):] == SENTINEL).all()


def test_a_limited_load_reads_zeros_past_the_limit() -> None:
    cu = _cu(LENGTHS)
    t, smax = int(cu[-1]), 48  # padded to a multiple of the tile
    x = np.random.default_rng(1).standard_normal((t, 32)).astype(np.float32)
    p = _run(UNPACK, {"B": len(LENGTHS), "T": t, "SMAX": smax}, {"X": x, "Cu": cu})["P"]
    want = np.zeros((len(LENGTHS), smax, 32), np.float32)
    for b, n in enumerate(LENGTHS):
        want[b, :n] = x[cu[b]:cu[b] + n]
    np.testing.assert_array_equal(p, want)


def test_a_tma_load_at_an_element_offset_into_a_swizzled_buffer() -> None:
    cu = _cu(TMA_LENGTHS)
    t = int(cu[-1])
    x = np.random.default_rng(2).standard_normal((t, 64)).astype(np.float32)
    y = _run(TMA, {"B": len(TMA_LENGTHS), "T": t, "SMAX": max(TMA_LENGTHS)},
             {"X": x, "Cu": cu, "Y": np.zeros((t, 64), np.float32)})["Y"]
    np.testing.assert_array_equal(y, 2.0 * round_to(x, DType.BF16))


# --- the type rule ------------------------------------------------------------------------
LIMITED = "X.tile((BM, D), (block.x, 0), offset=(start, 0), limit=(end, D))"
BODY = '''BM, D = 64, 64
B = dim("B")
T = dim("T")
SMAX = dim("SMAX")

@kernel(arch="{arch}", grid=(cdiv(SMAX, BM), B), warps=4)
def k(X: Tensor[bf16, (T, D)], Cu: Tensor[i32, (B + 1,)], Y: Tensor[bf16, (T, D)]):
    start = load_scalar(Cu, (block.y,))
    end = load_scalar(Cu, (block.y + 1,))
{body}'''
SX = "sx = smem(bf16, (BM, D), layout=swizzle(128))\n"


def _check(body: str, arch: str = "sm_90a") -> tuple[str, list[tuple[str, int]]]:
    text = BODY.format(arch=arch, body="".join(f"    {line}\n" for line in
                                               body.strip("\n").splitlines()))
    return text, [(d.code, d.span.start.offset) for d in check_text(text, "k.cake").diagnostics]


@pytest.mark.parametrize(("body", "arch"), [
    ('''
bar = mbarrier(count=1)
fence_barrier_init()
syncthreads()
with elect_one():
    bar.expect_tx(BM * D * 2)
    tma_load(sx, X.tile((BM, D), (block.x, 0), offset=(start, 0), limit=(end, D)), bar)
bar.wait(0)
''', "sm_90a"),
    ('''
store(sx, load(X.tile((BM, D), (block.x, 0))))
fence_proxy_async()
syncthreads()
with elect_one():
    tma_store(X.tile((BM, D), (block.x, 0), offset=(start, 0), limit=(end, D)), sx)
    tma_store_wait(0)
''', "sm_90a"),
    ('''
cp_async(sx, X.tile((BM, D), (block.x, 0), offset=(start, 0), limit=(end, D)))
cp_async_commit()
cp_async_wait(0)
''', "sm_80"),
], ids=["tma_load", "tma_store", "cp_async"])
def test_a_limited_tile_given_to_tma_or_cp_async_is_ck330(body: str, arch: str) -> None:
    text, found = _check(SX + body.strip("\n"), arch)
    assert [c for c, _ in found] == ["CK330"], found
    assert found[0][1] == text.index(LIMITED)
    unlimited = body.replace(", limit=(end, D)", "")
    assert _check(SX + unlimited.strip("\n"), arch)[1] == []


def test_ck330_says_what_to_do() -> None:
    text, _ = _check(SX + '''
with elect_one():
    tma_store(X.tile((BM, D), (block.x, 0), offset=(start, 0), limit=(end, D)), sx)
''')
    diag = check_text(text, "k.cake").diagnostics[0]
    assert "`store(" in diag.message and "`where`" in diag.message


def test_a_limited_register_store_and_load_check_clean() -> None:
    assert _check(f"store(Y.tile((BM, D), (block.x, 0), offset=(start, 0), limit=(end, D)), "
                  f"load({LIMITED}))")[1] == []


@pytest.mark.parametrize(("arg", "code"), [
    ("offset=(start,)", "CK111"),
    ("offset=(start, 0, 0)", "CK111"),
    ("limit=(end,)", "CK111"),
    ("offset=(1.5, 0)", "CK104"),
    ("limit=(end, 2.0)", "CK104"),
    ("offset=start", "CK111"),
], ids=["offset-short", "offset-long", "limit-short", "offset-float", "limit-float",
        "offset-scalar"])
def test_bad_offsets_and_limits_are_located(arg: str, code: str) -> None:
    text, found = _check(f"x = load(X.tile((BM, D), (block.x, 0), {arg}))")
    assert [c for c, _ in found] == [code], found
    value = arg.split("=", 1)[1]
    assert found[0][1] == text.index(value, text.index(arg))


# --- the cost model -----------------------------------------------------------------------
def test_the_cost_model_follows_a_run_time_offset_to_the_block_it_was_read_for() -> None:
    from cake_core.cost.record import CostContext
    from cake_core.cost.work import _producers

    res = check_text(AFFINE, "k.cake")
    assert res.program is not None
    kernel = res.program.kernels[0]
    ctx = CostContext(kernel, None, None, {}, _producers(kernel))  # type: ignore[arg-type]
    tiles = [op.results[0] for op in kernel.ops() if op.name == "tile"]
    # the offset is read at block.y: blocks of one sequence differ in x, sequences in y
    assert [ctx.tile_axes(t) for t in tiles] == [frozenset({"x", "y"})] * 2
    assert ctx.tile_coords(tiles[0]) == ()  # a run-time origin cannot be compared


# --- the lowering ---------------------------------------------------------------------------
def test_cp_async_needs_a_chunk_aligned_column_offset() -> None:
    from cake_core.lower import lower_source
    from cake_core.source import SourceFile

    text = CP_ASYNC.replace("sx, X.tile((BM, D), (block.x, 0), offset=(start, 0))",
                            "sx, X.tile((BM, D), (block.x, 0), offset=(0, start))")
    assert text != CP_ASYNC
    result = lower_source(SourceFile(text, "k.cake"))
    assert result.cu is None
    found = [d for d in result.diagnostics if "16-byte chunks" in d.message]
    assert found and found[0].span.start.offset == text.index("X.tile((BM, D), (block.x, 0), "
                                                              "offset=(0, start))")


def test_the_lowering_adds_the_offset_and_checks_the_limit() -> None:
    from cake_core.lower import lower_source
    from cake_core.source import SourceFile

    tma = lower_source(SourceFile(TMA, "k.cake")).cu
    assert tma is not None
    assert "&tmap_X, bar, 0, int(blockIdx.x) * 64 + start" in tma  # element coordinates
    affine = lower_source(SourceFile(AFFINE, "k.cake")).cu
    assert affine is not None
    assert "grow < T && grow < end" in affine  # the limit clips as the edge does
    text, found = _check(SX + '''
store(sx, load(X.tile((BM, D), (block.x, 0))))
fence_proxy_async()
syncthreads()
with elect_one():
    tma_store(Y.tile((BM, D), (block.x, 0), offset=(start, 0)), sx)
    tma_store_wait(0)
'''.strip("\n"))
    assert found == []
    stored = lower_source(SourceFile(text, "k.cake")).cu
    assert stored is not None
    assert "SMEM_SX_OFFSET, 0, int(blockIdx.x) * 64 + start" in stored


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
@pytest.mark.parametrize("text", [AFFINE, CP_ASYNC, TMA], ids=["load-store", "cp_async", "tma"])
def test_nvcc_builds_the_offset_kernels(text: str, tmp_path: Path) -> None:
    path = tmp_path / "k.cake"
    path.write_text(text)
    assert_builds_clean(path)


TASK_FILE = '''"""A packed batch, each sequence's rows transformed (tests/test_tile_offset.py)."""
from __future__ import annotations

import numpy as np

from cake_core.ir.types import DType
from cake_core.sim.dtypes import round_to
from cake_core.tasks import Shape, Task, Tolerance

CU = np.array({cu}, dtype=np.int32)
DIMS = {dims}


def inputs(dims, rng):
    t = dims["T"]
    return {{"X": rng.standard_normal((t, {d})).astype(np.float32), "Cu": CU}}


def reference(x, dims):
    xv = x["X"].astype(np.float64)
    if "{dtype}" == "bf16":
        xv = round_to(x["X"], DType.BF16).astype(np.float64)
    return {{"Y": {scale} * xv + {shift}}}


TASK = Task(name="tile_offset", description="a packed batch, each sequence's rows transformed",
            kernels=(), inputs=inputs, reference=reference, outputs=("Y",),
            shapes=(Shape(DIMS),), sim_shapes=(Shape(DIMS),),
            tolerances={{"{dtype}": Tolerance(atol=1e-6, rtol=1e-6)}}, baseline="none")
'''


@pytest.mark.skipif(not host_compiler_present(), reason="needs a host C++ compiler")
@pytest.mark.parametrize(("text", "lengths", "d", "dtype", "scale", "shift"), [
    (AFFINE, LENGTHS, 32, "f32", 2.0, 1.0),
    (CP_ASYNC, LENGTHS, 32, "f32", 2.0, 1.0),
    (TMA, TMA_LENGTHS, 64, "bf16", 2.0, 0.0),
], ids=["load-store", "cp_async", "tma"])
def test_the_lowered_offsets_match_under_emulation(
        tmp_path: Path, text: str, lengths: tuple[int, ...], d: int, dtype: str,
        scale: float, shift: float) -> None:
    path = tmp_path / "k.cake"
    path.write_text(text)
    cu = _cu(lengths)
    dims = {"B": len(lengths), "T": int(cu[-1]), "SMAX": max(lengths)}
    task_path = tmp_path / "tile_offset_task.py"
    task_path.write_text(TASK_FILE.format(cu=cu.tolist(), dims=dims, d=d, dtype=dtype,
                                          scale=scale, shift=shift))
    assert_emulates(path, load_task(str(task_path)), dims)


# --- variable-length attention over a packed batch ------------------------------------------
VARLEN = Path(__file__).parent / "data" / "attention_varlen_unpadded.cake"
VARLEN_LENGTHS = (70, 150, 0, 5, 131)   # one empty, none a multiple of 64; T = 360 (4 spare)
HEADS, HEAD_DIM = 2, 128


def _varlen_inputs(lengths: tuple[int, ...]) -> tuple[dict[str, int], dict[str, np.ndarray]]:
    cu = _cu(lengths)
    t = -(-int(cu[-1]) // 8) * 8
    rng = np.random.default_rng(3)
    hd = HEADS * HEAD_DIM

    def bf16(shape: tuple[int, int]) -> np.ndarray:
        return round_to(rng.standard_normal(shape).astype(np.float32), DType.BF16)

    dims = {"B": len(lengths), "H": HEADS, "T": t, "SMAX": max(lengths)}
    return dims, {"Q": bf16((t, hd)), "K": bf16((t, hd)), "Vt": bf16((hd, t)), "CuSeqlens": cu,
                  "O": np.full((t, hd), SENTINEL, np.float32)}


def _varlen_reference(x: dict[str, np.ndarray]) -> np.ndarray:
    """Each sequence and head on its own, float64; rows after the batch keep the preset."""
    cu, d = x["CuSeqlens"], HEAD_DIM
    out = x["O"].astype(np.float64)
    v_all = x["Vt"].T.astype(np.float64)
    for b in range(len(cu) - 1):
        rows = slice(int(cu[b]), int(cu[b + 1]))
        for h in range(HEADS):
            cols = slice(h * d, (h + 1) * d)
            q = x["Q"][rows, cols].astype(np.float64)
            k = x["K"][rows, cols].astype(np.float64)
            s = q @ k.T / np.sqrt(d)
            p = np.exp(s - s.max(axis=-1, keepdims=True)) if len(s) else s
            out[rows, cols] = (p @ v_all[rows, cols]) / p.sum(axis=-1, keepdims=True)
    return out


def _varlen_sim(text: str) -> tuple[np.ndarray, np.ndarray, set[str]]:
    dims, inputs = _varlen_inputs(VARLEN_LENGTHS)
    res = simulate(SimKernel.from_text(text, "k.cake"), dims, inputs)
    return res.outputs["O"], _varlen_reference(inputs), {d.code for d in res.diagnostics}


def test_varlen_attention_matches_the_float64_reference() -> None:
    text = VARLEN.read_text()
    assert check_text(text, "k.cake").diagnostics == []
    o, want, found = _varlen_sim(text)
    assert found == set()
    # O is a convex combination of V rows (|V| ~ 1), rounded to bf16: absolute errors
    np.testing.assert_allclose(o, want, atol=1e-2, rtol=0)
    assert (o[sum(VARLEN_LENGTHS):] == SENTINEL).all()


@pytest.mark.parametrize(("old", "new"), [
    (", limit=(end, H * D))", ")"),
    ("s = where(lt(col_index(s) + j * BN, n), s, -inf)", "s = s * 1.0"),
], ids=["no-limit", "no-key-mask"])
def test_varlen_attention_needs_its_limit_and_its_mask(old: str, new: str) -> None:
    text = VARLEN.read_text()
    assert old in text
    o, want, found = _varlen_sim(text.replace(old, new))
    if "limit" in old:  # the last query tile writes the next sequence's rows: a race
        assert "CK501" in found
    assert not np.allclose(o, want, atol=1e-2, rtol=0)


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
def test_nvcc_builds_varlen_attention() -> None:
    assert_builds_clean(VARLEN)


VARLEN_TASK = '''"""Variable-length attention over a packed batch (tests/test_tile_offset.py)."""
from __future__ import annotations

import numpy as np

from cake_core.tasks import Shape, Task, Tolerance, as_dtype

CU = np.array({cu}, dtype=np.int32)
H, D = {heads}, {head_dim}
DIMS = {dims}


def inputs(dims, rng):
    t = dims["T"]
    return {{"Q": as_dtype(rng.standard_normal((t, H * D)), "bf16"),
            "K": as_dtype(rng.standard_normal((t, H * D)), "bf16"),
            "Vt": as_dtype(rng.standard_normal((H * D, t)), "bf16"), "CuSeqlens": CU}}


def reference(x, dims):
    out = np.zeros((dims["T"], H * D))
    v_all = x["Vt"].T.astype(np.float64)
    for b in range(len(CU) - 1):
        rows = slice(int(CU[b]), int(CU[b + 1]))
        if CU[b + 1] == CU[b]:
            continue
        for h in range(H):
            cols = slice(h * D, (h + 1) * D)
            q = x["Q"][rows, cols].astype(np.float64)
            k = x["K"][rows, cols].astype(np.float64)
            s = q @ k.T / np.sqrt(D)
            p = np.exp(s - s.max(axis=-1, keepdims=True))
            out[rows, cols] = (p @ v_all[rows, cols]) / p.sum(axis=-1, keepdims=True)
    return {{"O": as_dtype(out, "bf16")}}


TASK = Task(name="attention_varlen_unpadded", description="varlen attention, packed batch",
            kernels=(), inputs=inputs, reference=reference, outputs=("O",),
            shapes=(Shape(DIMS),), sim_shapes=(Shape(DIMS),),
            tolerances={{"bf16": Tolerance(atol=1e-2, rtol=1e-2)}}, baseline="none")
'''


@pytest.mark.skipif(not host_compiler_present(), reason="needs a host C++ compiler")
def test_varlen_attention_matches_under_emulation(tmp_path: Path) -> None:
    lengths = (70, 150, 0, 5, 135)   # 360 rows: every row of O belongs to a sequence
    cu = _cu(lengths)
    dims = {"B": len(lengths), "H": HEADS, "T": int(cu[-1]), "SMAX": max(lengths)}
    task_path = tmp_path / "attention_varlen_unpadded_task.py"
    task_path.write_text(VARLEN_TASK.format(cu=cu.tolist(), heads=HEADS, head_dim=HEAD_DIM,
                                            dims=dims))
    assert_emulates(VARLEN, load_task(str(task_path)), dims, seeds=(0,))


def test_a_tile_type_says_it_is_offset_and_limited() -> None:
    from cake_core.ir.types import TileType

    res = check_text(AFFINE, "k.cake")
    assert res.program is not None
    tiles = [op.results[0].type for op in res.program.kernels[0].ops() if op.name == "tile"]
    assert all(isinstance(t, TileType) for t in tiles)
    assert [t.describe() for t in tiles] == [
        "Tile[f32, (16, 32)] of X at an element offset, clipped at its limit",
        "Tile[f32, (16, 32)] of Y at an element offset, clipped at its limit"]
