"""The .cake parser: AST shapes, exact spans, the subset allowlist, syntax errors and
their fixes, encodings, deep nesting, incremental re-parsing and the LSP document."""

from __future__ import annotations

import random
import re
from pathlib import Path

import pytest
from kernels import GEMM_SM90 as GEMM

from cake_core.diagnostics.model import Applicability, Diagnostic, apply_edits
from cake_core.source import SourceFile
from cake_core.syntax import ast
from cake_core.syntax.convert import MAX_DEPTH
from cake_core.syntax.parser import MAX_DIAGNOSTICS, Document, ParseResult, parse, reparse


def p(text: str) -> ParseResult:
    return parse(SourceFile(text, "k.cake"))


def codes(result: ParseResult) -> list[str]:
    return [d.code for d in result.diagnostics]


def only(result: ParseResult, code: str) -> Diagnostic:
    found = [d for d in result.diagnostics if d.code == code]
    assert len(found) == 1, result.diagnostics
    return found[0]


def snippet(result: ParseResult, diag: Diagnostic) -> str:
    return result.source.snippet(diag.span)


def stmt(text: str) -> ast.Stmt:
    result = p(text)
    assert result.diagnostics == [], result.diagnostics
    assert len(result.module.body) == 1
    return result.module.body[0]


def expr(text: str) -> ast.Expr:
    node = stmt(f"x = {text}\n")
    assert isinstance(node, ast.Assign)
    return node.value


# --- the accepted subset -----------------------------------------------------------------
def test_gemm_parses_cleanly() -> None:
    result = p(GEMM)
    assert result.diagnostics == []
    consts, dims, kernel = result.module.body
    assert isinstance(consts, ast.Assign) and isinstance(consts.targets[0], ast.Tuple)
    assert [e.id for e in consts.targets[0].elts] == ["BM", "BN", "BK", "STAGES"]
    assert isinstance(dims, ast.Assign)
    assert isinstance(kernel, ast.FunctionDef) and kernel.name == "gemm"
    assert result.source.snippet(kernel.name_span) == "gemm"
    assert [prm.name for prm in kernel.params] == ["A", "B", "C"]
    deco = kernel.decorators[0]
    assert isinstance(deco, ast.Call)
    assert [kw.name for kw in deco.keywords] == ["arch", "grid", "warps"]
    assert result.source.snippet(deco.keywords[1].name_span) == "grid"
    load_role, mma_role = kernel.body[3], kernel.body[4]
    assert isinstance(load_role, ast.With) and isinstance(mma_role, ast.With)
    loop = load_role.body[0]
    assert isinstance(loop, ast.For) and isinstance(loop.target, ast.Name)
    assert len(loop.body) == 4


def test_annotation_becomes_subscript_with_tuple_index() -> None:
    kernel = p(GEMM).module.body[2]
    assert isinstance(kernel, ast.FunctionDef)
    ann = kernel.params[0].annotation
    assert isinstance(ann, ast.Subscript) and isinstance(ann.value, ast.Name)
    assert ann.value.id == "Tensor"
    assert isinstance(ann.index, ast.Tuple)
    dtype, shape = ann.index.elts
    assert isinstance(dtype, ast.Name) and dtype.id == "bf16"
    assert isinstance(shape, ast.Tuple) and [e.id for e in shape.elts] == ["M", "K"]


def test_attribute_spans() -> None:
    result = p(GEMM)
    attrs = [n for n in ast.walk(result.module) if isinstance(n, ast.Attribute)]
    by_name = {a.attr: a for a in attrs}
    transpose = by_name["T"]
    assert result.source.snippet(transpose.attr_span) == "T"
    assert result.source.snippet(transpose.span) == "sb[s].T"
    for attr in attrs:
        assert result.source.snippet(attr.attr_span) == attr.attr


def test_every_name_span_matches_its_text() -> None:
    result = p(GEMM)
    names = [n for n in ast.walk(result.module) if isinstance(n, ast.Name)]
    assert len(names) > 50
    for name in names:
        assert result.source.snippet(name.span) == name.id


def test_assignment_forms() -> None:
    chained = stmt("a = b = 1\n")
    assert isinstance(chained, ast.Assign)
    assert [t.id for t in chained.targets] == ["a", "b"]
    annotated = stmt("x: int = 3\n")
    assert isinstance(annotated, ast.Assign) and isinstance(annotated.annotation, ast.Name)
    unpack = stmt("(a, b), c = f()\n")
    assert isinstance(unpack, ast.Assign)
    target = unpack.targets[0]
    assert isinstance(target, ast.Tuple) and isinstance(target.elts[0], ast.Tuple)
    aug = stmt("acc += a * b\n")
    assert isinstance(aug, ast.AugAssign) and aug.op == "+"
    shift = stmt("x <<= 2\n")
    assert isinstance(shift, ast.AugAssign) and shift.op == "<<"


