"""fuse-multiply-add: `a - c * x` on fragments becomes `fma(x, -c, a)`, one FFMA.

Written out, `a - c * x` is two CUDA-core instructions per element (FMUL, FADD); the
hardware has a fused multiply-add that does both in one (PTX `fma.rn.f32`).  nvcc
contracts `a - c * x` in scalar code by itself, but the CUDA-core time of an element-wise
epilogue is what a register-math bound kernel (an argmin, a softmax) spends, so the kernel
says what it means.

Only a constant `c` that is a power of two (`2.0`, `-0.5`, ...) is fused: then `c * x` is
exact, and `fma(x, c, a)` rounds `a + c * x` once, as the unfused form does, so the result
is bit-identical (up to `c * x` overflowing where the fused form would not).  Other
constants would change the rounding: they are left alone.  Forms rewritten, on fragments
of a floating-point type:

    a - c * x, a - x * c   ->  fma(x, -c, a)
    a + c * x, c * x + a   ->  fma(x, c, a)      (and the mirrored products)

The rewrite is offered only when it verifies and when the simulator, on a small shape
with the same random inputs, finds nothing and writes exactly the original's outputs.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from cake_core.diagnostics.model import TextEdit, apply_edits
from cake_core.ir.kernel import Kernel, Op
from cake_core.ir.types import FragmentType
from cake_core.plugins import Tactic, TacticResult
from cake_core.primitives.registry import Provenance
from cake_core.rewrite_cost import verified_rewrite
from cake_core.source import SourceFile
from cake_core.syntax import ast
from cake_tactics.kernel_text import kernel_def

PROV = Provenance("hand-written", "2026-12-05", ("examples/kmeans_assign_sm90.cake",))


def _power_of_two(node: ast.Expr) -> float | None:
    """The value of a numeric constant (or its negation) that is a nonzero power of two."""
    sign = 1.0
    if isinstance(node, ast.UnaryOp) and node.op == "-":
        sign, node = -1.0, node.operand
    if not isinstance(node, ast.Constant) or isinstance(node.value, bool) or \
            not isinstance(node.value, int | float):
        return None
    v = float(node.value)
    if v == 0.0 or not math.isfinite(v) or math.frexp(abs(v))[0] != 0.5:
        return None
    return sign * v


def _product(node: ast.Expr) -> tuple[float, ast.Expr] | None:
    """`c * x` or `x * c` with c a power of two: (c, x)."""
    if not isinstance(node, ast.BinOp) or node.op != "*":
        return None
    c = _power_of_two(node.left)
    if c is not None:
        return c, node.right
    c = _power_of_two(node.right)
    return (c, node.left) if c is not None else None


def _literal(v: float) -> str:
    return repr(float(v))


def _is_float_fragment_op(ops: dict[tuple[int, int], Op], node: ast.Expr) -> bool:
    op = ops.get((node.span.start.offset, node.span.end.offset))
    if op is None or op.name not in ("add", "sub") or not op.results:
        return False
    t = op.results[0].type
    return isinstance(t, FragmentType) and t.dtype.value in ("f32", "f16", "bf16")


def _sites(kernel: Kernel, source: SourceFile) -> list[tuple[ast.BinOp, str]]:
    """Each fusable `+`/`-` expression and its fused text, outermost first, none nested in
    another (a nested one is found on the next application)."""
    fn = kernel_def(source, kernel)
    if fn is None:
        return []
    ops = {(op.span.start.offset, op.span.end.offset): op for op in kernel.ops()}
    text = source.text.encode()

    def src(e: ast.Expr) -> str:
        return text[e.span.start.offset:e.span.end.offset].decode()

    out: list[tuple[ast.BinOp, str]] = []
    for node in ast.walk(fn):
        if not isinstance(node, ast.BinOp) or node.op not in ("+", "-"):
            continue
        if any(o.span.start.offset <= node.span.start.offset and
               node.span.end.offset <= o.span.end.offset for o, _ in out):
            continue
        if not _is_float_fragment_op(ops, node):
            continue
        right = _product(node.right)
        left = _product(node.left) if node.op == "+" else None
        if right is not None:
            c, x = right
            addend = node.left
            c = -c if node.op == "-" else c
        elif left is not None:
            c, x = left
            addend = node.right
        else:
            continue
        out.append((node, f"fma({src(x)}, {_literal(c)}, {src(addend)})"))
    return out


def _applies(kernel: Kernel, source: SourceFile) -> str | None:
    sites = _sites(kernel, source)
    if not sites:
        return None
    lines = ", ".join(str(n.span.start.line + 1) for n, _ in sites)
    return (f"a multiply and an add by a power of two on fragments (line {lines}): two "
            "CUDA-core instructions per element where one FFMA gives the same result")


def _variants(kernel: Kernel, source: SourceFile) -> list[dict[str, Any]]:
    return [{}] if _sites(kernel, source) else []


def _same_outputs(kernel: Kernel, before: str, after: str, path: str) -> bool:
    """The simulator runs both kernels on one small launch with the same random inputs:
    the rewrite must raise no finding and write exactly the original's outputs."""
    from cake_core.sim import SimKernel, simulate
    from cake_core.sim.inputs import default_dims, random_inputs

    try:
        old = SimKernel.from_text(before, path, kernel.name)
        new = SimKernel.from_text(after, path, kernel.name)
        dims = default_dims(old, 16)
        data = random_inputs(old, dims, seed=0)
        r0, r1 = simulate(old, dims, data), simulate(new, dims, data)
        return r0.ok and r1.ok and not r1.diagnostics and all(
            np.array_equal(r0.outputs[k], r1.outputs[k], equal_nan=True) for k in r0.outputs)
    except Exception:  # a kernel the simulator cannot run is not offered
        return False


def _apply(kernel: Kernel, source: SourceFile, params: dict[str, Any]) -> TacticResult | None:
    sites = _sites(kernel, source)
    if not sites:
        return None
    edits = tuple(TextEdit(source.span(n.span.start.offset, n.span.end.offset), fused)
                  for n, fused in sites)
    done = verified_rewrite(kernel, source, edits)
    if done is None:
        return None
    if not _same_outputs(kernel, source.text, apply_edits(source.text, edits), source.path):
        return None
    lines = ", ".join(str(n.span.start.line + 1) for n, _ in sites)
    return TacticResult(
        edits, f"fuse the multiply-add at line {lines} into `fma`: one FFMA per element "
        "instead of a multiply and an add (the constant is a power of two: same result)",
        {"predicted": done[1]})


FMA_FUSION = Tactic(
    "fuse-multiply-add",
    "Rewrite `a - c * x` / `a + c * x` on fragments, c a power of two, as `fma(x, ±c, a)`: "
    "one FFMA per element, bit-identical results.",
    _applies, _apply, _variants, PROV)

__all__ = ["FMA_FUSION"]
