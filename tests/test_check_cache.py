"""Reusing per-kernel type checks (`cake_core/check_cache.py`) gives what a fresh check gives.

The language server checks a document after every edit through `OpenDocument.analyze`:
an incremental re-parse, then `check_source` with the document's `KernelChecks`.  Every
test here compares that with a cold `check_source` of the same text: the diagnostics
must be equal, and so must the program once something asks for it.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from edit_support import Edit, apply_edit, edits
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cake_core.check import CheckResult, check_source
from cake_core.check_cache import KernelChecks
from cake_core.ir.kernel import ForOp, IfOp, Op, Program, Role
from cake_core.plugins import PluginSet, load_plugins
from cake_core.source import SourceFile
from cake_lsp.documents import CheckOptions, OpenDocument
from cake_lsp.guard import PassGuard

ROOT = Path(__file__).resolve().parent.parent
SEED = (ROOT / "bench" / "data" / "gemm_sm90_block.cake").read_text(encoding="utf-8")
HEADER, _, BODY = SEED.partition("# --- kernel ---\n")
CORPUS = sorted([*(ROOT / "tests" / "errors").glob("*.cake"),
                 *(p for p in (ROOT / "tests" / "bugs").glob("*.cake")
                   if not p.name.endswith(".fixed.cake")),
                 *(ROOT / "examples").glob("*.cake")])

_PLUGINS = load_plugins(include_installed=False)


def kernel(name: str) -> str:
    return BODY.replace("def gemm(", f"def {name}(")


# Three kernels, with constants above, between and below them.
DOCUMENT = (HEADER + kernel("k0") + "\nEXTRA = 2\n\n" + kernel("k1") + "\n"
            + kernel("k2") + "\nLAST = BM * 2\n")


def options(plugins: PluginSet = _PLUGINS) -> CheckOptions:
    kernel_passes, passes = PassGuard.from_plugins(plugins, {}).split(frozenset())
    return CheckOptions(None, plugins, passes, 0, kernel_passes)


def cold(text: str, path: str) -> CheckResult:
    return check_source(SourceFile(text, path), plugins=load_plugins(include_installed=False))


def shape(program: Program | None) -> object:
    """What a program holds, as plain values (IR objects compare by identity)."""
    if program is None:
        return None

    def nodes(body: list) -> tuple:
        out = []
        for n in body:
            if isinstance(n, Op):
                out.append(("op", repr(n), n.span, tuple(n.arg_spans.items()), n.role,
                            tuple((r.name, r.span, r.type) for r in n.results)))
            elif isinstance(n, ForOp):
                out.append(("for", n.var.name, n.var.span, n.span, n.role, nodes(n.body)))
            elif isinstance(n, IfOp):
                out.append(("if", n.span, nodes(n.then), nodes(n.orelse)))
            elif isinstance(n, Role):
                out.append(("role", n.name, n.span, n.name_span, n.warp_start, n.warp_stop,
                            n.regs, nodes(n.body)))
        return tuple(out)

    return (
        tuple((name, v.span, v.type, repr(v.sym)) for name, v in program.constants.items()),
        tuple(program.dims), tuple(program.constant_spans.items()),
        tuple((k.name, k.arch, k.span, k.name_span, k.decorator_span, k.warps, k.cluster,
               tuple(map(repr, k.grid)), tuple((p.name, p.span, p.value.type) for p in k.params),
               tuple(k.smem), tuple((n, v.span, v.type) for n, v in k.values.items()),
               tuple(k.roles), tuple(k.dims), k.arch_span, k.warps_span, nodes(k.body))
              for k in program.kernels))


class Session:
    """One open document checked the language server's way, compared with cold checks."""

    def __init__(self, text: str, path: str = "doc.cake") -> None:
        self.doc = OpenDocument(f"file:///{path}", text, 1)
        self.options = options()
        self.check(text)

    def check(self, text: str, program: bool = False) -> CheckResult:
        result = self.doc.analyze(text, self.options)
        self.doc.text = text
        fresh = cold(text, self.doc.path)
        assert result.diagnostics == fresh.diagnostics
        assert result.has_kernels == bool(fresh.program and fresh.program.kernels)
        if program:
            assert shape(result.program) == shape(fresh.program)
        return result


def test_an_edit_inside_one_kernel_rebuilds_only_that_kernel() -> None:
    s = Session(DOCUMENT)
    cache = s.doc.kernels
    misses = cache.misses
    at = DOCUMENT.index("regs=232", DOCUMENT.index("def k1("))
    s.check(DOCUMENT[:at] + "regs=240" + DOCUMENT[at + len("regs=232"):], program=True)
    assert cache.misses == misses + 1
    assert cache.hits >= 2


def test_kernels_that_did_not_move_keep_their_ir() -> None:
    s = Session(DOCUMENT)
    first = s.check(DOCUMENT)
    assert first.program is not None
    at = DOCUMENT.index("regs=232", DOCUMENT.index("def k2("))
    again = s.check(DOCUMENT[:at] + "regs=240" + DOCUMENT[at + len("regs=232"):], True)
    assert again.program is not None
    assert again.program.kernels[0] is first.program.kernels[0]
    assert again.program.kernels[2] is not first.program.kernels[2]


