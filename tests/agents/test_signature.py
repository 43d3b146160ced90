"""Failure signatures: code + construct shape, not names and numbers."""

from __future__ import annotations

from cake_agents.signature import construct_shape, normalize_message, signature


def test_construct_shape_keeps_builtins_and_drops_names() -> None:
    a = construct_shape("    sc = smem(bf16, (STAGES, BN, BK), layout=swizzle(128))")
    b = construct_shape("sb = smem(bf16, (S, TN, TK), layout=swizzle(64))")
    assert a == b == "_ = smem(bf16, (_, _, _), layout=swizzle(N))"
    assert construct_shape("tma_load(sa[s], A.tile((BM, BK), (block.x, k)), ab)") == \
        "tma_load(_[_], _.tile((_, _), (block.x, _)), _)"
    assert construct_shape("if a == b: s = ab.wait()") == "if _ == _: _ = _.wait()"


def test_signature_abstracts_the_message() -> None:
    s1 = signature("sim", "E-SIMSETUP", "B=2,N=256: input `X` has shape (2, 256, 128)")
    s2 = signature("sim", "E-SIMSETUP", "B=1,N=100: input `Y` has shape (1, 100, 128)")
    assert s1 == s2 and s1.key.startswith("sim:E-SIMSETUP:")
    assert normalize_message("smem 245760 B exceeds `sc`") == "smem N B exceeds `_`"
    s3 = signature("check", "CK201", "too much", "x = smem(f32, (A, 4))")
    assert s3.construct == "_ = smem(f32, (_, N))" and len(s3.digest) == 16