def test_if_elif_else_nests_the_elif() -> None:
    node = stmt("if a:\n    pass\nelif b:\n    x = 1\nelse:\n    x = 2\n")
    assert isinstance(node, ast.If) and len(node.orelse) == 1
    inner = node.orelse[0]
    assert isinstance(inner, ast.If) and isinstance(inner.test, ast.Name)
    assert inner.test.id == "b" and len(inner.orelse) == 1
    assert inner.span.start.line == 2


def test_with_items_and_aliases() -> None:
    node = stmt("with a(1) as x, b:\n    pass\n")
    assert isinstance(node, ast.With) and len(node.items) == 2
    assert node.items[0].alias is not None and node.items[0].alias.id == "x"
    assert node.items[1].alias is None


def test_for_over_tuple_of_names() -> None:
    node = stmt("for i, j in pairs:\n    pass\n")
    assert isinstance(node, ast.For) and isinstance(node.target, ast.Tuple)


def test_function_parameters_and_return() -> None:
    node = stmt("def f(a, b: int, c=1, d: T = 2) -> T:\n    return a\n")
    assert isinstance(node, ast.FunctionDef)
    got = [(q.name, q.annotation is not None, q.default is not None) for q in node.params]
    assert got == [("a", False, False), ("b", True, False), ("c", False, True), ("d", True, True)]
    assert isinstance(node.returns, ast.Name)
    assert isinstance(node.body[0], ast.Return)


def test_expression_shapes() -> None:
    chain = expr("a < b <= c != d == e")
    assert isinstance(chain, ast.Compare)
    assert chain.ops == ("<", "<=", "!=", "==") and len(chain.operands) == 5
    flat = expr("a and b and c")
    assert isinstance(flat, ast.BoolOp) and len(flat.values) == 3
    grouped = expr("(a and b) and c")
    assert isinstance(grouped, ast.BoolOp) and len(grouped.values) == 2
    mixed = expr("a or b and c")
    assert isinstance(mixed, ast.BoolOp) and mixed.op == "or"
    cond = expr("a if t else b")
    assert isinstance(cond, ast.IfExp) and isinstance(cond.test, ast.Name) and cond.test.id == "t"
    neg = expr("-x ** 2")
    assert isinstance(neg, ast.UnaryOp) and isinstance(neg.operand, ast.BinOp)
    negation = expr("not x")
    assert isinstance(negation, ast.UnaryOp) and negation.op == "not"
    assert isinstance(negation.operand, ast.Name)
    left = expr("a - b - c")
    assert isinstance(left, ast.BinOp) and isinstance(left.left, ast.BinOp)
    lst = expr("[1, 2]")
    assert isinstance(lst, ast.ListExpr) and len(lst.elts) == 2
    empty = expr("()")
    assert isinstance(empty, ast.Tuple) and empty.elts == ()


def test_parenthesized_expression_takes_the_inner_span() -> None:
    result = p("x = (a + b)\n")
    node = result.module.body[0]
    assert isinstance(node, ast.Assign)
    assert result.source.snippet(node.value.span) == "a + b"


def test_subscripts_and_slices() -> None:
    one = expr("a[i]")
    assert isinstance(one, ast.Subscript) and isinstance(one.index, ast.Name)
    many = expr("a[1:2, ::3, i]")
    assert isinstance(many, ast.Subscript) and isinstance(many.index, ast.Tuple)
    first, second, third = many.index.elts
    assert isinstance(first, ast.Slice) and first.step is None
    assert isinstance(second, ast.Slice) and second.lower is None and second.upper is None
    assert isinstance(second.step, ast.Constant) and second.step.value == 3
    assert isinstance(third, ast.Name)
    trailing = expr("a[1,]")
    assert isinstance(trailing, ast.Subscript) and isinstance(trailing.index, ast.Tuple)


def test_call_arguments() -> None:
    call = expr("f(a, 1, k=2, j=g(3))")
    assert isinstance(call, ast.Call) and len(call.args) == 2
    assert [kw.name for kw in call.keywords] == ["k", "j"]


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("0", 0), ("1_000", 1000), ("0x_ff", 255), ("0XFF", 255), ("0b1010", 10),
        ("0o17", 15), ("00", 0), ("1e3", 1000.0), ("1_000.5", 1000.5), (".5", 0.5),
        ("1.", 1.0), ("2.5E-3", 0.0025), ("True", True), ("False", False), ("None", None),
        ('"a" "b"', "ab"), ("'x\\ty'", "x\ty"), ("'a\\nb'", "a\nb"), ("'\\\\'", "\\"),
        ("'\\''", "'"), ('"\\""', '"'), ("r'\\n'", "\\n"), ("'''tri\nple'''", "tri\nple"),
        ("'\\x41\\u00e9'", "Aé"), ("u'u'", "u"),
    ],
)
def test_literal_values(text: str, value: object) -> None:
    node = expr(text)
    assert isinstance(node, ast.Constant)
    assert node.value == value and type(node.value) is type(value)


