"""Reading what nvcc and ptxas say about generated code, and turning it into diagnostics.

`ptxas -v` reports, per entry function, registers, barriers, static shared memory, stack
frame and spill bytes; its informational lines carry the wgmma findings (C7510-C7520:
"wgmma.mma_async instructions are serialized ...") and register-shortage notes (C7602).
nvcc's front end reports errors at `file(line)`; thanks to the `#line` directives the file
is the .cake source and the line the CAKE line that produced the code.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from cake_core.diagnostics import codes
from cake_core.diagnostics.model import Diagnostic
from cake_core.source import SourceFile, Span

_ENTRY = re.compile(r"ptxas info\s*: Compiling entry function '([^']+)' for '([^']+)'")
_PROPS = re.compile(r"ptxas info\s*: Function properties for (\S+)")
_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_USED = re.compile(r"ptxas info\s*: Used (\d+) registers(.*)")
_PTXAS = re.compile(r"ptxas\s+(info|warning|error|fatal)\s*:\s*(?:\((C\d+)\)\s*)?(.*)")
_FRONT = re.compile(r"^(.*?)\((\d+)\): (error|warning|remark)(?: #[\w-]+)?: (.*)$")
_CODE = re.compile(r"\b(C\d{4})\b")

#: ptxas codes of the wgmma pipeline findings (serialization, inserted waits).
WGMMA_CODES = frozenset({"C7510", "C7511", "C7512", "C7513", "C7514", "C7515", "C7516",
                         "C7517", "C7518", "C7519", "C7520"})
SHORTAGE_CODES = frozenset({"C7602"})


@dataclass
class FunctionResources:
    name: str
    arch: str = ""
    registers: int | None = None
    barriers: int = 0
    smem_static: int = 0
    stack: int = 0
    spill_stores: int = 0
    spill_loads: int = 0
    cmem: dict[str, int] = field(default_factory=dict)

    def as_data(self) -> dict[str, object]:
        return {"name": self.name, "arch": self.arch, "registers": self.registers,
                "barriers": self.barriers, "smem_static": self.smem_static,
                "stack": self.stack, "spill_stores": self.spill_stores,
                "spill_loads": self.spill_loads, "cmem": dict(self.cmem)}


@dataclass
class Finding:
    tool: str
    """"nvcc" or "ptxas"."""
    severity: str
    """"error", "warning" or "info"."""
    message: str
    code: str | None = None
    file: str | None = None
    line: int | None = None
    """1-based line in `file`."""
    function: str | None = None


def parse_log(log: str) -> tuple[dict[str, FunctionResources], list[Finding]]:
    """Resources per entry function and every error, warning and coded note in `log`."""
    funcs: dict[str, FunctionResources] = {}
    findings: list[Finding] = []
    current: FunctionResources | None = None
    for raw in log.splitlines():
        line = raw.strip()
        if not line:
            continue
        m = _ENTRY.search(line)
        if m:
            current = funcs.setdefault(m.group(1), FunctionResources(m.group(1)))
            current.arch = m.group(2)
            continue
        m = _PROPS.search(line)
        if m:
            current = funcs.setdefault(m.group(1), FunctionResources(m.group(1)))
            continue
        m = _FRAME.search(line)
        if m and current is not None:
            current.stack, current.spill_stores, current.spill_loads = (int(g) for g in m.groups())
            continue
        m = _USED.search(line)
        if m and current is not None:
            current.registers = int(m.group(1))
            rest = m.group(2)
            b = re.search(r"used (\d+) barriers", rest)
            current.barriers = int(b.group(1)) if b else 0
            s = re.search(r"(\d+) bytes smem", rest)
            current.smem_static = int(s.group(1)) if s else 0
            for c in re.finditer(r"(\d+) bytes (cmem\[\d+\])", rest):
                current.cmem[c.group(2)] = int(c.group(1))
            continue
        m = _PTXAS.search(line)
        if m:
            sev, code, msg = m.groups()
            if sev == "info" and code is None:
                continue  # gmem, compile time and other progress notes
            fn = re.search(r"function '([^']+)'", msg)
            findings.append(Finding("ptxas", "error" if sev in ("error", "fatal") else
                                    "warning" if sev == "warning" else "info", msg.strip(),
                                    code or _first_code(msg), function=fn.group(1) if fn else None))
            continue
        m = _FRONT.match(line)
        if m:
            file, ln, sev, msg = m.groups()
            findings.append(Finding("nvcc", "error" if sev == "error" else "warning", msg.strip(),
                                    file=file, line=int(ln)))
            continue
        if "error" in line.lower() and ("nvcc" in line.lower() or "fatal" in line.lower()):
            findings.append(Finding("nvcc", "error", line))
    return funcs, findings


def _first_code(msg: str) -> str | None:
    m = _CODE.search(msg)
    return m.group(1) if m else None


def line_span(source: SourceFile, line: int) -> Span:
    """The text of 1-based `line` (without indentation), or the file start if out of range."""
    i = line - 1
    if not 0 <= i < source.line_count:
        return source.span(0, 0)
    text = source.line_text(i)
    start = source.offset_of(i, 0)
    indent = len(text) - len(text.lstrip())
    a = start + len(text[:indent].encode("utf-8"))
    return source.span(a, a + len(text.strip().encode("utf-8")))


def diagnostics(findings: list[Finding], funcs: dict[str, FunctionResources],
                source: SourceFile, default: Span, cu_name: str = "") -> list[Diagnostic]:
    """Findings as CAKE diagnostics: at the .cake line when the message names one."""
    out: list[Diagnostic] = []
    seen: set[tuple[str, str, int | None]] = set()
    for f in findings:
        at = default
        where = ""
        if f.file is not None and f.line is not None:
            if _same_file(f.file, source.path):
                at = line_span(source, f.line)
            else:
                where = f" (in the generated {f.file}:{f.line})"
        key = (f.message, f.file or "", f.line)
        if key in seen:
            continue
        seen.add(key)
        text = f"{f.tool}: {f.message}{where}"
        if f.severity == "error":
            out.append(codes.CUDA_COMPILE_ERROR.at(at, text))
        elif f.code in WGMMA_CODES or "wgmma" in f.message.lower():
            out.append(codes.WGMMA_SERIALIZED.at(at, text, notes=[
                "the tensor cores wait for each wgmma before the next one starts; look for "
                "accumulator reads or branches between a wgmma and its wgmma_wait"],
                data={"ptxas_code": f.code}))
        elif f.code in SHORTAGE_CODES or ("register" in f.message.lower() and "short" in \
                f.message.lower()):
            out.append(codes.REGISTER_SHORTAGE.at(at, text, data={"ptxas_code": f.code}))
        elif f.severity == "warning" or f.code is not None:
            out.append(codes.PTXAS_WARNING.at(at, text, data={"code": f.code}))
    for fr in funcs.values():
        if fr.spill_stores or fr.spill_loads:
            out.append(codes.REGISTER_SPILL.at(
                default, f"ptxas spilled registers of `{fr.name}`: {fr.spill_stores} bytes of "
                f"spill stores, {fr.spill_loads} bytes of spill loads ({fr.registers} registers "
                "used)", notes=["lower a role's `regs=` demand (smaller accumulator tiles) or give "
                                "it more registers"], data=fr.as_data()))
        elif fr.stack:
            out.append(codes.LOCAL_MEMORY.at(
                default, f"`{fr.name}` keeps a {fr.stack}-byte stack frame: a register array "
                "is indexed with values nvcc cannot resolve at compile time", data=fr.as_data()))
    return [d.with_path(source.path) for d in out]


def _same_file(a: str, b: str) -> bool:
    a, b = a.replace("\\", "/"), b.replace("\\", "/")
    return a == b or a.endswith("/" + b) or b.endswith("/" + a)


__all__ = ["Finding", "FunctionResources", "diagnostics", "line_span", "parse_log"]