def test_moved_kernels_keep_their_findings_moved() -> None:
    broken = DOCUMENT.replace("ab.release()", "ab.commit()", 1)
    s = Session(broken)
    for text in ("# one\n# two\n" + broken, "\n" + broken, broken.replace("EXTRA = 2", "")):
        s.check(text, program=True)


def test_an_edit_above_a_kernel_in_the_prelude_rebuilds_what_follows() -> None:
    s = Session(DOCUMENT)
    s.check(DOCUMENT.replace("EXTRA = 2", "EXTRA = 3"), program=True)
    s.check(DOCUMENT.replace("BK, STAGES = 128, 256, 64, 4", "BK, STAGES = 128, 256, 64, 2"))
    s.check(DOCUMENT.replace("LAST = BM * 2", "LAST = BM * 2\nSTAGES = 9"), program=True)


def test_kernels_with_pipelines_of_one_name_are_reused_apart() -> None:
    # A kernel whose pipeline names an undeclared role retracts only its own findings
    # about that pipeline, never another kernel's: editing one leaves the other reused.
    wrong_role = kernel("a").replace("s = ab.wait()", "s = ab.acquire()", 1)
    undeclared = kernel("b").replace('producer="load"', 'producer="loader"')
    text = HEADER + wrong_role + "\n" + undeclared
    s = Session(text)
    cache = s.doc.kernels
    for variant in (text.replace('"loader"', '"load"'), text,
                    text.replace('"loader"', '"lodr"'), text.replace("def b(", "def bb("),
                    "\n" + text, text):
        misses = cache.misses
        result = s.check(variant)
        assert sum(d.code == "CK112" and "'mma'" in d.message
                   for d in result.diagnostics) == 1  # kernel a's finding, always there
        if variant.startswith(HEADER):  # the prelude did not move: kernel a is reused
            assert cache.misses <= misses + 1


def test_a_global_named_like_a_temporary_is_reused_like_any_other() -> None:
    # `y = _t1` in a kernel binds the global `_t1` without renaming it, so kernels
    # that read it are reused like the others.
    text = HEADER + "_t1 = 4\n" + kernel("a").replace(
        "    sa = smem(", "    y = _t1\n    sa = smem(") + "\n" + kernel("b")
    s = Session(text)
    cache = s.doc.kernels
    hits = cache.hits
    s.check(text.replace("def b(", "def c("), program=True)
    assert cache.hits == hits + 1  # kernel a
    moved = text.replace("\n" + kernel("b"), "\n\n# b moved down\n" + kernel("b"))
    assert moved != text
    s.check(moved, program=True)
    assert cache.hits == hits + 3  # both: a unchanged, b moved


@pytest.mark.parametrize("path", CORPUS, ids=lambda p: p.stem)
def test_corpus_files_joined_and_edited(path: Path) -> None:
    text = path.read_text(encoding="utf-8", errors="surrogateescape")
    if max(text, default="") >= "\udc80" or "\x00" in text:
        text = text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    s = Session(text, "corpus.cake")
    joined = DOCUMENT + "\n" + text
    s.check(joined)
    s.check("# moved\n" + joined, program=True)
    s.check(joined.replace("def k1(", "def k1x("))
    s.check(text)


def test_a_file_without_kernels_and_one_with_only_a_kernel() -> None:
    s = Session("X = 1\n")
    s.check("X = 1\nY = 2\n", program=True)
    s.check(kernel("only"), program=True)
    s.check("", program=True)


def test_a_new_registry_or_arch_starts_afresh() -> None:
    cache = KernelChecks()
    source = SourceFile(DOCUMENT, "doc.cake")
    parsed = check_source(source, plugins=_PLUGINS).parse
    assert parsed is not None
    for arch in (None, "sm_90a", None):
        got = check_source(source, plugins=_PLUGINS, parsed=parsed, kernels=cache, arch=arch)
        want = check_source(source, plugins=load_plugins(include_installed=False), arch=arch)
        assert got.diagnostics == want.diagnostics
    assert cache.misses == 9


# --- random edits ----------------------------------------------------------------------------
PIECES = [*"()[]:,.=+-*/ \n'\"#x0_", "    ", "\n    ", "ab.", "smem(", "role(", "def ",
          "@kernel(", "regs=", "STAGES", "BM", "acquire()", "release()", "with ", "for ",
          "if k > 0:\n        ", "\n\n", "EXTRA = 1\n"]

_edit = edits(PIECES, 8)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_edit, min_size=1, max_size=6), st.booleans())
def test_random_edit_sequences_check_like_a_cold_check(
        drawn: list[Edit], undo: bool) -> None:
    s = Session(DOCUMENT)
    texts = [DOCUMENT]
    text = DOCUMENT
    for edit in drawn:
        text = apply_edit(text, edit)
        texts.append(text)
        s.check(text)
    if undo:  # back through the same texts: reused from the cache this time
        for text in reversed(texts[:-1]):
            s.check(text)
    s.check(text, program=True)
