"""The examples lower to the CUDA an expert would write, mapped back to their .cake lines."""

from __future__ import annotations

import json
import re

import pytest

from cake_core.check import check_text
from cake_core.hardware import get_arch
from cake_core.lower import LowerResult, lower_source
from cake_core.source import SourceFile
from cake_core.verify.smem_plan import smem_plan

STEMS = ["gemm_sm80", "gemm_sm90", "kmeans_assign_sm90", "kmeans_assign_sm90_dbuf",
         "kmeans_assign_sm90_pingpong", "tinygemm_sm90", "attention_fwd_sm90",
         "attention_fwd_sm90_pingpong", "attention_fwd_sm90_persistent",
         "attention_fwd_sm90_varlen",
         "attention_fwd_sm90_causal", "attention_fwd_sm90_d64",
         "attention_fwd_sm90_d256", "attention_decode_split_sm90",
         "attention_decode_split_sm90_paged"]
_LINE = re.compile(r'^#line (\d+) "([^"]*)"$')


def mapped_lines(cu: str) -> list[tuple[str, int, str]]:
    """(file, line, text) of every non-directive line, as the preprocessor numbers them."""
    out = []
    file, nxt = "<cu>", 1
    for text in cu.split("\n"):
        m = _LINE.match(text)
        if m:
            nxt, file = int(m.group(1)), m.group(2)
            continue
        out.append((file, nxt, text))
        nxt += 1
    return out


def cake_line_of(cu: str, snippet: str, cake: str) -> list[int]:
    return [ln for f, ln, t in mapped_lines(cu) if snippet in t and f == cake]


def source_line(src: SourceFile, needle: str) -> int:
    """1-based line of the first source line containing `needle`."""
    for i, text in enumerate(src.text.splitlines(), 1):
        if needle in text:
            return i
    raise AssertionError(needle)


@pytest.mark.parametrize("stem", STEMS)
def test_every_example_lowers(stem: str, lowered_examples: dict[str, LowerResult]) -> None:
    res = lowered_examples[stem]
    assert res.diagnostics == []
    assert res.cu is not None
    assert len(res.kernels) == 1
    k = res.kernels[0]
    assert f'extern "C" __global__ void __launch_bounds__({k.meta["block"][0]}, 1)' in res.cu
    assert "CAKE_DYNAMIC_SMEM(smem);" in res.cu
    assert f"extern \"C\" cudaError_t cake_launch_{k.entry}(" in res.cu
    assert f"cake_meta_{k.entry}[]" in res.cu


@pytest.mark.parametrize("stem", STEMS)
def test_smem_offsets_follow_the_verifier_plan(stem: str, example_sources: dict[str, SourceFile],
                                               lowered_examples: dict[str, LowerResult]) -> None:
    src = example_sources[stem]
    res = lowered_examples[stem]
    kernel = check_text(src.text, src.path).program.kernels[0]
    plan = smem_plan(kernel, get_arch(kernel.arch))
    assert res.kernels[0].smem_bytes == plan.total == res.kernels[0].meta["smem_bytes"]
    assert res.cu is not None
    for p in plan.placements:
        const = f"SMEM_{p.name.upper()}_OFFSET"
        assert f"constexpr uint32_t {const} = {p.offset};" in res.cu


