"""Completeness of the primitive registry and the code table (xDSL's discipline).

A primitive is only usable if every facet the compiler relies on is there: a type rule,
documentation for hovers and `cake explain`, an effects spec the verifier reads, and
hardware requirements that name real features.  A gap is a failing test here rather
than a surprise in the language server or the verifier.  Registration is explicit and a
name registered twice is an error, never a silent shadow: plugins depend on that.
"""

from __future__ import annotations

import re
from dataclasses import replace

import pytest

from cake_core.diagnostics import codes
from cake_core.diagnostics.codes import DuplicateCodeError, Rule
from cake_core.hardware import Feature
from cake_core.ir.types import DType, PipelineType, SmemLayout, SmemType, Type
from cake_core.primitives.registry import (
    DuplicatePrimitiveError,
    EffectSpec,
    Primitive,
    Registry,
    builtin_registry,
    extended_registry,
)

PRIMS = builtin_registry().all()
ASYNC_GROUPS = {"cp_async", "tma", "bulk_store", "wgmma"}
_SENTENCE = re.compile(r"^[A-Z`(].*[.!?]$")


@pytest.mark.parametrize("prim", PRIMS, ids=[p.key for p in PRIMS])
def test_primitive_is_complete(prim: Primitive) -> None:
    assert prim.name.isidentifier() and prim.family
    assert callable(prim.type_rule), "no type rule"
    first = prim.doc.strip().splitlines()[0] if prim.doc.strip() else ""
    assert _SENTENCE.match(first) and len(first.split()) >= 3, (
        f"the doc's first line must be a sentence: {first!r}")
    assert prim.summary == first
    assert isinstance(prim.effects, EffectSpec), "no effects spec"
    assert isinstance(prim.requires, frozenset)
    assert all(isinstance(f, Feature) for f in prim.requires), prim.requires
    assert {f.value for f in prim.requires} <= {f.value for f in Feature}


@pytest.mark.parametrize("prim", PRIMS, ids=[p.key for p in PRIMS])
def test_effects_name_real_parameters(prim: Primitive) -> None:
    """The verifier looks effects up by parameter name: a typo there is a silent hole."""
    names = [p.name for p in prim.params]
    assert len(names) == len(set(names)), "duplicate parameter names"
    eff = prim.effects
    assert set(eff.reads) <= set(names) and set(eff.writes) <= set(names)
    assert eff.arrives is None or eff.arrives in names
    assert eff.waits is None or eff.waits in names or eff.waits in ASYNC_GROUPS
    assert eff.async_group is None or eff.async_group in ASYNC_GROUPS
    assert not eff.tx_bytes or eff.arrives is not None, "tx bytes ride on an arrival"


@pytest.mark.parametrize("prim", [p for p in PRIMS if p.receiver is not None],
                         ids=[p.key for p in PRIMS if p.receiver is not None])
def test_methods_bind_their_receiver_first(prim: Primitive) -> None:
    assert prim.params and prim.params[0].name == "self"
    assert prim.receiver is not None and prim.params[0].kinds == (prim.receiver,)
    assert "." in prim.key


def test_registry_lookups() -> None:
    reg = builtin_registry()
    assert reg is builtin_registry()  # built once, shared
    wg = reg.function("wgmma")
    assert wg is not None and Feature.WGMMA in wg.requires
    pipe = PipelineType("ab", 2, "load", ("mma",))
    acquire = reg.method(pipe, "acquire")
    assert acquire is not None and acquire.key == "pipeline.acquire"
    assert reg.function("acquire") is None  # methods are not functions
    assert reg.suggest("tma_laod") == "tma_load"
    assert {p.name for p in reg.methods_of(pipe)} == {"acquire", "commit", "wait", "release"}


def test_duplicate_function_is_rejected() -> None:
    reg = Registry(builtin_registry().all())
    clash = replace(reg.function("tma_load"), plugin="acme")  # type: ignore[type-var]
    with pytest.raises(DuplicatePrimitiveError, match="tma_load"):
        reg.add(clash)
    with pytest.raises(DuplicatePrimitiveError):
        extended_registry([clash])
    assert reg.function("tma_load") is not clash  # the original survives


def test_duplicate_method_is_rejected() -> None:
    reg = Registry(builtin_registry().all())
    (tile,) = [p for p in reg.all() if p.key == "smem.tile"]
    with pytest.raises(DuplicatePrimitiveError, match=r"smem\.tile"):
        reg.add(replace(tile, doc="Another tile."))


def test_same_name_on_another_receiver_is_not_a_clash() -> None:
    class OtherType(Type):
        __slots__ = ()

    reg = Registry(builtin_registry().all())
    (tile,) = [p for p in reg.all() if p.key == "smem.tile"]
    other = replace(tile, receiver=OtherType)
    reg.add(other)
    assert reg.method(OtherType(), "tile") is other
    assert reg.method(SmemType(DType.BF16, (), SmemLayout(), "buf", ()), "tile") is tile


def test_duplicate_code_is_rejected(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(codes, "_RULES", dict(codes._RULES))  # leave the real table alone
    with pytest.raises(DuplicateCodeError, match="CK101"):
        codes.register(Rule("CK101", "another-name", "Something else."))
    assert codes.lookup("CK101") is codes.UNKNOWN_NAME
    # re-registering the identical rule (a module imported twice) is not a clash
    assert codes.register(codes.UNKNOWN_NAME) is codes.UNKNOWN_NAME
    new = codes.register(Rule("ZZ101", "plugin-rule", "A plugin's own code.", origin="zz"))
    assert codes.lookup("zz101") is new
    with pytest.raises(DuplicateCodeError):
        codes.register(replace(new, summary="Changed."))


def test_code_table_is_well_formed() -> None:
    rules = codes.all_rules()
    assert [r.code for r in rules] == sorted({r.code for r in rules})
    for r in rules:
        assert re.fullmatch(r"[A-Z]{2}\d{3}", r.code), r.code
        assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", r.name), r.name
        assert r.summary.endswith("."), r.code
    names = [r.name for r in rules]
    assert len(names) == len(set(names)), "two codes share a name"
