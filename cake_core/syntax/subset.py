"""The accepted subset of Python syntax, as an explicit allowlist of tree-sitter node kinds.

The tree-sitter grammar accepts all of Python and some things CPython rejects (`print x`,
a bare `a := 1`).  CAKE IR is a small part of that: the converter in `convert.py` only
builds nodes for the kinds listed as accepted here, and every other kind becomes a CK002
diagnostic at the construct's range.  The rejection table gives the message and, where one
fits, the way to say the same thing in CAKE IR.  A kind missing from both tables is still
rejected (with a generic message), so a grammar upgrade can never widen the subset silently.
"""

from __future__ import annotations

from dataclasses import dataclass

# Node kinds that never carry meaning and are skipped wherever they appear.
TRIVIA = frozenset({"comment", "line_continuation"})

ACCEPTED_STATEMENTS = frozenset(
    {
        "expression_statement",
        "pass_statement",
        "return_statement",
        "if_statement",
        "for_statement",
        "with_statement",
        "function_definition",
        "decorated_definition",
    }
)
"""Statement kinds the converter understands (nested `def` is rejected separately)."""

ACCEPTED_EXPRESSIONS = frozenset(
    {
        "identifier",
        "integer",
        "float",
        "string",
        "concatenated_string",
        "true",
        "false",
        "none",
        "attribute",
        "subscript",
        "call",
        "binary_operator",
        "unary_operator",
        "not_operator",
        "comparison_operator",
        "boolean_operator",
        "conditional_expression",
        "tuple",
        "expression_list",
        "parenthesized_expression",
        "list",
        # annotations: `Tensor[bf16, (M, K)]` arrives as a generic type
        "type",
        "generic_type",
        "union_type",
        "member_type",
    }
)
"""Expression kinds the converter understands."""


@dataclass(frozen=True, slots=True)
class Rejection:
    """How to report a construct outside the subset.

    `construct` completes "... is not part of CAKE IR"; `help` says what to write
    instead; `header_only` reports a compound statement at its header (up to the colon)
    so that an editor does not underline the whole body.
    """

    construct: str
    help: str | None = None
    header_only: bool = False

    @property
    def message(self) -> str:
        return f"{self.construct} is not part of CAKE IR"


_NO_EXCEPTIONS = (
    "CAKE kernels cannot raise or catch exceptions; the verifier rejects invalid kernels "
    "before they run"
)
_NO_EARLY_EXIT = "CAKE loops have no early exit so pipelines stay balanced"
_NOT_A_COROUTINE = "a kernel is straight-line code with bounded loops, not a coroutine"
_NO_COMPREHENSION = "write the elements out as a tuple, or use a `for` loop"

