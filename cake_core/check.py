"""The static gate as one function: text -> AST -> typed IR -> diagnostics.

This is the entry point the CLI, the language server and the agents share, so all three
see the same findings.  A fault inside the compiler becomes a CK901 diagnostic on the
file instead of a traceback.
"""

from __future__ import annotations

import traceback
from collections.abc import Mapping, Sequence
from pathlib import Path

from cake_core.check_cache import Build, KernelChecks, Ready
from cake_core.diagnostics import codes
from cake_core.diagnostics.model import Diagnostic, sort_diagnostics
from cake_core.diagnostics.selection import Selection
from cake_core.diagnostics.suppress import apply_suppressions
from cake_core.elab.builder import build_program
from cake_core.ir.kernel import Program
from cake_core.plugins import load_config, load_plugins
from cake_core.plugins.loader import PluginSet, run_rule
from cake_core.primitives.registry import Registry
from cake_core.source import SourceFile
from cake_core.syntax.ast import Module
from cake_core.syntax.parser import ParseResult, parse
from cake_core.verify import Pass


class CheckResult:
    """What a check found, and the program it built.

    `program` may be made on first use: the language server's incremental check
    (`cake_core/check_cache.py`) finds every diagnostic without building the IR of the
    kernels it reuses, and builds them only when a feature asks for the program.
    """

    def __init__(self, source: SourceFile, parse: ParseResult | None, program: Program | None,
                 diagnostics: list[Diagnostic] | None = None) -> None:
        self.source = source
        self.parse = parse
        self._program = program
        self._build: Build | None = None
        self.diagnostics: list[Diagnostic] = diagnostics if diagnostics is not None else []

    @property
    def program(self) -> Program | None:
        if self._program is None and self._build is not None:
            self._program = self._build.program
        return self._program

    @program.setter
    def program(self, program: Program | None) -> None:
        self._program, self._build = program, None

    @property
    def has_program(self) -> bool:
        """Whether `program` is (or will be, on first use) a program, without building it."""
        return self._program is not None or self._build is not None

    @property
    def has_kernels(self) -> bool:
        """Whether the program holds a kernel (known without building a lazy program)."""
        if self._program is None and self._build is not None:
            return bool(self._build.refs)
        return self._program is not None and bool(self._program.kernels)

    @property
    def errors(self) -> list[Diagnostic]:
        return [d for d in self.diagnostics if d.severity.value == "error"]

    def __repr__(self) -> str:
        return f"CheckResult({self.source.path!r}, {len(self.diagnostics)} diagnostics)"


_DEFAULT_PLUGINS: PluginSet | None = None


def default_plugins() -> PluginSet:
    """The plugins of the current project (built-ins + installed), loaded once."""
    global _DEFAULT_PLUGINS
    if _DEFAULT_PLUGINS is None:
        _DEFAULT_PLUGINS = load_plugins(load_config())
    return _DEFAULT_PLUGINS


