"""Reading a kernel as statements with their IR ops, and writing statements back as text.

The structural tactics move whole statements between roles and loops.  They decide on the
typed IR (which ops a statement holds, which values they read) and rebuild text from the
statements' own source lines, so comments and spelling survive the move.  Renaming goes
through Python's tokenizer (CAKE is Python syntax, never executed), so a name inside a
string or after a `.` is never touched.
"""

from __future__ import annotations

import io
import re
import tokenize
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field

from cake_core.ir.kernel import Kernel, Op
from cake_core.ir.types import SmemType
from cake_core.source import SourceFile
from cake_core.syntax import ast
from cake_core.syntax.parser import parse

#: Runtime indices whose value depends on where a warp sits in the block.
WARP_INDICES = ("warp.id", "warp.rank", "warpgroup.id", "warpgroup.rank", "lane.id",
                "thread.id")


@dataclass
class Stmt:
    """One statement, the ops inside it, and its text (leading comment lines included)."""

    node: ast.Stmt
    ops: list[Op]
    text: str
    """Whole source lines, dedented to the statement's own indentation."""
    first_line: int
    """The first source line of `text` (a leading comment, or the statement itself)."""
    names_read: set[str] = field(default_factory=set)
    """Every plain name in the statement (an over-approximation of what it reads)."""
    names_bound: set[str] = field(default_factory=set)

    @property
    def lead(self) -> str:
        """The comment (and blank) lines above the statement, each ending in a newline."""
        lines = self.text.split("\n")
        return "".join(ln + "\n" for ln in lines[:self.node.span.start.line - self.first_line])

    @property
    def own(self) -> str:
        """The statement's own lines, without what `lead` holds."""
        return self.text.split("\n", self.node.span.start.line - self.first_line)[-1]

    @property
    def op_names(self) -> set[str]:
        return {op.name for op in self.ops}

    def has(self, *names: str) -> bool:
        return bool(self.op_names & set(names))

    def only(self, allowed: Iterable[str]) -> bool:
        return self.op_names <= set(allowed)


def kernel_def(source: SourceFile, kernel: Kernel) -> ast.FunctionDef | None:
    """The kernel's function definition in a fresh parse of `source`."""
    module = parse(source).module
    for s in module.body:
        if isinstance(s, ast.FunctionDef) and s.name == kernel.name:
            return s
    return None


def statements(source: SourceFile, kernel: Kernel, body: tuple[ast.Stmt, ...],
               after: int | None = None) -> list[Stmt]:
    """`body` as Stmts.  The lines between statements (comments, one blank line) travel
    with the next one; `after` is the line the previous sibling (or the block's header)
    ended on, None to start at the first statement's own line."""
    ops = list(kernel.ops())  # program order: an operand's op comes before its user
    out: list[Stmt] = []
    prev = after
    for node in body:
        first = node.span.start.line
        lo = first if prev is None else prev + 1
        last = node.span.end.line
        lines: list[str] = []
        for i in range(lo, last + 1):  # runs of blank lines shrink to one
            ln = source.line_text(i)
            if ln.strip() or not lines or lines[-1].strip():
                lines.append(ln)
        inside = [op for op in ops
                  if node.span.start.offset <= op.span.start.offset < node.span.end.offset]
        st = Stmt(node, inside, dedent(lines, indent_of(source.line_text(first))), lo)
        st.names_read, st.names_bound = names_of(node)
        out.append(st)
        prev = last
    return out



def all_warps_role(source: SourceFile, kernel: Kernel, top: list[Stmt]) -> list[Stmt] | None:
    """The statements inside the kernel's one role, when that role runs on every warp and
    is the only `with` among the top-level statements `top`, the last of them (the shape
    of a kernel written with one role); None for any other shape."""
    if len(kernel.roles) != 1:
        return None
    role = next(iter(kernel.roles.values()))
    if role.warp_start != 0 or role.warp_stop != kernel.warps:
        return None
    withs = [s for s in top if isinstance(s.node, ast.With)]
    if len(withs) != 1 or withs[0] is not top[-1]:
        return None
    w = withs[0].node
    assert isinstance(w, ast.With)
    return statements(source, kernel, w.body, w.span.start.line)

def indent_of(line: str) -> str:
    return line[:len(line) - len(line.lstrip())]


def dedent(lines: list[str], prefix: str) -> str:
    out = []
    for ln in lines:
        if ln.startswith(prefix):
            out.append(ln[len(prefix):])
        else:
            out.append(ln.lstrip())
    return "\n".join(out)


def indent(text: str, prefix: str) -> str:
    return "\n".join(prefix + ln if ln.strip() else "" for ln in text.split("\n"))


def names_of(node: ast.Node) -> tuple[set[str], set[str]]:
    """Every plain name in a statement, and the names it binds (assignment targets and
    loop variables, nested statements included)."""
    names: set[str] = set()
    bound: set[str] = set()
    for n in ast.walk(node):
        if isinstance(n, ast.Name):
            names.add(n.id)
        targets: tuple[ast.Expr, ...] = ()
        if isinstance(n, ast.Assign):
            targets = n.targets
        elif isinstance(n, ast.AugAssign | ast.For):
            targets = (n.target,)
        for t in targets:
            bound.update(m.id for m in ast.walk(t) if isinstance(m, ast.Name))
    return names, bound


