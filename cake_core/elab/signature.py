"""The kernel's signature: the @kernel decorator (arch, grid, warps, cluster) and typed
parameters (`A: Tensor[bf16, (M, K)]`, scalar dtypes)."""

from __future__ import annotations

import difflib

from cake_core.diagnostics import codes
from cake_core.diagnostics.model import Applicability, Fix, TextEdit
from cake_core.elab.state import KernelState
from cake_core.hardware import suggest_arch
from cake_core.ir.kernel import Value
from cake_core.ir.types import (
    DType,
    ErrorType,
    IntType,
    ScalarType,
    StrType,
    TensorType,
)
from cake_core.ir.values import elements
from cake_core.source import Span
from cake_core.syntax import ast

#: arch name, arch span, grid, warps, warps span, cluster
Decorator = tuple[str, Span | None, tuple, int, Span | None, tuple[int, ...]]


def parse_decorator(kb: KernelState) -> Decorator | None:
    fn = kb.fn
    decos = [d for d in fn.decorators
             if isinstance(d, ast.Call) and isinstance(d.func, ast.Name)
             and d.func.id == "kernel"]
    if len(fn.decorators) != 1 or len(decos) != 1:
        span = fn.decorators[0].span if fn.decorators else fn.name_span
        kb.diags.append(codes.BAD_KERNEL_SIGNATURE.at(
            span, f"`{fn.name}` needs exactly one decorator, "
            "`@kernel(arch=..., grid=..., warps=...)`"))
        return None
    call = decos[0]
    kws = {kw.name: kw for kw in call.keywords}
    ok = True
    for kw in call.keywords:
        if kw.name not in ("arch", "grid", "warps", "cluster"):
            hit = difflib.get_close_matches(kw.name, ["arch", "grid", "warps", "cluster"], 1)
            fixes = [Fix(f"rename to `{hit[0]}`", (TextEdit(kw.name_span, hit[0]),))] \
                if hit else []
            kb.diags.append(codes.BAD_KERNEL_SIGNATURE.at(
                kw.name_span, f"@kernel has no parameter `{kw.name}`"
                + (f"; did you mean `{hit[0]}`?" if hit else ""), fixes=fixes))
            ok = False
    if call.args:
        kb.diags.append(codes.BAD_KERNEL_SIGNATURE.at(
            call.args[0].span, "@kernel takes keyword arguments only: "
            "arch=, grid=, warps=, cluster="))
        ok = False
    # arch
    arch_name: str | None = kb.pb.arch_override
    arch_span: Span | None = None
    if "arch" in kws:
        arch_span = kws["arch"].value.span
        v = kb.ev.expr(kws["arch"].value)
        if not isinstance(v.type, StrType):
            kb.diags.append(codes.BAD_KERNEL_SIGNATURE.at(
                arch_span, 'arch must be a string such as "sm_90a"'))
            ok = False
        elif arch_name is None:
            arch_name = str(v.const)
            if kb.pb.arch_spec(arch_name) is None:
                arch_hit = suggest_arch(arch_name)
                fixes = [Fix(f'use "{arch_hit}"', (TextEdit(arch_span, f'"{arch_hit}"'),),
                             Applicability.UNSAFE)] if arch_hit else []
                kb.diags.append(codes.ARCH_UNSUPPORTED.at(
                    arch_span, f"unknown arch {arch_name!r}"
                    + (f'; did you mean "{arch_hit}"?' if arch_hit else ""), fixes=fixes,
                    notes=["known archs: sm_80, sm_86, sm_89, sm_90, sm_90a, sm_100a"]))
                ok = False
    elif arch_name is None:
        kb.diags.append(codes.BAD_KERNEL_SIGNATURE.at(
            call.span, '@kernel needs an arch, e.g. arch="sm_90a" (or pass --arch)'))
        ok = False
    elif kb.pb.arch_spec(arch_name) is None:
        kb.diags.append(codes.ARCH_UNSUPPORTED.at(call.span, f"unknown arch {arch_name!r}"))
        ok = False
    # grid
    grid: tuple = ()
    if "grid" not in kws:
        kb.diags.append(codes.BAD_KERNEL_SIGNATURE.at(
            call.span, "@kernel needs a grid, e.g. grid=(cdiv(M, BM), cdiv(N, BN))"))
        ok = False
    else:
        gv = kb.ev.expr(kws["grid"].value)
        elts = elements(gv)
        syms = []
        for e in elts:
            if isinstance(e.type, ErrorType):
                ok = False
            elif not isinstance(e.type, IntType) or e.sym is None or \
                    not e.sym.is_launch_constant:
                kb.diags.append(codes.BAD_KERNEL_SIGNATURE.at(
                    kws["grid"].value.span, "grid entries must be ints known at launch "
                    "(constants and dim() sizes)"))
                ok = False
                break
            else:
                syms.append(e.sym)
        if ok and not 1 <= len(syms) <= 3:
            kb.diags.append(codes.BAD_KERNEL_SIGNATURE.at(
                kws["grid"].value.span, f"grid has {len(syms)} dimensions; it takes 1 to 3"))
            ok = False
        grid = tuple(syms)
    # warps
    warps = 4
    warps_span: Span | None = None
    if "warps" in kws:
        warps_span = kws["warps"].value.span
        wv = kb.ev.expr(kws["warps"].value)
        c = wv.sym.const if wv.sym is not None else None
        if c is None or not 1 <= c <= 32:
            kb.diags.append(codes.BAD_KERNEL_SIGNATURE.at(
                warps_span, "warps must be a constant from 1 to 32 (at most 1024 threads)"))
            ok = False
        else:
            warps = c
    cluster: tuple[int, ...] = (1,)
    if "cluster" in kws:
        cv = kb.ev.expr(kws["cluster"].value)
        elts = elements(cv)
        cs = [e.sym.const if e.sym is not None else None for e in elts]
        if any(c is None or c < 1 for c in cs) or not 1 <= len(cs) <= 3:
            kb.diags.append(codes.BAD_KERNEL_SIGNATURE.at(
                kws["cluster"].value.span, "cluster must be 1 to 3 positive constants"))
            ok = False
        else:
            cluster = tuple(c for c in cs if c is not None)
    if not ok or arch_name is None:
        return None
    return arch_name, arch_span, grid, warps, warps_span, cluster