@pytest.mark.parametrize(
    ("text", "code", "fragment"),
    [
        ("0777", "CK001", "leading zeros"),
        ("1_", "CK001", "invalid integer literal"),
        ("18446744073709551616", "CK001", "does not fit in 64 bits"),
        ("1" * 5000, "CK001", "does not fit in 64 bits"),
        ("1e999", "CK001", "too large"),
        ("1j", "CK002", "complex"),
        ("'\\N{NO SUCH NAME}'", "CK001", "unknown Unicode character name"),
    ],
)
def test_bad_literals_are_diagnostics(text: str, code: str, fragment: str) -> None:
    result = p(f"x = {text}\n")
    diag = only(result, code)
    assert fragment in diag.message
    assert snippet(result, diag) == text
    node = result.module.body[0]
    assert isinstance(node, ast.Assign) and isinstance(node.value, ast.Invalid)


# --- spans with non-ASCII text -------------------------------------------------------------
def test_spans_count_bytes_and_utf16_after_non_ascii() -> None:
    text = '# café 😀\ns = "é😀" + b\n'
    result = p(text)
    assert result.diagnostics == []
    node = result.module.body[0]
    assert isinstance(node, ast.Assign) and isinstance(node.value, ast.BinOp)
    b = node.value.right
    assert isinstance(b, ast.Name) and b.id == "b"
    start = b.span.start
    assert start.line == 1
    assert start.col_byte == len('s = "é😀" + '.encode())  # 15
    assert start.col_utf16 == 12  # é is one UTF-16 unit, the emoji two
    assert start.offset == len(text.encode()) - 2
    assert result.source.snippet(b.span) == "b"
    string = node.value.left
    assert isinstance(string, ast.Constant) and string.value == "é😀"
    assert string.span.end.col_utf16 == 9


# --- outside the subset -----------------------------------------------------------------------
REJECTED = [
    ("while i < n:\n    i += 1\n", "while i < n:", "while"),
    ("x = lambda v: v\n", "lambda v: v", "lambda"),
    ("import numpy as np\n", "import numpy as np", "import"),
    ("from a import b\n", "from a import b", "from ... import"),
    ("class A:\n    pass\n", "class A:", "class"),
    ("try:\n    pass\nexcept E:\n    pass\n", "try:", "try"),
    ("def f():\n    raise E\n", "raise E", "raise"),
    ("def f():\n    global g\n", "global g", "global"),
    ("def f():\n    nonlocal g\n", "nonlocal g", "nonlocal"),
    ("del x\n", "del x", "del"),
    ("assert x\n", "assert x", "assert"),
    ("def f():\n    yield x\n", "yield x", "yield"),
    ("def f():\n    x = await g\n", "await g", "await"),
    ("async def f():\n    pass\n", "async def f():", "async"),
    ("x = [i for i in y]\n", "[i for i in y]", "list comprehension"),
    ("x = {i for i in y}\n", "{i for i in y}", "set comprehension"),
    ("x = {i: i for i in y}\n", "{i: i for i in y}", "dict comprehension"),
    ("x = f(i for i in y)\n", "(i for i in y)", "generator"),
    ("x = {1: 2}\n", "{1: 2}", "dict literal"),
    ("x = {1, 2}\n", "{1, 2}", "set literal"),
    ('x = f"a{b}"\n', 'f"a{b}"', "f-string"),
    ('x = b"a"\n', 'b"a"', "bytes"),
    ("f(*args)\n", "*args", "starred"),
    ("f(**kw)\n", "**kw", "**"),
    ("def f(*a):\n    pass\n", "*a", "`*` parameter"),
    ("def f(**k):\n    pass\n", "**k", "`**` parameter"),
    ("for i in x:\n    break\n", "break", "break"),
    ("for i in x:\n    continue\n", "continue", "continue"),
    ("a := 1\n", "a := 1", ":="),
    ("x = (a := 1)\n", "a := 1", ":="),
    ("print x\n", "print x", "print"),
    ("exec 'x'\n", "exec 'x'", "exec"),
    ("@d\nclass A:\n    pass\n", "@d\nclass A:", "decorated class"),
    ("def f():\n    def g():\n        pass\n", "def g():", "nested function"),
    ("match x:\n    case 1:\n        pass\n", "match x:", "match"),
    ("for i in x:\n    pass\nelse:\n    pass\n", "else:", "`else` clause"),
    ("x = ...\n", "...", "`...`"),
    ("x: int\n", "x: int", "declaration without a value"),
    ("x = a <> b\n", "<>", "<>"),
    ("x = a in b\n", "in", "membership test"),
    ("x = a not in b\n", "not in", "membership test"),
    ("x = a is b\n", "is", "identity test"),
    ("x = a is not None\n", "is not", "identity test"),
    ("type T = int\n", "type T = int", "`type` alias"),
    ("def f[T](x):\n    pass\n", "[T]", "type parameter"),
    ("[a, b] = c\n", "[a, b]", "list target"),
    ("for a.b in c:\n    pass\n", "a.b", "loop target"),
]


