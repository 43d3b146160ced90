"""Text assembly for generated CUDA: indentation, `#line` mapping and identifiers.

Every emitted line carries the .cake line it stands for (or none, for code that belongs
to the .cu file itself).  `render` inserts `#line N "file.cake"` only where the running
line counter would otherwise be wrong, so nvcc errors, ptxas messages, cuda-gdb and
compute-sanitizer all point at the CAKE source while consecutive one-line ops need no
directive at all.  Code that belongs to the .cu file (helpers, the host launcher) is put
back on its physical lines with a `#line` naming the .cu file.
"""

from __future__ import annotations

import keyword
import re
from dataclasses import dataclass

#: A line that is neither code nor a preprocessor directive needs no mapping of its own.
_TRIVIAL = re.compile(r"^\s*(//.*)?$|^\s*[{}]\s*(//.*)?$")

CPP_RESERVED = frozenset({
    "alignas", "alignof", "and", "and_eq", "asm", "auto", "bitand", "bitor", "bool", "break",
    "case", "catch", "char", "char16_t", "char32_t", "class", "compl", "const", "constexpr",
    "const_cast", "continue", "decltype", "default", "delete", "do", "double", "dynamic_cast",
    "else", "enum", "explicit", "export", "extern", "false", "float", "for", "friend", "goto",
    "if", "inline", "int", "long", "mutable", "namespace", "new", "noexcept", "not", "not_eq",
    "nullptr", "operator", "or", "or_eq", "private", "protected", "public", "register",
    "reinterpret_cast", "return", "short", "signed", "sizeof", "static", "static_assert",
    "static_cast", "struct", "switch", "template", "this", "thread_local", "throw", "true",
    "try", "typedef", "typeid", "typename", "union", "unsigned", "using", "virtual", "void",
    "volatile", "wchar_t", "while", "xor", "xor_eq", "threadIdx", "blockIdx", "blockDim",
    "gridDim", "warpSize", "min", "max", "abs", "exp", "exp2", "log", "log2", "sqrt", "rsqrt",
    "float2", "float4", "int2", "int4", "uint2", "uint4", "dim3", "half", "nv_bfloat16",
    "size_t", "uint8_t", "uint16_t", "uint32_t", "uint64_t", "int8_t", "int16_t", "int32_t",
    "int64_t", "INFINITY", "NAN", "M_PI", "assert", "printf", "memcpy",
})


@dataclass(frozen=True, slots=True)
class Line:
    text: str
    src_line: int | None
    """0-based .cake line this code stands for; None for the .cu file's own code."""
    directive: bool = False


class Emitter:
    """Collects indented lines; `render` resolves the `#line` mapping."""

    def __init__(self, cake_path: str, indent_unit: str = "  ") -> None:
        self.cake_path = cake_path
        self.lines: list[Line] = []
        self.depth = 0
        self.unit = indent_unit
        self.src_line: int | None = None

    # -- writing --------------------------------------------------------------------------
    def emit(self, code: str, src_line: int | None = -1) -> None:
        """Append `code` (one or more lines) at the current indentation.

        `src_line` -1 means "the current source line" (set with `at`); None marks code of
        the .cu file itself.
        """
        line = self.src_line if src_line == -1 else src_line
        for raw in code.split("\n"):
            text = (self.unit * self.depth + raw) if raw.strip() else ""
            self.lines.append(Line(text, line, raw.lstrip().startswith("#")))

    def mark(self) -> int:
        return len(self.lines)

    def insert(self, pos: int, code: str, src_line: int | None) -> None:
        """Insert `code` at line index `pos` (from `mark`) at the current indentation."""
        new = [Line((self.unit * self.depth + raw) if raw.strip() else "", src_line,
                    raw.lstrip().startswith("#")) for raw in code.split("\n")]
        self.lines[pos:pos] = new

    def text_since(self, pos: int) -> str:
        return "\n".join(ln.text for ln in self.lines[pos:])

    def blank(self) -> None:
        self.lines.append(Line("", None))

    def at(self, src_line: int | None) -> None:
        """Code emitted from now on stands for .cake line `src_line` (0-based)."""
        self.src_line = src_line

    def open(self, header: str, src_line: int | None = -1) -> None:
        self.emit(header + " {", src_line)
        self.depth += 1

    def close(self, trailer: str = "") -> None:
        self.depth -= 1
        self.emit("}" + trailer, None)

    # -- rendering ------------------------------------------------------------------------
    def render(self, cu_name: str) -> str:
        """The final text; `cu_name` is how #line directives name the .cu file itself."""
        out: list[str] = []
        state: tuple[str, int] | None = None  # (file, number the next output line gets)
        cake = _quote(self.cake_path)
        cu = _quote(cu_name)
        for ln in self.lines:
            trivial = ln.directive or _TRIVIAL.match(ln.text) is not None
            if ln.src_line is not None and not trivial:
                want = ("cake", ln.src_line + 1)
                if state != want:
                    out.append(f"#line {ln.src_line + 1} {cake}")
                out.append(ln.text)
                state = ("cake", ln.src_line + 2)
                continue
            if ln.src_line is None and not trivial and state is not None and state[0] == "cake":
                out.append(f"#line {len(out) + 2} {cu}")
                state = None
            out.append(ln.text)
            if state is not None:
                state = (state[0], state[1] + 1)
        return "\n".join(out).rstrip("\n") + "\n"


def _quote(path: str) -> str:
    return '"' + path.replace("\\", "\\\\").replace('"', '\\"') + '"'


def c_identifier(name: str, taken: set[str] | frozenset[str] = frozenset()) -> str:
    """A C++ identifier for a CAKE name: kept as written unless it collides."""
    ident = re.sub(r"\W", "_", name)
    if not ident or ident[0].isdigit():
        ident = "v_" + ident
    if ident.startswith(("cake_", "__")):
        ident = "u_" + ident  # the prelude's names and the compiler's; a suffix cannot help
    while ident in CPP_RESERVED or keyword.iskeyword(ident) or ident in taken:
        ident = ident + "_"
    return ident


class Names:
    """Identifier allocation for one kernel: user names first, internal names around them."""

    def __init__(self, user: set[str]) -> None:
        self.user = set(user)
        self.used: set[str] = set(user)

    def internal(self, base: str) -> str:
        """A fresh identifier that no user name and no earlier internal name uses."""
        name = base
        i = 1
        while name in self.used or name in CPP_RESERVED:
            name = f"{base}{i}"
            i += 1
        self.used.add(name)
        return name
