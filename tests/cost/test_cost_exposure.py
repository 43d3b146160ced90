"""How loads expose memory latency, and that work is counted by real trip counts."""

from __future__ import annotations

import itertools
from dataclasses import replace
from pathlib import Path

import pytest
from cost_support import example, examples_present, kernel_from_text

from cake_core.cost.calibration import default_coefficients
from cake_core.cost.evaluate import evaluate
from cake_core.cost.exposure import load_exposure
from cake_core.cost.model import KernelProfile, estimate, predict, profile
from cake_core.cost.record import ONCE, PIPELINED, SERIAL
from cake_core.hardware import get_gpu
from cake_core.ir.kernel import ForOp, IfOp, Kernel, Node, Op, Role, walk_nodes
from cake_core.ir.symbolic import SymExpr, Var
from cake_core.verify.unroll import condition_leaves, truth

DATA = Path(__file__).resolve().parent / "data"
H100, H200 = get_gpu("h100"), get_gpu("h200")
CUBE = {"M": 4096, "N": 4096, "K": 4096}

NESTED = '''
BM, BN, BK = 128, 128, 64
M = dim("M")
N = dim("N", multiple_of=8)
K = dim("K", multiple_of=128)

@kernel(arch="sm_90a", grid=(cdiv(M, BM), cdiv(N, BN)), warps=8)
def gemm_nested(A: Tensor[bf16, (M, K)], B: Tensor[bf16, (N, K)], C: Tensor[bf16, (M, N)]):
    sa = smem(bf16, (BM, BK), layout=swizzle(128))
    sb = smem(bf16, (BN, BK), layout=swizzle(128))
    ready = mbarrier(count=1)
    fence_barrier_init()
    syncthreads()
    acc = fragment(f32, (BM, BN), layout=wgmma_acc)
    for ko in range(K // (INNER * BK)):
        for ki in range(INNER):
            ready.expect_tx((BM + BN) * BK * 2)
            tma_load(sa, A.tile((BM, BK), (block.x, INNER * ko + ki)), ready)
            tma_load(sb, B.tile((BN, BK), (block.y, INNER * ko + ki)), ready)
            ready.wait((INNER * ko + ki) % 2)
            wgmma(acc, sa, sb.T)
            wgmma_wait(0)
            syncthreads()
    store(C.tile((BM, BN), (block.x, block.y)), cast(acc, bf16))
'''


def data(name: str) -> Kernel:
    return kernel_from_text((DATA / name).read_text(encoding="utf-8"), name)


def warp_specialised(stages: int) -> Kernel:
    text = (DATA / "gemm_ws_sm90.cake").read_text(encoding="utf-8")
    assert "STAGES = 2 " in text
    return kernel_from_text(text.replace("STAGES = 2 ", f"STAGES = {stages} "), "ws.cake")


def nested(inner: int) -> Kernel:
    return kernel_from_text(f"INNER = {inner}\n" + NESTED, f"nested{inner}.cake")


def _loads(p: KernelProfile, tensor: str | None = None) -> list[tuple[str, int, str]]:
    return [(a.latency, a.depth, w.phase) for w in p.ops if w.op.prim.name == "tma_load"
            for a in w.record.reads if tensor is None or a.tensor == tensor]


def _waves(p: KernelProfile) -> int:
    return sum(ws.count for ws in p.waves)


# --- raw mbarriers and one-role pipelines -----------------------------------------------------
def test_a_serialized_raw_mbarrier_loop_waits_one_round_trip_every_iteration() -> None:
    p = profile(data("gemm_mbarrier_sm90.cake"), CUBE, H200)
    assert {x[:2] for x in _loads(p)} == {(SERIAL, 0)}
    e = estimate(p)
    latency = default_coefficients(H200).dram_latency_ns * 1e-9
    ktiles = CUBE["K"] // 64
    # both copies complete on one barrier: one round trip per iteration, not one per copy
    assert e.terms["waited"] == pytest.approx(_waves(p) * ktiles * latency, rel=1e-9)
    # and nothing overlaps it: a slower memory costs exactly that much more
    slow = estimate(p, replace(default_coefficients(H200), dram_latency_ns=2 * latency * 1e9))
    assert slow.seconds - e.seconds == pytest.approx(e.terms["waited"], rel=1e-6)
    assert e.categories["latency"] > 0.3 * e.seconds