def parse_param(kb: KernelState, p: ast.Param) -> Value | None:
    if p.default is not None:
        kb.diags.append(codes.BAD_KERNEL_SIGNATURE.at(
            p.default.span, "kernel parameters take no defaults"))
    ann = p.annotation
    if ann is None:
        kb.diags.append(codes.BAD_KERNEL_SIGNATURE.at(
            p.name_span, f"parameter `{p.name}` needs a type, e.g. "
            f"`{p.name}: Tensor[bf16, (M, K)]`"))
        return None
    if isinstance(ann, ast.Subscript) and isinstance(ann.value, ast.Name) and \
            ann.value.id == "Tensor":
        idx = ann.index.elts if isinstance(ann.index, ast.Tuple) else (ann.index,)
        if len(idx) != 2:
            kb.diags.append(codes.BAD_KERNEL_SIGNATURE.at(
                ann.span, "write tensor types as Tensor[dtype, (d0, d1, ...)]"))
            return None
        dt = kb.ev.expr(idx[0])
        shp = kb.ev.expr(idx[1])
        if not isinstance(dt.const, DType):
            if not isinstance(dt.type, ErrorType):
                kb.diags.append(codes.BAD_KERNEL_SIGNATURE.at(
                    idx[0].span, "the first argument of Tensor[...] must be a dtype"))
            return None
        elts = elements(shp)
        dims = []
        for e in elts:
            if isinstance(e.type, ErrorType):
                return None
            if not isinstance(e.type, IntType) or e.sym is None or \
                    not e.sym.is_launch_constant:
                kb.diags.append(codes.BAD_KERNEL_SIGNATURE.at(
                    idx[1].span, "tensor extents must be constants or dim() sizes"))
                return None
            dims.append(e.sym)
        return Value(p.name, TensorType(dt.const, tuple(dims)), p.name_span)
    v = kb.ev.expr(ann)
    if isinstance(v.const, DType):
        return Value(p.name, ScalarType(v.const), p.name_span)
    if not isinstance(v.type, ErrorType):
        kb.diags.append(codes.BAD_KERNEL_SIGNATURE.at(
            ann.span, "a kernel parameter is a Tensor[dtype, shape] or a scalar dtype"))
    return None
