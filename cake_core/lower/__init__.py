"""Lowering verified CAKE kernels to CUDA C++ (`cake lower`), and compiling them (`cake compile`).

`lower_source(source)` checks the file; a kernel with errors is not lowered (its
diagnostics come back instead).  Every kernel that verifies becomes a `__global__`
function with inline PTX where CUDA C++ has no spelling (TMA, mbarriers, wgmma,
setmaxnreg), a host launcher `cake_launch_<kernel>` and JSON metadata.  A construct the
lowering does not handle yet is a CK601 diagnostic at its source range, never a crash.
See docs/lowering.md.
"""

from __future__ import annotations

import traceback
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from cake_core.diagnostics import codes
from cake_core.diagnostics.model import Diagnostic
from cake_core.hardware import get_arch
from cake_core.ir.symbolic import SM_COUNT
from cake_core.lower import host, prelude
from cake_core.lower.emitter import Emitter
from cake_core.lower.kernel import lower_kernel
from cake_core.lower.plan import LowerError
from cake_core.primitives.registry import Registry
from cake_core.source import SourceFile

if TYPE_CHECKING:
    from cake_core.check import CheckResult


@dataclass
class LoweredKernel:
    name: str
    entry: str
    arch: str
    meta: dict[str, Any]
    smem_bytes: int


@dataclass
class LowerResult:
    source: SourceFile
    cu: str | None
    """The .cu text (None when nothing could be lowered)."""
    kernels: list[LoweredKernel] = field(default_factory=list)
    diagnostics: list[Diagnostic] = field(default_factory=list)
    check_diagnostics: list[Diagnostic] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.cu is not None and not any(d.severity.value == "error"
                                               for d in self.diagnostics)

    @property
    def meta(self) -> dict[str, Any]:
        return {"schema": "cake.lower/1", "source": self.source.path,
                "kernels": [k.meta for k in self.kernels]}


def lower_source(source: SourceFile, *, kernel: str | None = None, arch: str | None = None,
                 cu_name: str | None = None, registry: Registry | None = None) -> LowerResult:
    """Check `source`, then lower its kernels (or only `kernel`) to one .cu text.

    Raises ValueError when `kernel` names no kernel of the file.
    """
    # an upward import the layers contract lists (pyproject.toml): text-in entry point
    from cake_core.check import check_source

    return lower_checked(check_source(source, arch=arch, registry=registry), kernel=kernel,
                         cu_name=cu_name)


def lower_checked(res: CheckResult, *, kernel: str | None = None,
                  cu_name: str | None = None) -> LowerResult:
    """Lower an already checked file (see `lower_source`)."""
    source = res.source
    out = LowerResult(source, None, check_diagnostics=list(res.diagnostics))
    errors = [d for d in res.diagnostics if d.severity.value == "error"]
    if errors or res.program is None:
        out.diagnostics = list(res.diagnostics)
        return out
    kernels = res.program.kernels
    if kernel is not None:
        kernels = [k for k in kernels if k.name == kernel]
        if not kernels:
            names = ", ".join(k.name for k in res.program.kernels) or "none"
            raise ValueError(f"{source.path} has no kernel `{kernel}` (it defines {names})")
    module = res.parse.module if res.parse is not None else None
    cu_name = cu_name or _default_cu_name(source.path)
    return _lower_kernels(out, kernels, module, cu_name)


def _default_cu_name(path: str) -> str:
    base = path.rsplit("/", 1)[-1]
    return (base[:-5] if base.endswith(".cake") else base) + ".cu"


def _lower_kernels(out: LowerResult, kernels: list, module: Any, cu_name: str) -> LowerResult:
    source = out.source
    codes_: list = []
    for k in kernels:
        spec = get_arch(k.arch)
        if spec is None:
            continue
        try:
            codes_.append(lower_kernel(k, source, module, spec))
        except LowerError as exc:
            out.diagnostics.append(codes.LOWER_UNSUPPORTED.at(
                exc.span, exc.message, notes=[f"kernel `{k.name}` was not lowered"]
            ).with_path(source.path))
        except Exception as exc:  # a bug in the lowering must not take the CLI down
            tb = traceback.extract_tb(exc.__traceback__)
            where = f" ({tb[-1].filename.rsplit('/', 1)[-1]}:{tb[-1].lineno})" if tb else ""
            out.diagnostics.append(codes.INTERNAL_ERROR.at(
                k.name_span, f"lowering `{k.name}` failed: {type(exc).__name__}: {exc}{where}"
            ).with_path(source.path))
    if not codes_:
        return out
    features: set[str] = set()
    shapes: set = set()
    for c in codes_:
        features |= c.ctx.features
        shapes |= c.ctx.wgmma_shapes
    em = Emitter(source.path)
    archs = ", ".join(sorted({c.kernel.arch for c in codes_}))
    em.emit(f"// Generated by `cake lower` from {source.path} ({archs}); do not edit.\n"
            "// #line directives map the code back to the .cake source.", None)
    em.emit(prelude.EMULATE_INCLUDE, None)
    em.emit(prelude.HEADER + "#endif  // CAKE_EMULATE", None)
    em.emit(prelude.render_prelude(features, shapes) + prelude.EMULATE_SITES, None)
    for c in codes_:
        em.blank()
        em.emit(f"// ==== kernel `{c.kernel.name}` " + "=" * 60, None)
        em.emit(f"constexpr uint32_t {c.smem_const} = {c.smem_bytes};  "
                "// dynamic shared memory (the verifier's smem plan)", None)
        em.lines.extend(c.emitter.lines)
    if any(c.ctx.tmaps for c in codes_):
        em.emit("#ifndef CAKE_EMULATE" + host.HOST_HELPERS + "#endif  // CAKE_EMULATE", None)
    if any(SM_COUNT in c.ctx.dims for c in codes_):
        em.emit(host.SM_COUNT_HELPER, None)
    for c in codes_:
        meta = host.metadata(c, cu_name)
        em.blank()
        em.emit(host.launcher(c), None)
        em.emit(host.metadata_symbol(c, meta), None)
        out.kernels.append(LoweredKernel(c.kernel.name, c.entry, c.kernel.arch, meta,
                                         c.smem_bytes))
    out.cu = em.render(cu_name)
    return out


__all__ = ["LowerError", "LowerResult", "LoweredKernel", "lower_checked", "lower_source"]
