"""The first use of a fragment after its declaration, in program order.

Two analyses ask it: the verifier (a fragment declared with `fill=None` must first be
overwritten by a wgmma, CK335) and the cost model (a cleared fragment whose first use is
a wgmma's accumulator, reached without a branch or a run-time loop, costs no moves: ptxas
folds the zeros into the instruction's scale-d operand -- the SASS shows
`HGMMA ... RZ, !UPT`, tests/test_wgmma_accumulate.py).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from cake_core.ir.kernel import ForOp, IfOp, Kernel, Node, Op, Role


@dataclass(frozen=True, slots=True)
class FirstUse:
    name: str
    """The fragment's name."""
    op: Op
    """The first operation that names the fragment as an argument."""
    loops: tuple[ForOp, ...]
    """Loops entered between the declaration and the use, outermost first."""
    branch: bool
    """Whether the use is under an `if` entered after the declaration (a path skips it)."""


def declarations(kernel: Kernel, prim: str = "fragment") -> Iterator[tuple[Op, list[Node]]]:
    """Every `prim` op of the kernel with the statements that follow it in its block."""
    for body in _bodies(kernel):
        for i, node in enumerate(body):
            if isinstance(node, Op) and node.name == prim:
                yield node, body[i + 1:]


def first_use(decl: Op, rest: Sequence[Node]) -> FirstUse | None:
    """The first use of `decl`'s result in `rest` (None: unused, or bound again first)."""
    return _scan(decl.results[0].name, rest, (), False)


def _scan(name: str, nodes: Sequence[Node], loops: tuple[ForOp, ...], branch: bool
          ) -> FirstUse | None:
    for node in nodes:
        if isinstance(node, Op):
            if any(v.name == name for v in node.args.values()):
                return FirstUse(name, node, loops, branch)
            if any(r.name == name for r in node.results):
                return None
        elif isinstance(node, ForOp):
            found = _scan(name, node.body, (*loops, node), branch)
            if found is not None:
                return found
            if _rebinds(node.body, name):
                return None
        elif isinstance(node, IfOp):
            for part in (node.then, node.orelse):
                found = _scan(name, part, loops, True)
                if found is not None:
                    return found
    return None


def _rebinds(nodes: Sequence[Node], name: str) -> bool:
    for node in nodes:
        if isinstance(node, Op) and any(r.name == name for r in node.results):
            return True
        if isinstance(node, ForOp) and _rebinds(node.body, name):
            return True
    return False


def _bodies(kernel: Kernel) -> Iterator[list[Node]]:
    """Every statement list of the kernel: its body, each role's (the roles are statements
    of the body), each loop's and branch's."""
    stack: list[list[Node]] = [kernel.body]
    while stack:
        body = stack.pop()
        yield body
        for n in body:
            if isinstance(n, ForOp | Role):
                stack.append(n.body)
            elif isinstance(n, IfOp):
                stack.extend((n.then, n.orelse))


def folds_into_wgmma(use: FirstUse | None) -> bool:
    """Whether a cleared fragment's zeros disappear into its first use: a wgmma writing it
    as the accumulator, reached without a branch and through constant-trip loops only
    (the lowering unrolls those), becomes scale-d 0 on its first K step."""
    return use is not None and not use.branch and writes_only(use) and \
        all(loop.trip_count.const is not None for loop in use.loops)


def writes_only(use: FirstUse) -> bool:
    """Whether the use is a wgmma with the fragment as its accumulator and nothing else."""
    return use.op.name == "wgmma" and use.op.args["acc"].name == use.name and \
        sum(v.name == use.name for v in use.op.args.values()) == 1
