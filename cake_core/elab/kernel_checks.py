"""The checks that need a whole kernel: pipelines naming undeclared roles, unused values.

They run once the body is built, on what the walk collected (the declared pipelines and
roles, the definitions and the uses), not during it: a role may be declared after the
pipeline that names it, and a buffer is only unused once nothing below it reads it.
The pipeline check also drops the role findings that only echo its own (see
`check_pipelines`), the one place elaboration edits findings already made.
"""

from __future__ import annotations

import difflib

from cake_core.diagnostics import codes
from cake_core.diagnostics.model import Applicability, Diagnostic, Fix, TextEdit
from cake_core.ir.kernel import Kernel, Value
from cake_core.ir.types import BarrierType, FragmentType, PipelineType, SmemType
from cake_core.primitives.traits import Trait
from cake_core.source import SourceFile, Span
from cake_core.syntax import ast


def check_pipelines(k: Kernel, scope: dict[str, Value], pipelines: dict[str, Span],
                    tried_roles: set[str], diags: list[Diagnostic], first_diag: int) -> None:
    """Report each pipeline role the kernel does not declare (`tried_roles`: declared, if
    badly, and reported already); `diags[first_diag:]` are this kernel's findings."""
    for name, span in pipelines.items():
        v = scope.get(name)
        if v is None or not isinstance(v.type, PipelineType):
            continue
        for r in (v.type.producer, *v.type.consumers):
            if r not in k.roles and r not in tried_roles:  # tried: already reported
                # role checks of this pipeline's ops compared against a role that does
                # not exist: they echo this finding.  Only this kernel's own findings:
                # another kernel's pipeline of the same name is another pipeline.
                diags[first_diag:] = [d for d in diags[first_diag:] if not (
                    d.code == codes.BAD_ROLE.code and d.data.get("pipeline") == name)]
                hit = difflib.get_close_matches(r, list(k.roles), 1)
                at = _role_name_span(k, v, r) or span
                fixes = [Fix(f'use "{hit[0]}"', (TextEdit(at, f'"{hit[0]}"'),),
                             Applicability.UNSAFE)] if hit and at is not span else []
                diags.append(codes.BAD_ROLE.at(
                    at, f"pipeline `{name}` names role {r!r}, which the kernel does not "
                    "declare" + (f"; did you mean {hit[0]!r}?" if hit else ""),
                    notes=[f"declared roles: {', '.join(k.roles) or 'none'}"], fixes=fixes))


def _role_name_span(k: Kernel, pipe: Value, role: str) -> Span | None:
    """The string literal that names `role` in the `pipeline(...)` call making `pipe`."""
    for op in k.ops():
        if Trait.DECLARES_PIPELINE not in op.prim.traits or not op.results or \
                op.results[0] is not pipe:
            continue
        producer, consumer = op.args.get("producer"), op.args.get("consumer")
        if producer is not None and producer.const == role:
            return op.arg_spans.get("producer")
        if consumer is not None and consumer.const == role:
            return op.arg_spans.get("consumer")
        if consumer is not None and isinstance(consumer.const, tuple):
            for e in consumer.const:
                if isinstance(e, Value) and e.const == role:
                    return e.span
    return None


def check_unused(defs: dict[str, tuple[Value, ast.Stmt]], used: dict[int, Value],
                 source: SourceFile, diags: list[Diagnostic]) -> None:
    """Warn of buffers, pipelines, barriers and `fragment(...)`s that nothing reads."""
    for name, (v, stmt) in defs.items():
        if id(v) in used or name.startswith("_"):
            continue
        if isinstance(v.type, SmemType | PipelineType | BarrierType) or (
                isinstance(v.type, FragmentType) and isinstance(stmt, ast.Assign)
                and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name)
                and isinstance(stmt.value, ast.Call) and isinstance(stmt.value.func, ast.Name)
                and stmt.value.func.id == "fragment"):
            line = source.line_text(stmt.span.start.line)
            start = stmt.span.start.offset - stmt.span.start.col_byte
            end = start + len(line.encode("utf-8")) + 1
            fix = Fix(f"remove `{name}`", (TextEdit(source.span(
                start, min(end, len(source.data))), ""),), Applicability.SAFE)
            diags.append(codes.UNUSED_VALUE.at(
                name_span(stmt, name, v.span),
                f"`{name}` ({v.type.describe()}) is never used", fixes=[fix]))


def name_span(stmt: ast.Stmt | None, name: str, default: Span) -> Span:
    """Where `stmt` binds `name`: findings about a definition point at the name."""
    targets: tuple[ast.Expr, ...] = ()
    if isinstance(stmt, ast.Assign):
        targets = stmt.targets
    elif isinstance(stmt, ast.AugAssign | ast.For):
        targets = (stmt.target,)
    while targets:
        t, targets = targets[0], targets[1:]
        if isinstance(t, ast.Name) and t.id == name:
            return t.span
        if isinstance(t, ast.Tuple):
            targets = (*t.elts, *targets)
    return default