@pytest.mark.parametrize("gpu", [H100, H200], ids=lambda g: g.name)
@pytest.mark.parametrize("stages", [2, 3, 4])
def test_the_warp_specialised_rewrite_beats_the_serialized_kernel(gpu: object,
                                                                  stages: int) -> None:
    serial = predict(data("gemm_mbarrier_sm90.cake"), CUBE, gpu)
    ws = predict(warp_specialised(stages), CUBE, gpu)
    assert ws.seconds < serial.seconds, (stages, ws.seconds, serial.seconds)
    if stages > 2:  # two stages hide half the round trip; three hide enough for the MMA
        assert ws.seconds < 0.75 * serial.seconds


def test_a_one_role_pipeline_in_lockstep_is_as_serial_as_a_raw_barrier() -> None:
    p = profile(data("gemm_one_role_sm90.cake"), CUBE, H200)
    assert {x[:2] for x in _loads(p)} == {(SERIAL, 0)}
    one_role = estimate(p).seconds
    raw = predict(data("gemm_mbarrier_sm90.cake"), CUBE, H200).seconds
    assert one_role == pytest.approx(raw, rel=0.02)
    assert predict(warp_specialised(2), CUBE, H200).seconds < one_role


def test_a_prefetching_barrier_array_keeps_one_copy_in_flight() -> None:
    p = profile(data("gemm_prefetch_sm90.cake"), CUBE, H200)
    loads = _loads(p)
    assert {x for x in loads if x[2] == "steady"} == {(PIPELINED, 1, "steady")}
    assert {x[:2] for x in loads if x[2] != "steady"} == {(ONCE, 0)}
    serial = predict(data("gemm_mbarrier_sm90.cake"), CUBE, H200)
    assert estimate(p).seconds < serial.seconds


def test_a_tile_loaded_up_front_is_waited_for_once() -> None:
    k = example("kmeans_assign_sm90.cake")
    p = profile(k, {"B": 8, "N": 65536, "K": 1024}, H200)
    assert {x[:2] for x in _loads(p, "X")} == {(ONCE, 0)}  # chunks of X, one wait
    assert {x[:2] for x in _loads(p, "C")} == {(PIPELINED, 2)}  # a three-stage ring


def test_pipelines_filled_by_another_role_keep_their_depth() -> None:
    for name in ("gemm_sm90.cake", "tinygemm_sm90.cake"):
        k = example(name)
        stages = {op.args["bar"].type.stages for op in k.ops() if op.prim.name == "tma_load"}
        assert set(load_exposure(k).values()) == {(PIPELINED, s - 1) for s in stages}