def rename(text: str, mapping: Mapping[str, str]) -> str:
    """Replace whole-name tokens (not attributes, not inside strings or comments)."""
    if not mapping:
        return text
    try:
        toks = list(tokenize.generate_tokens(io.StringIO(text + "\n").readline))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return _rename_regex(text, mapping)
    lines = text.split("\n")
    edits: list[tuple[int, int, int, str]] = []
    prev: tokenize.TokenInfo | None = None
    for tok in toks:
        if tok.type == tokenize.NAME and tok.string in mapping and not (
                prev is not None and prev.type == tokenize.OP and prev.string == "."):
            (row, col), (_, end) = tok.start, tok.end
            edits.append((row - 1, col, end, mapping[tok.string]))
        if tok.type not in (tokenize.NL, tokenize.NEWLINE, tokenize.COMMENT,
                            tokenize.INDENT, tokenize.DEDENT):
            prev = tok
    for row, col, end, new in sorted(edits, reverse=True):
        ln = lines[row]
        lines[row] = ln[:col] + new + ln[end:]
    return "\n".join(lines)


def _rename_regex(text: str, mapping: Mapping[str, str]) -> str:
    for old, new in mapping.items():
        text = re.sub(rf"(?<![\w.]){re.escape(old)}(?!\w)", new, text)
    return text


def names_in_text(text: str) -> set[str]:
    """Every NAME token in `text` (for "is this name free?" questions)."""
    try:
        toks = tokenize.generate_tokens(io.StringIO(text + "\n").readline)
        return {t.string for t in toks if t.type == tokenize.NAME}
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return set(re.findall(r"[A-Za-z_]\w*", text))


_ATOMS = (ast.Name, ast.Constant, ast.Attribute, ast.Call, ast.Subscript)


def operand(text: str) -> str:
    """`text` as one operand of a binary operator: unchanged when it parses as an atom (a
    name, number, attribute, call or subscript, which bind tighter than any operator),
    parenthesised otherwise.  Parsed, not scanned: `cdiv(a, b) * cdiv(c, d)` starts with a
    name and ends with `)` yet is a product, and `t // x` in front of it would split it."""
    if _enclosed(text):
        return text
    res = parse(SourceFile.from_bytes(f"_ = {text}\n".encode(), "<operand>"))
    body = res.module.body
    if not res.has_errors and len(body) == 1 and isinstance(body[0], ast.Assign) \
            and isinstance(body[0].value, _ATOMS):
        return text
    return f"({text})"


def _enclosed(text: str) -> bool:
    """Whether `text` is one parenthesised group: its first `(` closes at its very end."""
    if not text.startswith("("):
        return False
    depth = 0
    for i, ch in enumerate(text):
        depth += (ch == "(") - (ch == ")")
        if depth == 0:
            return i == len(text) - 1
    return False


def fresh_name(taken: set[str], *candidates: str) -> str:
    for c in candidates:
        if c not in taken:
            return c
    base = candidates[0] if candidates else "v"
    i = 2
    while f"{base}{i}" in taken:
        i += 1
    return f"{base}{i}"


def smem_base(op: Op, arg: str) -> str | None:
    """The buffer an smem argument views (`sa[s].T` -> "sa"), or None for other args."""
    v = op.args.get(arg)
    return v.type.buffer if v is not None and isinstance(v.type, SmemType) else None


def smem_args(op: Op) -> list[str]:
    return [b for a in op.args if (b := smem_base(op, a)) is not None]


def writes_buffers(s: Stmt, buffers: Collection[str]) -> bool:
    """Whether an op of `s` writes one of `buffers`, by its primitive's declared effects."""
    for op in s.ops:
        for arg in op.prim.effects.writes:
            if smem_base(op, arg) in buffers:
                return True
    return False


def lines_span(source: SourceFile, stmts: list[Stmt]) -> tuple[int, int]:
    """Byte range of whole lines from the first statement's first line (its leading
    comments included) to the end of the last statement's last line."""
    start = source.offset_of(stmts[0].first_line, 0)
    last = stmts[-1].node.span.end.line
    return start, source.offset_of(last, 0) + len(source.line_text(last).encode())


def header_end(source: SourceFile, fn: ast.FunctionDef) -> int:
    """The line on which the `def` header of `fn` ends (its `:`)."""
    line = fn.params[-1].span.end.line if fn.params else fn.name_span.start.line
    while line < fn.body[0].span.start.line - 1:
        text = source.line_text(line).split("#", 1)[0].rstrip()
        if text.endswith(":"):
            break
        line += 1
    return line


def header_text(source: SourceFile, node: ast.Stmt) -> str:
    """The compound statement's header (`for k in range(K):  # comment`), one line."""
    return source.line_text(node.span.start.line).strip()


def split_top_level(text: str) -> list[str]:
    """`text` split at its commas outside brackets (`BM, (BK, 2)` -> `BM`, ` (BK, 2)`)."""
    out, depth, cur = [], 0, ""
    for ch in text:
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        if ch == "," and depth == 0:
            out.append(cur)
            cur = ""
        else:
            cur += ch
    out.append(cur)
    return out