@pytest.mark.parametrize(("text", "where", "construct"), REJECTED)
def test_rejected_construct_reported_once_at_its_range(text: str, where: str,
                                                       construct: str) -> None:
    result = p(text)
    diag = only(result, "CK002")
    assert codes(result) == ["CK002"], result.diagnostics
    assert snippet(result, diag) == where
    assert construct in diag.message
    assert "not part of CAKE IR" in diag.message
    assert diag.path == "k.cake"


def test_rejections_explain_what_to_write_instead() -> None:
    loop = only(p("while True:\n    pass\n"), "CK002")
    assert any("for i in range(n)" in note for note in loop.notes)
    brk = only(p("for i in x:\n    break\n"), "CK002")
    assert any("no early exit" in note for note in brk.notes)


def test_import_fix_deletes_the_whole_line() -> None:
    text = "x = 1\nimport os  # not needed\ny = 2\n"
    result = p(text)
    diag = only(result, "CK002")
    (fix,) = diag.fixes
    assert fix.applicability is Applicability.SAFE
    assert apply_edits(text, fix.edits) == "x = 1\ny = 2\n"


def test_import_sharing_a_line_gets_no_fix() -> None:
    diag = only(p("x = 1; import os\n"), "CK002")
    assert diag.fixes == ()


def test_unsupported_construct_is_reported_once_not_per_inner_node() -> None:
    result = p("while a:\n    while b:\n        break\n    x = lambda: (lambda: 1)\n")
    assert codes(result) == ["CK002"]
    result = p("x = lambda: (lambda: [i for i in y])\n")
    assert codes(result) == ["CK002"]


def test_unsupported_expression_keeps_its_statement() -> None:
    result = p("x = lambda v: v\ny = 2\n")
    first, second = result.module.body
    assert isinstance(first, ast.Assign) and isinstance(first.value, ast.Invalid)
    assert isinstance(second, ast.Assign)


def test_call_argument_order_and_repeats() -> None:
    result = p("f(a=1, b)\n")
    diag = only(result, "CK001")
    assert "positional argument follows keyword argument" in diag.message
    assert snippet(result, diag) == "b"
    result = p("f(a=1, a=2)\n")
    diag = only(result, "CK001")
    assert "repeated" in diag.message


def test_grammar_allowlist_covers_every_grammar_kind() -> None:
    """Every named kind of the grammar is either converted or has a rejection message."""
    import tree_sitter_python
    from tree_sitter import Language

    from cake_core.syntax import subset

    language = Language(tree_sitter_python.language())
    handled = subset.ACCEPTED_STATEMENTS | subset.ACCEPTED_EXPRESSIONS | subset.TRIVIA
    kinds = {
        language.node_kind_for_id(i)
        for i in range(language.node_kind_count)
        if language.node_kind_is_named(i) and language.node_kind_is_visible(i)
    }
    rejected_kinds = {
        "lambda", "list_comprehension", "set_comprehension", "dictionary_comprehension",
        "generator_expression", "dictionary", "set", "await", "yield", "named_expression",
        "list_splat", "dictionary_splat", "while_statement", "import_statement",
        "class_definition", "try_statement", "match_statement", "print_statement",
        "exec_statement", "global_statement", "nonlocal_statement", "delete_statement",
        "assert_statement", "break_statement", "continue_statement", "raise_statement",
    }
    for kind in rejected_kinds:
        assert kind in kinds
        assert kind not in handled
        assert kind in subset.REJECTED and subset.REJECTED[kind].help
    assert subset.rejection("brand_new_kind").message.endswith("is not part of CAKE IR")


# --- syntax errors ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("header", "keyword"),
    [("for k in range(3)", "for"), ("if x > 1", "if"), ("with role('a')", "with"),
     ("def g(a: int) -> int", "def"), ("while x", "while")],
)
def test_missing_colon_gets_a_fix_and_the_rest_survives(header: str, keyword: str) -> None:
    text = f"a = 1\n{header}\n    b = 2\nc = 3\n"
    result = p(text)
    diag = only(result, "CK001")
    assert diag.message == f"expected `:` at the end of the `{keyword}` line"
    assert diag.span.start.line == 1 and diag.span.is_empty
    assert diag.span.start.col_byte == len(header)
    (fix,) = diag.fixes
    fixed = apply_edits(text, fix.edits)
    assert fixed == f"a = 1\n{header}:\n    b = 2\nc = 3\n"
    assert "CK001" not in codes(p(fixed))
    kept = 2 if keyword == "while" else 3  # a, the compound statement (not `while`), c
    assert len(result.module.body) == kept