def test_sm90_gemm_is_warp_specialised(lowered_examples: dict[str, LowerResult],
                                       example_sources: dict[str, SourceFile]) -> None:
    cu = lowered_examples["gemm_sm90"].cu
    src = example_sources["gemm_sm90"]
    assert cu is not None
    # one branch per role, by warpgroup; register budgets around the launch allocation (168)
    assert "if (warp_id / 4 == 0) {" in cu and "if (warp_id / 4 >= 1 && warp_id / 4 < 3) {" in cu
    assert "cake_setmaxnreg_dec<40>();" in cu and "cake_setmaxnreg_inc<232>();" in cu
    assert "setmaxnreg.dec.sync.aligned.u32" in cu and "setmaxnreg.inc.sync.aligned.u32" in cu
    # barriers: 1 producer arrival fills a stage, 8 consumer warps release it
    assert "cake_mbar_init(ab_full + 8 * st, 1); cake_mbar_init(ab_empty + 8 * st, 8);" in cu
    # one phase per (barrier set, role): empty from parity 1, full from parity 0
    assert "CakeCursor ab_acquire = {0, 1u, 0};" in cu
    assert "CakeCursor ab_wait = {0, 0u, 0};" in cu
    # the commit's transaction bytes: (128 + 256) x 64 x 2, announced at acquire
    assert "cake_pipe_acquire(ab_acquire, ab_full, ab_empty, 4, 49152u, true)" in cu
    assert "mbarrier.try_wait.parity.shared::cta.b64" in cu
    assert "mbarrier.expect_tx.relaxed.cta.shared::cta.b64" in cu
    assert "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes" in cu
    # wgmma: 128B-swizzle descriptors (mode 1, SBO 1024), K steps of 32 bytes, 2 slabs of 64
    assert "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16" in cu
    assert "cake_wgmma_desc(smem_u32 + SMEM_SA_OFFSET + s * 16384 + wg_rank * 8192 + kk * 32, " \
           "16, 1024, 1)" in cu
    assert "cake_wgmma_desc(smem_u32 + SMEM_SB_OFFSET + s * 32768 + kk * 32, 16, 1024, 1)" in cu
    assert "cake_wgmma_wait<1>();" in cu and "cake_wgmma_wait<0>();" in cu
    # the producer runs in one elected thread; TMA coordinates innermost first
    assert "if (leader) {" in cu
    assert "&tmap_A, ab_full + 8 * ab_acquire.held, k * 64, int(blockIdx.x) * 128);" in cu
    # ops map to their lines
    assert cake_line_of(cu, "cake_pipe_acquire(", src.path) == [source_line(src, "ab.acquire()")]
    assert cake_line_of(cu, "cake_tma_load_2d(smem_u32 + SMEM_SB_OFFSET", src.path) == \
        [source_line(src, "tma_load(sb[s]")]
    assert set(cake_line_of(cu, "cake_wgmma_m64n256k16_bf16(acc", src.path)) == {
        i for i, t in enumerate(src.text.splitlines(), 1) if "wgmma(acc, sa[s]" in t}
    store = source_line(src, "store(C.tile")
    assert cake_line_of(cu, "cake_store_global_if<2>(C + int64_t(grow) * N + gcol", src.path) == \
        [store]


def test_sm80_gemm_uses_cp_async_ldmatrix_mma(lowered_examples: dict[str, LowerResult]) -> None:
    cu = lowered_examples["gemm_sm80"].cu
    assert cu is not None
    assert "cp.async.cg.shared.global [%0], [%1], 16, %2;" in cu
    assert "cake_cp_async_wait<1>();" in cu and "cake_cp_async_commit();" in cu
    # A (M, K) K-major: plain ldmatrix; B seen as the .T of (N, K): plain too (K contiguous)
    assert "cake_ldmatrix_x4(&a[mt * 4]" in cu and "cake_ldmatrix_x4(&b[np * 4]" in cu
    assert "_trans(" not in cu.split("// ==== kernel")[1]
    assert "cake_mma_m16n8k16_f16(&acc[mt * 32 + nt * 4], &a[mt * 4], &b[nt * 2]);" in cu
    # swizzle(64) on every shared-memory address the kernel computes
    assert "cake_swizzle<64>(SMEM_SA_OFFSET + p * 8192 + crow * 64 + ccol * 2)" in cu
    # zero-fill past the edges: 0 source bytes
    assert "ok ? 16u : 0u" in cu
    assert "setmaxnreg" not in cu.split("// ==== kernel")[1]


def test_kmeans_reduces_rows_with_shuffles(lowered_examples: dict[str, LowerResult]) -> None:
    cu = lowered_examples["kmeans_assign_sm90"].cu
    assert cu is not None
    # 3-D tensor maps for the batched tensors, 2-D for the norms
    assert "cake_tma_load_3d(smem_u32 + SMEM_SX_OFFSET + h * 16384, &tmap_X, xready" in cu
    assert "cake_tma_load_2d(smem_u32 + SMEM_SCN_OFFSET + s * 512, &tmap_Cn" in cu
    # the raw barrier: one arrival with the X tile's bytes, waited with parity 0
    assert "cake_mbar_arrive_expect_tx(xready, 32768);" in cu
    assert "cake_mbar_wait(xready, 0);" in cu
    # stage bytes: 2 x 128 x 64 x 2 + 128 x 4
    assert "3, 33280u, true)" in cu
    # the norms are loaded per column of the accumulator the thread holds (float2)
    assert "float cn[32];" in cu and "cake_load_vec<2>(reinterpret_cast<const float*>(" in cu
    # argmin: the 4 lanes of a quad share a row
    assert "cake_argmin_xor(best, best_col, 1); cake_argmin_xor(best, best_col, 2);" in cu
    assert "__fsub_rn(cn[" in cu and "__fmul_rn(2.0f, dot[" in cu
    # one replica (lane % 4 == 0) stores each row's index
    assert "lane % 4 == 0 && gi0 < B && gi1 < N" in cu


