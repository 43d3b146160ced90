"""`with elect_one():` -- a block run by one fixed thread of its role (thread 0, the thread
that issues the role's TMA), checked, simulated, lowered and emulated on one kernel: the
sm_90a tinygemm whose epilogue issues its TMA store and waits for it inside the block."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from cake_cli.main import main
from cake_core.check import check_text
from cake_core.emulate import host_compiler_present
from cake_core.lower import lower_source
from cake_core.source import SourceFile

ROOT = Path(__file__).resolve().parents[1]
TINY = (ROOT / "examples" / "tinygemm_sm90.cake").read_text(encoding="utf-8")
_EPILOGUE = ("        tma_store(C.tile((BM, BN), (0, block.x)), sc)\n"
             "        tma_store_wait(0)             # sc must stay alive until the store has "
             "read it\n")
assert _EPILOGUE in TINY
ELECTED = TINY.replace(_EPILOGUE, "        with elect_one():\n"
                       "            tma_store(C.tile((BM, BN), (0, block.x)), sc)\n"
                       "            tma_store_wait(0)\n")


def codes_of(text: str) -> list[tuple[str, int]]:
    return [(d.code, d.span.start.line + 1) for d in check_text(text, "k.cake").diagnostics]


def line_of(text: str, needle: str) -> int:
    """The last line holding `needle` (the edits below append to the epilogue)."""
    return max(i for i, line in enumerate(text.splitlines(), 1) if needle in line)


def test_one_thread_ops_inside_check_clean() -> None:
    assert codes_of(ELECTED) == []


@pytest.mark.parametrize("inside", ["barrier_sync(1, 4)", "syncthreads()", "wgmma_wait(0)",
                                    "store(sc, cast(acc, bf16))", "ring.release()"])
def test_a_collective_inside_is_reported_at_its_line(inside: str) -> None:
    text = ELECTED.replace("            tma_store_wait(0)\n",
                           f"            tma_store_wait(0)\n            {inside}\n")
    assert ("CK112", line_of(text, "            " + inside)) in codes_of(text)


def test_elect_one_takes_no_arguments_and_does_not_nest() -> None:
    assert [c for c, _ in codes_of(ELECTED.replace("elect_one()", "elect_one(1)"))] == ["CK103"]
    nested = ELECTED.replace("            tma_store_wait(0)\n",
                             "            with elect_one():\n                tma_store_wait(0)\n")
    assert ("CK112", line_of(nested, "                tma_store_wait(0)") - 1) in codes_of(nested)


def test_lowering_runs_the_block_in_thread_0_without_a_second_election() -> None:
    res = lower_source(SourceFile(ELECTED, "k.cake"))
    assert res.cu is not None, [d.message for d in res.diagnostics]
    body = res.cu.split("__global__", 1)[1]
    block = body.split("if (thread_rank == 0) {", 1)[1].split("}", 1)[0]
    assert "cake_tma_store_2d(" in block and "cake_bulk_wait_read<0>();" in block
    assert "leader" not in block  # the block's thread is the leader: no nested election
    assert "thread_rank = int(threadIdx.x) - 128" in body  # role-relative, not the block's


def test_simulation_is_clean_and_right(tmp_path: Path) -> None:
    p = tmp_path / "t.cake"
    p.write_text(ELECTED, encoding="utf-8")
    r = CliRunner().invoke(main, ["run", str(p), "--task", "gemm_bf16", "--sim",
                                  "--dims", "M=64,N=64,K=128"])
    assert r.exit_code == 0, r.output
    assert "1/1 shapes match the reference" in r.output and "finding" not in r.output


@pytest.mark.skipif(not host_compiler_present(), reason="needs a host C++ compiler")
def test_emulated_cuda_is_right(tmp_path: Path) -> None:
    p = tmp_path / "t.cake"
    p.write_text(ELECTED, encoding="utf-8")
    r = CliRunner().invoke(main, ["run", str(p), "--task", "gemm_bf16", "--emulate",
                                  "--dims", "M=64,N=64,K=128"])
    assert r.exit_code == 0, r.output
    assert "1/1 shapes correct" in r.output



def test_a_fence_in_an_elected_block_orders_only_that_thread() -> None:
    """All four warps write the tile; a fence run by the elected thread alone leaves the
    others' writes unordered before the TMA store (CK315), and a collective there is one
    CK112, not a second finding from the divergence pass."""
    fenced = ELECTED.replace("        fence_proxy_async()",
                             "        with elect_one():\n            fence_proxy_async()", 1)
    assert fenced != ELECTED
    assert [c for c, _ in codes_of(fenced)] == ["CK315"]
    waited = ELECTED.replace("            wgmma_wait(0)\n            ring.release()",
                             "            with elect_one():\n                wgmma_wait(0)\n"
                             "            ring.release()", 1)
    assert waited != ELECTED
    assert [c for c, _ in codes_of(waited)] == ["CK112"]