# --- trip counts ----------------------------------------------------------------------------
def _expected_execs(kernel: Kernel, p: KernelProfile) -> dict[int, float]:
    """id(op) -> product of the trip counts of its enclosing loops, computed afresh
    (a persistent kernel's tile loop counts once: its ops are priced per tile)."""
    tile_loops = p.tile_loops.loops if p.tile_loops is not None else frozenset()
    out: dict[int, float] = {}
    env: dict[str, int] = {"$" + d: v for d, v in p.dims.items()}
    # ints read from memory (`load_scalar(..., expect=...)`) are priced at their expected
    # value, under their own name: a condition compares them as they are (`x < n`)
    env.update((d, v) for d, v in p.dims.items() if d not in kernel.dims)
    dims_at: dict[str, int] = dict(p.dims)

    def visit(nodes: list[Node], execs: float) -> None:
        """Runs the loops iteration by iteration, so a runtime `if` on loop variables and
        dims takes the side its condition picks, and so does one on the block index, every
        block walked in turn; on anything else (a lane) both sides count in full."""
        for n in nodes:
            if isinstance(n, Role) or (isinstance(n, ForOp) and id(n) in tile_loops):
                visit(n.body, execs)
            elif isinstance(n, ForOp):
                var = n.var.sym.name if isinstance(n.var.sym, Var) else n.var.name
                for i in range(*(evaluate(x, dims_at) for x in (n.start, n.stop, n.step))):
                    env[var] = i
                    visit(n.body, execs)
                env.pop(var, None)
            elif isinstance(n, IfOp):
                t = truth(n.cond, env)
                if t is not False:
                    visit(n.then, execs)
                if t is not True:
                    visit(n.orelse, execs)
            elif isinstance(n, Op):
                out[id(n)] = out.get(id(n), 0.0) + execs

    # a loop bound or a condition on the block index: every block walked, then the mean
    blocks: dict[str, Var] = {}
    for n in walk_nodes(kernel.body):
        exprs = [n.start, n.stop, n.step] if isinstance(n, ForOp) and id(n) not in tile_loops \
            else [x for x in condition_leaves(n.cond) if isinstance(x, SymExpr)] \
            if isinstance(n, IfOp) else []
        blocks.update((a.name, a) for x in exprs for a in x.atoms()
                      if isinstance(a, Var) and a.name.startswith("block.") and a.hi is not None)
    names = sorted(blocks)
    ranges = [range(evaluate(blocks[b].hi, p.dims)) for b in names]  # type: ignore[arg-type]
    combos = list(itertools.product(*ranges))
    for values in combos:
        env.update(zip(names, values, strict=True))
        dims_at.update(zip(names, values, strict=True))
        visit(kernel.body, 1.0 / len(combos))
    return out


@pytest.mark.parametrize("path", [*examples_present(), *sorted(DATA.glob("*.cake"))],
                         ids=lambda p: p.name)
def test_every_op_is_priced_by_the_product_of_its_loops_trip_counts(path: Path) -> None:
    k = kernel_from_text(path.read_text(encoding="utf-8"), path.name)
    dims = {d: 1024 for d in k.dims} | ({"B": 4} if "B" in k.dims else {})
    gpu = H200 if k.arch == "sm_90a" else None
    p = profile(k, dims, gpu)
    expected = _expected_execs(k, p)
    # an op in a loop of no trips at these dims (softmax_sm90_online's `range(1, N // NC)`
    # at N = NC) is listed with no executions; the visit above never reaches it
    assert {id(w.op) for w in p.ops if w.execs} == {i for i, e in expected.items() if e}
    for w in p.ops:
        assert w.execs == pytest.approx(expected.get(id(w.op), 0.0)), (
            path.name, w.line + 1, w.op.prim.key)


@pytest.mark.parametrize("inner", [2, 4])
def test_an_op_in_a_doubly_nested_loop_is_priced_trips_times_trips(inner: int) -> None:
    k = nested(inner)
    for kdim in (4096, 8192):
        dims = {**CUBE, "K": kdim}
        p = profile(k, dims, H200)
        outer = kdim // (inner * 64)
        loads = [w for w in p.ops if w.op.prim.name == "tma_load"]
        assert [w.execs for w in loads] == [outer * inner] * 2
        e = estimate(p)
        latency = default_coefficients(H200).dram_latency_ns * 1e-9
        assert e.terms["waited"] == pytest.approx(_waves(p) * outer * inner * latency)
        # the same iterations in one flat loop cost the same
        flat = predict(data("gemm_mbarrier_sm90.cake"), dims, H200)
        assert e.terms["waited"] == pytest.approx(flat.terms["waited"], rel=1e-9)
        assert e.terms["tensor"] == pytest.approx(flat.terms["tensor"], rel=1e-9)
        assert e.seconds == pytest.approx(flat.seconds, rel=0.02)


def test_doubling_the_outer_loop_doubles_the_waits() -> None:
    a = predict(nested(2), {**CUBE, "K": 8192}, H200)
    b = predict(nested(2), {**CUBE, "K": 16384}, H200)
    assert b.terms["waited"] == pytest.approx(2 * a.terms["waited"], rel=1e-9)