def test_kmeans_dbuf_keeps_one_chunk_in_flight(lowered_examples: dict[str, LowerResult]) -> None:
    cu = lowered_examples["kmeans_assign_sm90_dbuf"].cu
    assert cu is not None
    body = cu.split("for (int p = 0; p < (K / 128 - 1) / 2; ++p) {")[1]
    body = body.split("if (K / 128 % 2 == 0)")[0]
    # two accumulators, each waited with the other's two groups still in flight
    assert body.count("cake_wgmma_wait<2>();") == 2 and "cake_wgmma_wait<0>" not in body
    assert "__fmul_rn(2.0f, d0[" in body and "__fmul_rn(2.0f, d1[" in body


def test_kmeans_pingpong_orders_the_wgmma_issue(lowered_examples: dict[str, LowerResult]
                                                ) -> None:
    """Each consumer warpgroup hands the turn over right after issuing its wgmmas, before
    it drains them: the other one's MMA queues behind while this one runs its argmin."""
    cu = lowered_examples["kmeans_assign_sm90_pingpong"].cu
    assert cu is not None
    dist0, dist1 = cu.split('// role "dist0"')[1].split('// role "dist1"')
    for body, sync, arrive in ((dist0, "cake_bar_sync(2, 256);", "cake_bar_arrive(1, 256);"),
                               (dist1, "cake_bar_sync(1, 256);", "cake_bar_arrive(2, 256);")):
        issue = body.index("cake_wgmma_commit();")
        assert body.index(sync) < issue < body.index(arrive) < body.index("cake_wgmma_wait<0>")
    assert "if (j > 0) {\n        cake_bar_sync(2, 256);" in dist0
    assert "if (j < K / 128 - 1) {\n        cake_bar_arrive(2, 256);" in dist1


def test_tinygemm_stores_through_smem_with_tma(lowered_examples: dict[str, LowerResult]) -> None:
    cu = lowered_examples["tinygemm_sm90"].cu
    assert cu is not None
    body = cu.split("// ==== kernel")[1]
    assert "setmaxnreg" not in body  # no regs= in this kernel
    assert "cake_store_vec<2>(reinterpret_cast<__nv_bfloat16*>(smem + cake_swizzle<64>(" in cu
    assert "cake_fence_proxy_async();" in cu and "cake_bar_sync(1, 128);" in cu
    assert "if (leader) { cake_tma_store_2d(&tmap_C, smem_u32 + SMEM_SC_OFFSET, " \
           "int(blockIdx.x) * 32, 0); cake_bulk_commit(); }" in cu
    assert "if (leader) cake_bulk_wait_read<0>();" in cu
    assert "cp.async.bulk.wait_group.read %0;" in cu


def test_metadata_describes_the_launch(lowered_examples: dict[str, LowerResult]) -> None:
    meta = lowered_examples["gemm_sm90"].kernels[0].meta
    assert meta["schema"] == "cake.lower/1"
    assert meta["block"] == [384, 1, 1] and meta["arch"] == "sm_90a"
    assert meta["grid"] == [{"op": "cdiv", "args": [{"dim": "M"}, 128]},
                            {"op": "cdiv", "args": [{"dim": "N"}, 256]}]
    kinds = [(p["name"], p["kind"]) for p in meta["params"]]
    assert kinds == [("A", "tensor"), ("B", "tensor"), ("C", "tensor"), ("M", "dim"),
                     ("N", "dim"), ("K", "dim"), ("tmap_A", "tensor_map"),
                     ("tmap_B", "tensor_map")]
    assert meta["launcher_params"] == ["A", "B", "C", "M", "N", "K", "stream"]
    assert meta["tensor_maps"][0] == {"name": "tmap_A", "tensor": "A", "dtype": "bf16",
                                      "box": [64, 128], "swizzle": 128, "oob_fill": "zero",
                                      "interleave": "none", "l2_promotion": "256B"}
    assert meta["launch_regs"] == 168
    cu = lowered_examples["gemm_sm90"].cu
    assert cu is not None
    embedded = re.search(r'R"cakejson\((.*)\)cakejson"', cu)
    assert embedded is not None and json.loads(embedded.group(1)) == meta


