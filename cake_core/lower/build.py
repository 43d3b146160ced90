"""`cake compile`: lower each kernel, run nvcc/ptxas, and check the result against the model.

Each kernel is lowered to its own .cu and compiled for its arch.  The ptxas report is
compared with what the compiler predicted before any compile: shared memory exactly (the
verifier's smem plan is the launcher's dynamic size; ptxas must report no static smem on
top), registers against the cost model's range (or, with `regs=` roles, exactly the launch
allocation ptxas settles on: the smaller of the launch bound and the largest `regs=`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cake_core.diagnostics import codes
from cake_core.diagnostics.model import Diagnostic, Severity
from cake_core.hardware import get_arch
from cake_core.ir.kernel import Kernel
from cake_core.lower import LowerResult, lower_checked
from cake_core.lower.kernel import launch_regs
from cake_core.lower.ptxas import FunctionResources, diagnostics, parse_log
from cake_core.lower.toolchain import CompileResult, Toolchain, compile_cu
from cake_core.primitives.registry import Registry
from cake_core.source import SourceFile
from cake_core.verify.register_estimate import role_estimates


@dataclass
class KernelBuild:
    name: str
    arch: str
    cu_name: str
    lowered: LowerResult
    result: CompileResult | None = None
    resources: FunctionResources | None = None
    smem_plan: int = 0
    registers_expected: dict[str, int] = field(default_factory=dict)
    diagnostics: list[Diagnostic] = field(default_factory=list)
    lower_seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.result is not None and self.result.ok

    @property
    def smem_total(self) -> int:
        """What ptxas and the launcher say one block uses: static + dynamic bytes."""
        static = self.resources.smem_static if self.resources is not None else 0
        return static + self.smem_plan

    def as_data(self) -> dict[str, Any]:
        r = self.resources
        return {
            "kernel": self.name, "arch": self.arch, "cu": self.cu_name, "ok": self.ok,
            "cached": self.result.cached if self.result else None,
            "nvcc_seconds": round(self.result.seconds, 4) if self.result else None,
            "lower_seconds": round(self.lower_seconds, 4),
            "registers": r.registers if r else None,
            "registers_expected": dict(self.registers_expected),
            "spill_stores": r.spill_stores if r else None,
            "spill_loads": r.spill_loads if r else None,
            "stack": r.stack if r else None,
            "barriers": r.barriers if r else None,
            "smem_static": r.smem_static if r else None,
            "smem_dynamic": self.smem_plan,
            "smem_plan": self.smem_plan,
            "smem_total": self.smem_total,
            "cache_key": self.result.key if self.result else None,
        }


@dataclass
class BuildReport:
    source: SourceFile
    kernels: list[KernelBuild] = field(default_factory=list)
    diagnostics: list[Diagnostic] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return bool(self.kernels) and all(k.ok for k in self.kernels) and not any(
            d.severity.value == "error" for d in self.diagnostics)


def build_source(source: SourceFile, *, kernel: str | None = None, arch: str | None = None,
                 toolchain: Toolchain | None = None, cache: Path | None = None,
                 use_cache: bool = True, registry: Registry | None = None) -> BuildReport:
    """Check, lower and compile every kernel of `source` (or only `kernel`)."""
    # an upward import the layers contract lists (pyproject.toml): text-in entry point
    from cake_core.check import check_source

    res = check_source(source, arch=arch, registry=registry)
    report = BuildReport(source)
    if res.program is None or any(d.severity.value == "error" for d in res.diagnostics):
        report.diagnostics = list(res.diagnostics)
        return report
    report.diagnostics = [d for d in res.diagnostics]
    names = [k.name for k in res.program.kernels]
    if kernel is not None:
        if kernel not in names:
            raise ValueError(f"{source.path} has no kernel `{kernel}` (it defines "
                             f"{', '.join(names) or 'none'})")
        names = [kernel]
    stem = _stem(source.path)
    for name in names:
        k = next(x for x in res.program.kernels if x.name == name)
        cu_name = f"{stem}.cu" if len(res.program.kernels) == 1 else f"{stem}.{name}.cu"
        t0 = time.perf_counter()
        lowered = lower_checked(res, kernel=name, cu_name=cu_name)
        kb = KernelBuild(name, k.arch, cu_name, lowered, lower_seconds=time.perf_counter() - t0)
        report.kernels.append(kb)
        kb.diagnostics.extend(d for d in lowered.diagnostics if d not in res.diagnostics)
        if lowered.cu is None:
            report.diagnostics.extend(kb.diagnostics)
            continue
        kb.smem_plan = lowered.kernels[0].smem_bytes if lowered.kernels else 0
        kb.result = compile_cu(lowered.cu, k.arch, cu_name=cu_name, toolchain=toolchain,
                               cache=cache, use_cache=use_cache)
        funcs, findings = parse_log(kb.result.log)
        entry = lowered.kernels[0].entry if lowered.kernels else name
        kb.resources = funcs.get(entry)
        kb.diagnostics.extend(diagnostics(findings, funcs, source, k.name_span, cu_name))
        if kb.result.ok and kb.resources is None:
            kb.diagnostics.append(codes.PTXAS_WARNING.at(
                k.name_span, "ptxas printed no resource usage for this kernel"))
        if kb.resources is not None:
            kb.registers_expected = expected_registers(k)
            kb.diagnostics.extend(_compare(k, kb))
        if not kb.result.ok and not any(d.code == codes.CUDA_COMPILE_ERROR.code
                                        for d in kb.diagnostics):
            tail = "\n".join(kb.result.log.strip().splitlines()[-8:])
            kb.diagnostics.append(codes.CUDA_COMPILE_ERROR.at(
                k.name_span, f"nvcc failed (exit status {kb.result.returncode})",
                notes=[tail] if tail else []))
        kb.diagnostics = [d.with_path(source.path) for d in kb.diagnostics]
        report.diagnostics.extend(kb.diagnostics)
    return report


def _stem(path: str) -> str:
    base = path.replace("\\", "/").rsplit("/", 1)[-1]
    return base[:-5] if base.endswith(".cake") else base


def expected_registers(k: Kernel) -> dict[str, int]:
    """The model's register figure for the whole kernel: exact with setmaxnreg, else a range."""
    spec = get_arch(k.arch)
    if spec is None:
        return {}
    exact = launch_regs(k, spec)
    if exact is not None:
        return {"low": exact, "high": exact, "exact": exact}
    ests = role_estimates(k, spec).values()
    return {"low": max(e.low for e in ests), "high": max(e.high for e in ests),
            "estimate": max(e.estimate for e in ests)}


def _compare(k: Kernel, kb: KernelBuild) -> list[Diagnostic]:
    out: list[Diagnostic] = []
    r = kb.resources
    assert r is not None
    if r.smem_static:
        out.append(codes.RESOURCE_MISMATCH.at(
            k.name_span, f"ptxas reports {r.smem_static} B of static shared memory on top of "
            f"the {kb.smem_plan} B plan: one block needs {kb.smem_total} B, not {kb.smem_plan}",
            data=kb.as_data()))
    exp = kb.registers_expected
    if r.registers is not None and exp:
        lo, hi = exp["low"], exp["high"]
        if not lo <= r.registers <= hi:
            want = f"exactly {lo}" if lo == hi else f"{lo}..{hi}"
            # registers are an estimate unless setmaxnreg fixes them: a miss is information
            out.append(codes.RESOURCE_MISMATCH.at(
                k.name_span, f"ptxas allocates {r.registers} registers per thread; the resource "
                f"model predicts {want}", data=kb.as_data(),
                severity=Severity.WARNING if lo == hi else Severity.INFO))
    return out


__all__ = ["BuildReport", "KernelBuild", "build_source", "expected_registers"]