def test_missing_colon_on_else_and_elif() -> None:
    result = p("if a:\n    x = 1\nelif b\n    x = 2\nelse\n    x = 3\n")
    diags = [d for d in result.diagnostics if d.code == "CK001"]
    assert [d.message for d in diags] == [
        "expected `:` at the end of the `elif` line",
        "expected `:` at the end of the `else` line",
    ]
    node = result.module.body[0]
    assert isinstance(node, ast.If) and isinstance(node.orelse[0], ast.If)


def test_missing_colon_deep_in_a_kernel_keeps_the_kernel() -> None:
    text = GEMM.replace("for k in range(cdiv(K, BK)):\n            s = ab.acquire()",
                        "for k in range(cdiv(K, BK))\n            s = ab.acquire()")
    result = p(text)
    diag = only(result, "CK001")
    assert diag.span.start.line == 9
    kernel = result.module.body[2]
    assert isinstance(kernel, ast.FunctionDef) and len(kernel.body) == 5
    assert apply_edits(text, diag.fixes[0].edits) == GEMM


@pytest.mark.parametrize(
    ("text", "where", "message", "fixed"),
    [
        ("x = f(a, b\ny = 2\n", "(", "`(` was never closed", "x = f(a, b)\ny = 2\n"),
        ("x = (1, 2]\n", "]", "closing `]` does not match the opening `(`", "x = (1, 2)\n"),
        ("x = 1)\ny = 2\n", ")", "unmatched `)`", "x = 1\ny = 2\n"),
        ("x = f(a[1)\n", "[", "`[` was never closed", "x = f(a[1])\n"),
        ('x = "abc\ny = 1\n', '"abc', "unterminated string literal", 'x = "abc"\ny = 1\n'),
    ],
)
def test_bracket_and_string_errors_have_fixes(text: str, where: str, message: str,
                                              fixed: str) -> None:
    result = p(text)
    diag = only(result, "CK001")
    assert diag.message == message
    assert snippet(result, diag) == where
    assert apply_edits(text, diag.fixes[0].edits) == fixed
    assert p(fixed).diagnostics == []


def test_unclosed_bracket_keeps_the_following_statements() -> None:
    result = p("def f():\n    x = g(a,\n          b\n    y = 2\n    z = 3\n")
    diag = only(result, "CK001")
    assert diag.message == "`(` was never closed"
    kernel = result.module.body[0]
    assert isinstance(kernel, ast.FunctionDef) and len(kernel.body) == 3


@pytest.mark.parametrize(
    ("text", "where", "fragment"),
    [
        ("x = a b\n", "a b", "is a `,` or an operator missing between `a` and `b`"),
        ("f(a=1 b=2)\n", "1 b", "missing between `1` and `b`"),
        ("x = f(a,,b)\n", ",", "unexpected `,`"),
        ("x = 1 +\ny = 2\n", "+", "expected an expression after `+`"),
        ("x = f(a=)\n", "=", "expected an expression after `=`"),
        ("x =\ny = 2\n", "=", "expected an expression after `=` on the same line"),
        ("x = a.\ny = 1\n", ".", "expected an attribute name after `.`"),
        ("$x = 1\n", "$", "invalid character `$`"),
        ("x = 1__0\n", "1__0", "not a valid name or number"),
        ("def f():\n    x = 1\n      y = 2\n", "y = 2", "unexpected indent"),
        ("  x = 1\n", "x = 1", "unexpected indent"),
    ],
)
def test_syntax_error_messages_and_tight_ranges(text: str, where: str, fragment: str) -> None:
    result = p(text)
    diag = only(result, "CK001")
    assert fragment in diag.message
    assert snippet(result, diag) == where


def test_empty_block_suggests_pass() -> None:
    text = "def f():\n    if x:\n"
    result = p(text)
    diag = only(result, "CK001")
    assert diag.message == "expected an indented block after `if`"
    fixed = apply_edits(text, diag.fixes[0].edits)
    assert fixed == "def f():\n    if x: pass\n"
    assert p(fixed).diagnostics == []


def test_error_in_a_long_file_points_at_one_line_and_keeps_the_rest() -> None:
    body = "".join(f"    v{i} = f({i})\n" for i in range(200))
    text = f"def k():\n{body}    w = (1 2 3)\n{body}\nz = 1\n"
    result = p(text)
    errors = [d for d in result.diagnostics if d.code == "CK001"]
    assert errors
    for diag in errors:
        assert diag.span.start.line == diag.span.end.line == 201
    kernel, tail = result.module.body
    assert isinstance(kernel, ast.FunctionDef) and len(kernel.body) == 401
    assert isinstance(tail, ast.Assign)