def check_source(source: SourceFile, *, arch: str | None = None,
                 plugins: PluginSet | None = None, registry: Registry | None = None,
                 passes: Sequence[Pass] | None = None,
                 kernel_passes: Mapping[str, Pass] | None = None,
                 parsed: ParseResult | None = None,
                 kernels: KernelChecks | None = None,
                 selection: Selection | None = None) -> CheckResult:
    """Parse, build and verify one source file.  Never raises on any input.

    Verifier rules come from `plugins` (default: the project's plugins, built-ins
    first), whose `[tool.cake] disable` drops findings by code; `passes` replaces the
    rules with plain passes (tests, tools), and `kernel_passes` (by name) adds passes
    that judge each kernel alone, run kernel by kernel so kernels unchanged since the
    last check reuse their findings (the language server's built-ins).
    `kernels` (the language server's, one per document) reuses the type check of kernels
    unchanged since the last check of the same document; the program is then built
    lazily, on the first read of `CheckResult.program`.
    `# cake: ignore[...]` comments then hide the findings on their lines (an unused one
    is a CK006), and `selection` (default: the plugins' `[tool.cake]` select and ignore)
    keeps the codes to report.
    """
    result = CheckResult(source, None, None)
    diags: list[Diagnostic] = []
    ps = PluginSet()
    try:
        result.parse = parsed or parse(source)
        diags.extend(result.parse.diagnostics)
        ps = plugins or default_plugins()
        built = _build(result.parse, source, registry or ps.registry, arch, kernels)
        result._build = built
        syntax_at = _statement_start(result.parse.module, min(
            (d.span.start.offset for d in result.parse.diagnostics
             if d.severity.value == "error"), default=None))
        # after a syntax error the AST has holes: type findings in the top-level statement
        # that holds it (a kernel naming a role its broken `with` declares) or beyond it
        # would be echoes
        diags.extend(d for d in built.diagnostics
                     if syntax_at is None or d.span.end.offset <= syntax_at)
        if syntax_at is None and not any(d.severity.value == "error" for d in built.diagnostics):
            if passes is not None or kernel_passes:
                for p in passes or ():
                    diags.extend(p(built.program, source))
                if kernel_passes:
                    diags.extend(ps.verdicts.run(
                        built.skeleton, source, result.parse.module, ",".join(kernel_passes),
                        arch, lambda prog, src: [d for p in kernel_passes.values()
                                                 for d in p(prog, src)], built.refs))
            else:
                diags.extend(_verify(ps, built, source, result.parse, arch))
    except Exception as exc:  # the compiler's own fault: report it, keep the user's work
        tb = traceback.extract_tb(exc.__traceback__)[-1]
        diags.append(codes.INTERNAL_ERROR.at(
            source.span(0, 0),
            f"internal compiler error: {type(exc).__name__}: {exc}",
            notes=[f"at {Path(tb.filename).name}:{tb.lineno} in {tb.name}",
                   "please report this with the file that triggered it"]))
    tree = result.parse.tree if result.parse is not None else None
    shown = (selection or ps.selection).filter(apply_suppressions(source, tree, ps.shown(diags)))
    result.diagnostics = sort_diagnostics([d.with_path(source.path) for d in shown])
    return result


def _statement_start(module: Module, offset: int | None) -> int | None:
    """Start of the top-level statement that holds `offset` (decorators included)."""
    if offset is None:
        return None
    return min((s.span.start.offset for s in module.body
                if s.span.start.offset <= offset <= s.span.end.offset), default=offset)


def _build(parsed: ParseResult, source: SourceFile, registry: Registry, arch: str | None,
           kernels: KernelChecks | None) -> Build:
    if kernels is not None:
        return kernels.build(parsed.module, source, registry, arch,
                             clean=not parsed.tree.root_node.has_error, moved=parsed.moved)
    built = build_program(parsed.module, source, registry=registry, arch=arch)
    p = built.program
    skeleton = Program(p.path, p.constants, p.dims, [], p.constant_spans)
    return Build(source, built.diagnostics, [Ready(k) for k in p.kernels], skeleton, p)


def _verify(ps: PluginSet, built: Build, source: SourceFile, parsed: ParseResult,
            arch: str | None) -> list[Diagnostic]:
    """Every rule of the plugin set; the built-in ones kernel by kernel, reusing the
    findings of kernels unchanged since the last check (`cake_core/verify/cache.py`)."""
    builtin = [(p, r) for p, r in ps.rules() if p.name == "cake"]
    others = [(p, r) for p, r in ps.rules() if p.name != "cake"]

    def verify(single: Program, src: SourceFile) -> list[Diagnostic]:
        return [d for p, r in builtin for d in run_rule(ps, p, r, single, src)]

    rules = ",".join(r.name for _, r in builtin)
    out = ps.verdicts.run(built.skeleton, source, parsed.module, rules, arch, verify,
                          built.refs)
    for plugin, rule in others:
        out.extend(run_rule(ps, plugin, rule, built.program, source))
    return out


def check_text(text: str, path: str = "<input>", **kw: object) -> CheckResult:
    return check_source(SourceFile(text, path), **kw)  # type: ignore[arg-type]
