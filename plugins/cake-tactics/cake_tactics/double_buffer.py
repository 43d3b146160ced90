"""accumulator-double-buffer: keep one chunk's wgmmas in flight while the math runs.

The form it rewrites is a consumer loop that drains the tensor pipe every iteration:

    for j in range(n):
        s = p.wait()
        acc = fragment(f32, ..., layout=wgmma_acc)
        wgmma(acc, ..., ...s...)              # one or more statements of wgmmas only
        wgmma_wait(0)
        ...                                   # reads of stage s
        p.release()
        ...                                   # the math on acc (and j)

MMA and math then run one after the other.  The rewrite alternates two accumulators
(`acc0` for even iterations, `acc1` for odd ones): iteration j + 1's wgmmas are issued
into one, `wgmma_wait(G)` (G = the groups one iteration issues) completes the other, and
iteration j's stage reads, release and math run while the tensor cores compute j + 1.
Registers cannot be indexed at run time, so the loop body handles two iterations, and
the tail (one or two iterations, by the parity of n) is peeled after it.

The rewrite is offered only when it verifies (the verifier tracks wgmma groups and stage
tokens across the loop's back edge) and when the simulator, run on a small shape with
the same random inputs, finds no race and gives exactly the outputs of the original.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from cake_core.diagnostics.model import TextEdit, apply_edits
from cake_core.ir.kernel import ForOp, Kernel, Node, Op
from cake_core.ir.symbolic import Dim
from cake_core.ir.types import FragLayout, FragmentType
from cake_core.plugins import Tactic, TacticResult
from cake_core.primitives.registry import Provenance
from cake_core.rewrite_cost import verified_rewrite
from cake_core.source import SourceFile
from cake_core.syntax import ast
from cake_tactics.kernel_text import (
    Stmt,
    fresh_name,
    indent,
    indent_of,
    kernel_def,
    lines_span,
    names_in_text,
    rename,
    statements,
)

PROV = Provenance("hand-written", "2026-12-04", ("examples/kmeans_assign_sm90.cake",))
_RANGE = re.compile(r"^for\s+(\w+)\s+in\s+range\((.+)\)\s*:")
_ISSUE_OPS = {"wgmma"}
_SYNC = {"wait", "release", "acquire", "commit", "wgmma", "wgmma_wait"}


@dataclass
class _Form:
    loop: ast.For
    ir_loop: ForOp
    stmts: list[Stmt]
    var: str
    stop: str
    stage: str
    acc: str
    wait: Stmt
    frag: Stmt
    issue: list[Stmt]
    retire: list[Stmt]
    groups: int


def _wgmma_groups(nodes: list[Node]) -> int | None:
    """wgmma groups one pass over `nodes` issues (None: a loop with a run-time count)."""
    n = 0
    for node in nodes:
        if isinstance(node, Op) and node.name == "wgmma":
            n += 1
        elif isinstance(node, ForOp):
            trips, inner = node.trip_count.const, _wgmma_groups(node.body)
            if trips is None or inner is None:
                return None
            n += trips * inner
        elif not isinstance(node, Op):
            return None
    return n


def _ir_loop(kernel: Kernel, loop: ast.For) -> ForOp | None:
    for n in kernel.walk():
        if isinstance(n, ForOp) and n.span.start.offset == loop.span.start.offset:
            return n
    return None


def _match(source: SourceFile, kernel: Kernel, loop: ast.For) -> _Form | None:
    header = _RANGE.match(source.line_text(loop.span.start.line).strip())
    ir_loop = _ir_loop(kernel, loop)
    if header is None or ir_loop is None or "," in header.group(2):
        return None  # range(start, stop[, step]): only range(n) is rewritten
    stmts = statements(source, kernel, loop.body, loop.span.start.line)
    if len(stmts) < 5:
        return None
    head = stmts[:2]
    wait = next((s for s in head if s.op_names == {"wait"}), None)
    frag = next((s for s in head if s.op_names == {"fragment"}), None)
    if wait is None or frag is None or not isinstance(wait.node, ast.Assign) or \
            not isinstance(frag.node, ast.Assign):
        return None
    acc_t = frag.ops[0].results[0].type if frag.ops[0].results else None
    if not isinstance(acc_t, FragmentType) or acc_t.layout is not FragLayout.WGMMA_ACC:
        return None
    stage, acc = next(iter(wait.names_bound), ""), next(iter(frag.names_bound), "")
    if len(wait.names_bound) != 1 or len(frag.names_bound) != 1:
        return None
    i = 2
    issue: list[Stmt] = []
    while i < len(stmts) and stmts[i].ops and stmts[i].op_names <= _ISSUE_OPS:
        issue.append(stmts[i])
        i += 1
    if not issue or i >= len(stmts):
        return None
    drain = stmts[i]
    if drain.op_names != {"wgmma_wait"} or drain.ops[0].args["n"].sym is None or \
            drain.ops[0].args["n"].sym.const != 0:
        return None
    retire = stmts[i + 1:]
    releases = [s for s in retire if "release" in s.op_names]
    if len(releases) != 1 or any(s.op_names & (_SYNC - {"release"}) for s in retire):
        return None
    after = retire[retire.index(releases[0]) + 1:]
    if any(stage in s.names_read for s in after):
        return None  # the stage is read after its release: not the form (nor correct)
    if any(acc in s.names_bound for s in retire):
        return None
    groups = _wgmma_groups(
        [n for n in ir_loop.body if isinstance(n, Op | ForOp) and
         any(s.node.span.start.offset <= n.span.start.offset < s.node.span.end.offset
             for s in issue)])
    if not groups:
        return None
    return _Form(loop, ir_loop, stmts, header.group(1), header.group(2).strip(), stage, acc,
                 wait, frag, issue, retire, groups)


def _find(kernel: Kernel, source: SourceFile) -> _Form | None:
    fn = kernel_def(source, kernel)
    if fn is None:
        return None
    for node in ast.walk(fn):
        if isinstance(node, ast.For):
            form = _match(source, kernel, node)
            if form is not None:
                return form
    return None


def _applies(kernel: Kernel, source: SourceFile) -> str | None:
    form = _find(kernel, source)
    if form is None:
        return None
    return (f"the loop at line {form.loop.span.start.line + 1} drains the tensor pipe "
            f"(`wgmma_wait(0)`) before its math on `{form.acc}`: MMA and math run in turn")


def _variants(kernel: Kernel, source: SourceFile) -> list[dict[str, Any]]:
    return [{}] if _find(kernel, source) is not None else []


def _rewrite(source: SourceFile, f: _Form) -> str:
    taken = names_in_text(source.text)
    a0, a1 = fresh_name(taken, f"{f.acc}0"), fresh_name(taken | {f"{f.acc}0"}, f"{f.acc}1")
    s0, s1 = fresh_name(taken, f"{f.stage}0"), fresh_name(taken | {f"{f.stage}0"}, f"{f.stage}1")
    p = fresh_name(taken, "p", "pair")
    n = f.stop if re.fullmatch(r"[\w.]+", f.stop) else f"({f.stop})"

    def issue(acc: str, stage: str, j: str) -> str:
        m = {f.acc: acc, f.stage: stage, f.var: j}
        return "\n".join(rename(s.own, m) for s in (f.wait, f.frag, *f.issue)) + "\n"

    def retire(acc: str, stage: str, j: str, wait: int, lead: bool = False) -> str:
        m = {f.acc: acc, f.stage: stage, f.var: j}
        body = "".join(rename(s.text if lead else s.own, m) + "\n" for s in f.retire)
        return f"wgmma_wait({wait})  # {acc} (iteration {j}) is complete\n" + body

    g = f.groups
    even, odd = f"2 * {p}", f"2 * {p} + 1"
    loop_body = (f"# iteration {even} is in flight in {a0}: issue {odd} into {a1}, "
                 f"then finish {even}\n"
                 + issue(a1, s1, f"({odd})") + retire(a0, s0, f"({even})", g, lead=True)
                 + f"# iteration {odd} is in flight in {a1}: issue {even} + 2 into {a0}, "
                 f"then finish {odd}\n"
                 + issue(a0, s0, f"({even} + 2)") + retire(a1, s1, f"({odd})", g))
    out = ("# double-buffered accumulators: one iteration's wgmmas stay in flight while the "
           "previous one's math runs\n"
           + issue(a0, s0, "0")
           + f"for {p} in range(({n} - 1) // 2):\n" + indent(loop_body.rstrip("\n"), "    ")
           + f"\n# the tail: iteration {n} - 1 (odd count) or {n} - 2 is in flight in {a0}\n"
           + f"if {n} % 2 == 0:\n"
           + indent((issue(a1, s1, f"({n} - 1)") + retire(a0, s0, f"({n} - 2)", g)
                     + retire(a1, s1, f"({n} - 1)", 0)).rstrip("\n"), "    ")
           + "\nelse:\n"
           + indent(retire(a0, s0, f"({n} - 1)", 0).rstrip("\n"), "    ") + "\n")
    return indent(out.rstrip("\n"), indent_of(source.line_text(f.loop.span.start.line))) + "\n"


def _shapes(old: Any, loop: ForOp) -> list[dict[str, int]]:
    """Small launches whose rewritten loop runs 4 and 5 iterations (the two tails, and
    the pair loop more than once): the loop's dims grown, every other dim at its least."""
    from cake_core.cost.evaluate import MissingDimError, evaluate
    from cake_core.sim.inputs import default_dims

    base = default_dims(old, 1)
    mine = [a for a in loop.stop.atoms() if isinstance(a, Dim)]
    out = []
    for want in (4, 5):
        for m in range(1, 65):
            dims = {**base, **{d.name: d.multiple_of * m for d in mine}}
            try:
                trips = evaluate(loop.trip_count, dims)
            except (MissingDimError, ZeroDivisionError):
                return []
            if trips == want:
                out.append(dims)
                break
            if trips > want:
                break
    return out