def test_line_continuation_is_not_an_error() -> None:
    assert p("x = 1 + \\\n    2\n").diagnostics == []
    assert p("x = f(1,\n      2)\n").diagnostics == []


def test_diagnostics_are_sorted_and_carry_the_path() -> None:
    result = p("x = lambda: 1\nwhile a:\n    pass\ny = (1,\n")
    offsets = [d.span.start.offset for d in result.diagnostics]
    assert offsets == sorted(offsets) and len(offsets) >= 3
    assert {d.path for d in result.diagnostics} == {"k.cake"}


# --- encodings, line endings ---------------------------------------------------------------
def test_crlf_spans_and_names_have_no_carriage_returns() -> None:
    text = GEMM.replace("\n", "\r\n")
    result = p(text)
    assert result.diagnostics == []
    lf = p(GEMM)
    names_crlf = [(n.id, n.span.start.line, n.span.start.col_byte)
                  for n in ast.walk(result.module) if isinstance(n, ast.Name)]
    names_lf = [(n.id, n.span.start.line, n.span.start.col_byte)
                for n in ast.walk(lf.module) if isinstance(n, ast.Name)]
    assert names_crlf == names_lf
    assert all("\r" not in name for name, _, _ in names_crlf)


def test_crlf_missing_colon_fix_goes_before_the_line_break() -> None:
    text = "for k in range(3)\r\n    x = 1\r\n"
    result = p(text)
    diag = only(result, "CK001")
    assert "\r" not in diag.message
    assert apply_edits(text, diag.fixes[0].edits) == "for k in range(3):\r\n    x = 1\r\n"


def test_crlf_error_range_stops_before_the_carriage_return() -> None:
    result = p("def f():\r\n    x = (1 2 3)\r\n    y = 1\r\n")
    for diag in result.diagnostics:
        assert "\r" not in snippet(result, diag)


def test_tabs_indent_blocks() -> None:
    result = p("def f():\n\tfor i in range(2):\n\t\tx = i\n\treturn x\n")
    assert result.diagnostics == []
    kernel = result.module.body[0]
    assert isinstance(kernel, ast.FunctionDef) and len(kernel.body) == 2
    loop = kernel.body[0]
    assert isinstance(loop, ast.For)
    assert loop.body[0].span.start.col_byte == 2


def test_bom_is_not_part_of_the_text() -> None:
    raw = b"\xef\xbb\xbfx = 1\n"
    source = SourceFile.from_bytes(raw)
    result = parse(source)
    assert result.diagnostics == [] and source.had_bom
    node = result.module.body[0]
    assert node.span.start.offset == 0 and node.span.start.col_utf16 == 0
    assert parse(SourceFile("\ufeffx = 1\n")).module == result.module


def test_nul_characters_are_reported_and_parsing_continues() -> None:
    text = "x = 1\x00\x00\ny = 2\n"
    result = p(text)
    diag = only(result, "CK003")
    assert (diag.span.start.offset, diag.span.end.offset) == (5, 7)
    assert codes(result) == ["CK003"]
    assert len(result.module.body) == 2


def test_invalid_utf8_is_reported_at_the_bad_bytes() -> None:
    source = SourceFile.from_bytes(b"x = 1\ny = '\xff\xfe'\nz = 3\n")
    result = parse(source)
    diag = only(result, "CK003")
    assert diag.span.start.line == 1 and diag.span.start.col_byte == 5
    assert len(result.module.body) == 3


def test_lone_surrogate_is_an_encoding_problem() -> None:
    result = p("x = 1\ny = '\ud800'\n")
    assert "CK003" in codes(result)
    assert len(result.module.body) == 2


def test_many_encoding_problems_are_summarised() -> None:
    result = parse(SourceFile.from_bytes(b"#" + b"\xff a" * 500 + b"\n"))
    encoding = [d for d in result.diagnostics if d.code == "CK003"]
    assert len(encoding) == 21
    assert "more encoding problems" in encoding[-1].message


# --- size and depth ----------------------------------------------------------------------------
def test_ten_thousand_nested_parentheses() -> None:
    result = p("x = " + "(" * 10_000 + "1" + ")" * 10_000 + "\ny = 2\n")
    diag = only(result, "CK002")
    assert diag.message == f"nested too deeply (limit {MAX_DEPTH})"
    assert diag.span.start.line == 0
    assert len(result.module.body) == 1  # the nested statement is dropped, `y` stays