REJECTED: dict[str, Rejection] = {
    # statements
    "while_statement": Rejection(
        "a `while` loop",
        "use `for i in range(n)`: loops must have a bound the verifier can reason about",
        header_only=True,
    ),
    "import_statement": Rejection(
        "`import`", "primitives are built in, nothing is imported: delete the line"
    ),
    "import_from_statement": Rejection(
        "`from ... import`", "primitives are built in, nothing is imported: delete the line"
    ),
    "future_import_statement": Rejection(
        "`from __future__ import`", "primitives are built in, nothing is imported: delete the line"
    ),
    "class_definition": Rejection(
        "a class definition",
        "describe data with kernel parameters (`Tensor[...]`) and primitives such as `smem`",
        header_only=True,
    ),
    "try_statement": Rejection("a `try` statement", _NO_EXCEPTIONS, header_only=True),
    "raise_statement": Rejection("a `raise` statement", _NO_EXCEPTIONS),
    "global_statement": Rejection(
        "a `global` declaration",
        "top-level constants are visible in every kernel; to change a value, bind a new name",
    ),
    "nonlocal_statement": Rejection(
        "a `nonlocal` declaration", "functions do not nest in CAKE IR; bind a new name instead"
    ),
    "delete_statement": Rejection(
        "a `del` statement", "buffers live for the whole kernel: there is nothing to delete"
    ),
    "assert_statement": Rejection(
        "an `assert` statement",
        "requirements are checked statically: declare them on the size, e.g. "
        "`dim(\"K\", multiple_of=64)`",
    ),
    "break_statement": Rejection("`break`", _NO_EARLY_EXIT),
    "continue_statement": Rejection("`continue`", _NO_EARLY_EXIT),
    "print_statement": Rejection(
        "a Python 2 `print` statement", "kernels do not print; remove the statement"
    ),
    "exec_statement": Rejection(
        "a Python 2 `exec` statement", "CAKE IR is never executed as Python; remove the statement"
    ),
    "match_statement": Rejection(
        "a `match` statement", "use `if`/`elif`/`else`", header_only=True
    ),
    "type_alias_statement": Rejection(
        "a `type` alias", "bind the type to a name with `=` instead"
    ),
    "nested_function": Rejection(
        "a nested function definition",
        "define functions at the top level of the file",
        header_only=True,
    ),
    "async_function": Rejection(
        "an `async` function", _NOT_A_COROUTINE, header_only=True
    ),
    "async_for": Rejection("an `async for` loop", _NOT_A_COROUTINE, header_only=True),
    "async_with": Rejection("an `async with` statement", _NOT_A_COROUTINE, header_only=True),
    "for_else": Rejection(
        "an `else` clause on a loop", "loops always run to completion: move the code after the loop"
    ),
    "decorated_class": Rejection(
        "a decorated class", "only functions take decorators (`@kernel`)", header_only=True
    ),
    # expressions
    "lambda": Rejection(
        "a `lambda`", "CAKE IR has no function values: write the expression inline"
    ),
    "list_comprehension": Rejection("a list comprehension", _NO_COMPREHENSION),
    "set_comprehension": Rejection("a set comprehension", _NO_COMPREHENSION),
    "dictionary_comprehension": Rejection("a dict comprehension", _NO_COMPREHENSION),
    "generator_expression": Rejection("a generator expression", _NO_COMPREHENSION),
    "dictionary": Rejection(
        "a dict literal", "pass the entries as keyword arguments to the primitive"
    ),
    "set": Rejection("a set literal", "use a tuple `(a, b)`"),
    "await": Rejection("`await`", _NOT_A_COROUTINE),
    "yield": Rejection("`yield`", _NOT_A_COROUTINE),
    "named_expression": Rejection(
        "an assignment expression (`:=`)", "assign on a line of its own: `a = 1`"
    ),
    "list_splat": Rejection("a starred expression (`*x`)", "pass each argument explicitly"),
    "parenthesized_list_splat": Rejection(
        "a starred expression (`*x`)", "pass each argument explicitly"
    ),
    "dictionary_splat": Rejection(
        "a `**` argument", "pass each keyword argument explicitly"
    ),
    "list_splat_pattern": Rejection(
        "a starred target (`*x`)", "unpack into a fixed number of names"
    ),
    "dictionary_splat_pattern": Rejection("a `**` parameter", "list each parameter explicitly"),
    "star_parameter": Rejection("a `*` parameter", "list each parameter explicitly"),
    "keyword_separator": Rejection(
        "a keyword-only marker (`*`)", "list the parameters without it"
    ),
    "positional_separator": Rejection(
        "a positional-only marker (`/`)", "list the parameters without it"
    ),
    "fstring": Rejection(
        "an f-string", "use a plain string: nothing is formatted at compile time"
    ),
    "bytes": Rejection("a bytes literal", "use a plain string"),
    "string_prefix": Rejection("a string with this prefix", "use a plain or raw string"),
    "complex": Rejection("a complex number literal"),
    "ellipsis": Rejection("`...`", "write the value out"),
    "splat_type": Rejection("a starred annotation", "write each type out"),
    "constrained_type": Rejection("a `:` constraint inside an annotation"),
    "type_parameter_list": Rejection(
        "a type parameter list", "CAKE kernels are generic through `dim()` sizes instead"
    ),
    "bare_annotation": Rejection(
        "a declaration without a value",
        "CAKE IR binds a name when it declares it: write `x: T = value`",
    ),
    "python2_not_equal": Rejection("the Python 2 operator `<>`", "use `!=`"),
    "membership_test": Rejection(
        "a membership test (`in`, `not in`)", "compare with `==` and combine with `or`"
    ),
    "identity_test": Rejection(
        "an identity test (`is`, `is not`)", "compare values with `==` or `!=`"
    ),
}


def rejection(kind: str) -> Rejection:
    """The rejection for a node kind, with a generic one for kinds nobody listed."""
    found = REJECTED.get(kind)
    if found is not None:
        return found
    readable = kind.replace("_", " ")
    return Rejection(f"`{readable}`")