def _same_on_small_shapes(kernel: Kernel, loop: ForOp, before: str, after: str,
                          path: str) -> bool:
    """The simulator runs both kernels with the same random inputs: the rewrite must raise
    no finding and write exactly the original's outputs."""
    from cake_core.sim import SimKernel, simulate
    from cake_core.sim.inputs import random_inputs

    try:
        old = SimKernel.from_text(before, path, kernel.name)
        new = SimKernel.from_text(after, path, kernel.name)
        shapes = _shapes(old, loop)
        for dims in shapes:
            data = random_inputs(old, dims, seed=0)
            r0, r1 = simulate(old, dims, data), simulate(new, dims, data)
            if not r1.ok or r1.diagnostics or not r0.ok or not all(
                    np.array_equal(r0.outputs[k], r1.outputs[k], equal_nan=True)
                    for k in r0.outputs):
                return False
    except Exception:  # a kernel the simulator cannot run is not offered
        return False
    return bool(shapes)


def _apply(kernel: Kernel, source: SourceFile, params: dict[str, Any]) -> TacticResult | None:
    f = _find(kernel, source)
    if f is None:
        return None
    start, end = lines_span(source, f.stmts[:1])[0], lines_span(source, [f.stmts[-1]])[1]
    loop_start = source.offset_of(f.loop.span.start.line, 0)
    edit = TextEdit(source.span(min(start, loop_start), end), _rewrite(source, f).rstrip("\n"))
    edits = (edit,)
    done = verified_rewrite(kernel, source, edits)
    if done is None:
        return None
    after = apply_edits(source.text, edits)
    if not _same_on_small_shapes(kernel, f.ir_loop, source.text, after, source.path):
        return None
    return TacticResult(
        edits, f"double-buffer `{f.acc}` in the loop at line {f.loop.span.start.line + 1}: "
        f"iteration j + 1's wgmmas run while iteration j's math does "
        f"(`wgmma_wait({f.groups})` instead of `wgmma_wait(0)`)",
        {"predicted": done[1]})


ACC_DOUBLE_BUFFER = Tactic(
    "accumulator-double-buffer",
    "Alternate two wgmma accumulators so one iteration's MMA overlaps the previous "
    "iteration's math (wgmma_wait(G) instead of wgmma_wait(0)).",
    _applies, _apply, _variants, PROV)

__all__ = ["ACC_DOUBLE_BUFFER"]