@pytest.mark.parametrize(
    "text",
    [
        "x = " + "[" * 3000 + "]" * 3000 + "\n",
        "x = " + "-" * 5000 + "1\n",
        "x = " + "not " * 5000 + "a\n",
        "x = " + "a if b else " * 3000 + "c\n",
        "x = " + "f(" * 3000 + ")" * 3000 + "\n",
        "".join("    " * i + "if x:\n" for i in range(400)) + "    " * 400 + "pass\n",
    ],
)
def test_deep_nesting_is_one_diagnostic(text: str) -> None:
    result = p(text)
    assert [d.message for d in result.diagnostics] == [f"nested too deeply (limit {MAX_DEPTH})"]


def test_long_flat_chains_are_not_nesting() -> None:
    result = p("x = " + " + ".join(["a"] * 20_000) + "\n")
    assert result.diagnostics == []
    result = p("x = a" + ".b" * 5000 + "\n")
    assert result.diagnostics == []
    result = p("x = " + " and ".join(["a"] * 5000) + "\n")
    assert result.diagnostics == []
    node = result.module.body[0]
    assert isinstance(node, ast.Assign) and isinstance(node.value, ast.BoolOp)
    assert len(node.value.values) == 5000


def test_one_megabyte_file() -> None:
    text = GEMM * (1_000_000 // len(GEMM) + 1)
    result = p(text)
    assert len(text) > 1_000_000
    assert result.diagnostics == []
    assert len(result.module.body) == 3 * (1_000_000 // len(GEMM) + 1)


def test_random_bytes_give_a_bounded_list_of_findings() -> None:
    rng = random.Random(7)
    raw = bytes(rng.randrange(256) for _ in range(200_000))
    result = parse(SourceFile.from_bytes(raw))
    assert 0 < len(result.diagnostics) <= MAX_DIAGNOSTICS + 1
    assert all(d.code in ("CK001", "CK002", "CK003") for d in result.diagnostics)
    assert result.diagnostics[-1].message == "further problems in this file are not shown"


def test_a_fault_inside_the_parser_is_a_diagnostic(monkeypatch: pytest.MonkeyPatch) -> None:
    from cake_core.syntax import convert

    def boom(self: object, root: object) -> ast.Module:
        raise RuntimeError("boom")

    monkeypatch.setattr(convert.Converter, "module", boom)
    result = p("x = 1\n")
    assert codes(result) == ["CK901"]
    assert result.module.body == ()


def test_a_fault_in_the_incremental_path_falls_back_to_a_full_parse(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from cake_core.syntax import reuse

    def boom(self: object, node: object, depth: int, top_level: bool) -> None:
        raise RuntimeError("boom")

    old = p(GEMM)
    monkeypatch.setattr(reuse.Reuse, "lookup", boom)
    at = GEMM.index("regs=40") + len("regs=")
    new = reparse(old, at, at + 2, "48")
    assert_same(new, p(GEMM.replace("regs=40", "regs=48")))


# --- incremental parsing and the document ---------------------------------------------------
def assert_same(a: ParseResult, b: ParseResult) -> None:
    assert a.source.text == b.source.text
    assert a.module == b.module
    assert a.diagnostics == b.diagnostics


def test_reparse_matches_a_full_parse_after_random_edits() -> None:
    rng = random.Random(3)
    pieces = [*list("()[]:,.=+-* \n\t'\"#xk0é😀"), "for ", "if ", "    ", "lambda", "\r\n"]
    result = p(GEMM)
    for step in range(200):
        text = result.source.text
        i = rng.randrange(len(text) + 1)
        j = min(len(text), i + rng.choice([0, 0, 1, 3]))
        start = len(text[:i].encode())
        end = len(text[:j].encode())
        new = rng.choice(pieces) if rng.random() < 0.8 else ""
        result = reparse(result, start, end, new)
        expected = text[:i] + new + text[j:]
        assert_same(result, p(expected))
        if step % 50 == 49:
            result = p(GEMM)


def test_reparse_of_a_clean_edit() -> None:
    old = p(GEMM)
    at = GEMM.index("regs=40") + len("regs=")
    new = reparse(old, at, at + 2, "48")
    assert new.source.text == GEMM.replace("regs=40", "regs=48")
    assert_same(new, p(new.source.text))
    assert old.source.text == GEMM  # the old result is untouched
    assert_same(old, p(GEMM))


def _valid_edit(rng: random.Random, text: str) -> tuple[int, int, str]:
    """A random edit that usually keeps the text free of syntax errors (char indices)."""
    lines = text.split("\n")
    k = rng.randrange(len(lines))
    start = sum(len(line) + 1 for line in lines[:k])
    line = lines[k]
    end = start + len(line)
    indent = " " * (len(line) - len(line.lstrip()))
    digits = [m.start() for m in re.finditer(r"\d", line)]
    choice = rng.randrange(6)
    if choice == 0 and digits:
        at = start + rng.choice(digits)
        return at, at + 1, str(rng.randrange(10))
    if choice == 1:
        return end, end, rng.choice(["\n", "  # é😀 note", " "])
    if choice == 2 and line.strip():
        new = rng.choice(["x = 1", "y = lambda: 0", "import os", "w = f(a, k=1)", "z = 'é'"])
        return start, start, f"{indent}{new}\n"
    if choice == 3 and line.strip() and not line.rstrip().endswith(":") and k + 1 < len(lines):
        following = lines[k + 1]
        if len(following) - len(following.lstrip()) <= len(indent):
            return start, end + 1, ""
    if choice == 4:
        commas = [m.end() for m in re.finditer(",", line)]
        if commas:
            at = start + rng.choice(commas)
            return at, at, " "
    return end, end, ""


def test_reparse_reuses_untouched_statements_and_stays_exact() -> None:
    rng = random.Random(11)
    base = GEMM + GEMM.replace("def gemm(", "def gemm2(")
    result = p(base)
    reused = 0
    for _ in range(150):
        text = result.source.text
        i, j, new = _valid_edit(rng, text)
        start, end = len(text[:i].encode()), len(text[:j].encode())
        incremental = reparse(result, start, end, new)
        full = p(text[:i] + new + text[j:])
        assert_same(incremental, full)
        before = [s for s in result.module.body if s.span.end.offset < start]
        reused += sum(1 for s in incremental.module.body if any(s is b for b in before))
        result = incremental if full.tree.root_node.has_error is False else p(base)
    assert reused > 50


def test_statements_before_an_edit_are_the_same_objects() -> None:
    text = GEMM + GEMM.replace("def gemm(", "def gemm2(")
    old = p(text)
    at = text.index("regs=232", len(GEMM)) + len("regs=")
    new = reparse(old, at, at + 3, "200")
    assert new.module.body[2] is old.module.body[2]  # the first kernel is untouched
    assert_same(new, p(new.source.text))
    # an edit in the first kernel moves the second one: equal to a full parse, new objects
    at = text.index("ab.commit()") + len("ab.commit()")
    moved = reparse(old, at, at, "\n            x = 1")
    assert moved.module.body[0] is old.module.body[0]  # re-used, so incremental
    assert_same(moved, p(moved.source.text))
    assert moved.module.body[5] is not old.module.body[5]
    assert moved.module.body[5].span.start.line == old.module.body[5].span.start.line + 1


def test_document_applies_utf16_ranges() -> None:
    doc = Document('s = "😀"; t = 1\nu = 2\n', "k.cake")
    # replace `1` on line 0: the emoji counts as two UTF-16 units
    col = len('s = "😀"; t = ') + 1
    doc.apply_change(0, col, 0, col + 1, "42")
    assert doc.text == 's = "😀"; t = 42\nu = 2\n'
    assert_same(doc.result, p(doc.text))
    doc.apply_change(1, 0, 1, 5, "v = (1,\n     2)")
    assert doc.text == 's = "😀"; t = 42\nv = (1,\n     2)\n'
    doc.apply_change(0, 0, 2, 0, "")
    assert doc.text == "     2)\n"
    assert doc.result.diagnostics
    doc.apply_change(5, 0, 5, 0, "w = 3\n")  # past the end: appended
    assert doc.text.endswith("w = 3\n")
    doc.replace_all("x = 1\n")
    assert doc.result.diagnostics == [] and doc.result.source.path == "k.cake"


def test_document_columns_past_the_line_end_clamp() -> None:
    doc = Document("ab\ncd\n")
    doc.apply_change(0, 99, 0, 99, "X")
    assert doc.text == "abX\ncd\n"


def test_document_typing_a_kernel_character_by_character() -> None:
    doc = Document("", "k.cake")
    line, col = 0, 0
    for ch in GEMM[:400]:
        doc.apply_change(line, col, line, col, ch)
        if ch == "\n":
            line, col = line + 1, 0
        else:
            col += 2 if ord(ch) > 0xFFFF else 1
    assert doc.text == GEMM[:400]
    assert_same(doc.result, p(GEMM[:400]))


# --- hygiene -------------------------------------------------------------------------------------
def test_the_front_end_never_evaluates_text() -> None:
    """No call in the front end can run user text (checked on our own source)."""
    import ast as pyast

    banned = {"eval", "exec", "compile", "literal_eval", "__import__", "import_module"}
    syntax = Path(__file__).resolve().parent.parent / "cake_core" / "syntax"
    for path in syntax.glob("*.py"):
        tree = pyast.parse(path.read_text(), str(path))
        for node in pyast.walk(tree):
            if not isinstance(node, pyast.Call):
                continue
            func = node.func
            name = func.id if isinstance(func, pyast.Name) else None
            if isinstance(func, pyast.Attribute) and not (
                isinstance(func.value, pyast.Name) and func.value.id == "re"
            ):
                name = func.attr
            assert name not in banned, f"{path.name}:{node.lineno} calls {name}"