def test_a_kernel_with_errors_is_not_lowered() -> None:
    src = SourceFile("M = dim(\"M\")\n\n@kernel(arch=\"sm_90a\", grid=(M,), warps=4)\n"
                     "def k(A: Tensor[f32, (M,)]):\n    x = load(A.tile((128,), (block.x,)))\n"
                     "    store(A.tile((128,), (block.x,)), y)\n", "bad.cake")
    res = lower_source(src)
    assert res.cu is None
    assert [d.code for d in res.diagnostics] == ["CK101"]


MN_MAJOR = """\
BM, BN, BK = 64, 64, 64
M, N, K = dim("M"), dim("N", multiple_of=8), dim("K", multiple_of=8)

@kernel(arch="sm_90a", grid=(cdiv(M, BM), cdiv(N, BN)), warps=8)
def gemm_kn(A: Tensor[bf16, (M, K)], B: Tensor[bf16, (K, N)], C: Tensor[bf16, (M, N)]):
    sa = smem(bf16, (2, BM, BK), layout=swizzle(128))
    sb = smem(bf16, (2, BK, BN), layout=swizzle(128))
    ab = pipeline(stages=2, producer="load", consumer="mma")
    with role("load", warps=range(0, 4)):
        for k in range(cdiv(K, BK)):
            s = ab.acquire()
            tma_load(sa[s], A.tile((BM, BK), (block.x, k)), ab)
            tma_load(sb[s], B.tile((BK, BN), (k, block.y)), ab)
            ab.commit()
    with role("mma", warps=range(4, 8)):
        acc = fragment(f32, (BM, BN), layout=wgmma_acc)
        for k in range(cdiv(K, BK)):
            s = ab.wait()
            wgmma(acc, sa[s], sb[s])
            wgmma_wait(0)
            ab.release()
        store(C.tile((BM, BN), (block.x, block.y)), cast(acc, bf16))
"""


def test_an_unsupported_construct_is_ck601_at_its_range() -> None:
    src = SourceFile(MN_MAJOR, "mn.cake")
    assert check_text(MN_MAJOR, "mn.cake").diagnostics == []
    res = lower_source(src)
    assert res.cu is None
    (d,) = res.diagnostics
    assert d.code == "CK601" and "MN-major" in d.message
    assert src.snippet(d.span) == "sb[s]"


SOFTMAX = """\
ROWS, D = 4, 1024
M = dim("M")

@kernel(arch="sm_80", grid=(cdiv(M, ROWS),), warps=4)
def softmax(X: Tensor[f32, (M, D)], Y: Tensor[f32, (M, D)]):
    x = load(X.tile((ROWS, D), (block.x, 0)))
    e = exp(x - unsqueeze(row_max(x), 1))
    y = e / unsqueeze(row_sum(e), 1)
    store(Y.tile((ROWS, D), (block.x, 0)), y)
"""


def test_generic_rows_layout_vectorises_and_reduces_in_the_warp() -> None:
    res = lower_source(SourceFile(SOFTMAX, "softmax.cake"))
    assert res.diagnostics == [] and res.cu is not None
    cu = res.cu
    # a row per warp, 16-byte vectors over the lanes, predicated at the M edge only
    assert "cake_load_global_if<4>(X + int64_t(grow) * 1024 + gcol, &x[q * 4], grow < M);" in cu
    for mask in (16, 8, 4, 2, 1):
        assert f"red = fmaxf(red, cake_shfl_xor(red, {mask}));" in cu
    assert "exp2f(__fmul_rn(" in cu and "__fdiv_rn(e[q * 4 + v], t6[0])" in cu
