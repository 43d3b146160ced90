"""The evaluation gates of one candidate, cheapest first (DESIGN §4).

1. static: parse, types, resources, layouts, synchronization (`check_source`); also which
   of the task's GPU shapes the kernel's dim declarations admit;
2. sim: the CPU simulator against the task's numpy reference on at least two of the
   task's small shapes, under a round-robin and an adversarial schedule;
3. cost: the analytical cost model on every admitted GPU shape;
4. ptxas: lowering to CUDA and compiling with nvcc/ptxas, when both are present;
5. emulate: the lowered CUDA compiled with the host C++ compiler and run on the CPU against
   the reference (docs/emulation.md), by default only where there is no GPU to run it;
6. gpu: the GPU runner, when present.

A gate whose component is missing from this installation is recorded as
"skipped: not available" and the candidate goes on.  A gate that fails stops the chain.

This runs inside executor workers, so a job is a plain dict and so is its result; the
task module is imported by path in the worker (tasks are trusted files written by
people; the kernel text is only ever parsed, checked and simulated).
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

GATES = ("static", "sim", "cost", "ptxas", "emulate", "gpu")
MIN_SIM_SHAPES = 2
NOT_AVAILABLE = "skipped: not available"
MAX_FINDINGS = 12

Report = Callable[[str], None]
_TASKS: dict[str, Any] = {}


def _task(path: str) -> Any:
    if path not in _TASKS:
        from cake_core.tasks import load_task

        _TASKS[path] = load_task(path)
    return _TASKS[path]


def _finding(d: Any, source: Any) -> dict[str, Any]:
    line = d.span.start.line
    return {"code": d.code, "severity": d.severity.value, "message": d.message,
            "line": line, "col": d.span.start.col_utf16,
            "line_text": source.line_text(line) if source else ""}


def evaluate_job(job: dict[str, Any], report: Report | None = None) -> dict[str, Any]:
    """Run the gates on one candidate; never raises (a fault is a failed gate)."""
    out: dict[str, Any] = {"hash": job["hash"], "status": "pass", "failed_gate": None,
                           "gates": {}, "times": {}, "floors": {}, "bottlenecks": {},
                           "admitted": []}
    state: dict[str, Any] = {}
    for gate in job.get("gates", GATES):
        if report is not None:
            report(gate)
        t0 = time.perf_counter()
        try:
            status, detail, findings = _GATE_FUNCS[gate](job, state, out)
        except Exception as exc:  # a fault in a component fails the gate, never the run
            status, detail, findings = "fail", {"error": f"{type(exc).__name__}: {exc}"}, []
            findings = [{"code": "CK901", "severity": "error", "line": 0, "col": 0,
                         "message": f"internal fault in the {gate} gate: "
                                    f"{type(exc).__name__}: {exc}", "line_text": ""}]
        out["gates"][gate] = {"status": status, "seconds": time.perf_counter() - t0,
                              "detail": detail, "findings": findings[:MAX_FINDINGS]}
        if status == "fail":
            out["status"], out["failed_gate"] = "fail", gate
            break
    return out


# --- static --------------------------------------------------------------------------------
def _static(job: dict[str, Any], state: dict[str, Any], out: dict[str, Any]
            ) -> tuple[str, dict[str, Any], list[dict[str, Any]]]:
    from cake_core.check import check_source
    from cake_core.sim.program import SimKernel, SimSetupError
    from cake_core.source import SourceFile

    source = SourceFile(job["text"], job.get("path", "candidate.cake"))
    res = check_source(source)
    state["source"] = source
    errors = res.errors
    if errors or res.program is None:
        return "fail", {"errors": len(errors)}, [_finding(d, source) for d in errors]
    kernels = res.program.kernels
    name = job.get("kernel")
    kernel = next((k for k in kernels if k.name == name), None) if name else None
    if kernel is None and len(kernels) == 1:
        kernel = kernels[0]
    if kernel is None:
        names = ", ".join(k.name for k in kernels) or "none"
        return "fail", {}, [{"code": "E-KERNEL", "severity": "error", "line": 0, "col": 0,
                             "message": f"the file must define the kernel `{name}` "
                                        f"(it defines {names})", "line_text": ""}]
    arch = job.get("arch")
    if arch and kernel.arch != arch:
        return "fail", {}, [{"code": "E-ARCH", "severity": "error", "col": 0,
                             "line": kernel.name_span.start.line,
                             "line_text": source.line_text(kernel.name_span.start.line),
                             "message": f"the kernel targets {kernel.arch}; this task's kernel "
                                        f"targets {arch}"}]
    module = res.parse.module if res.parse is not None else None
    sk = SimKernel.prepare(kernel, source, module)
    state["kernel"], state["sim_kernel"] = kernel, sk
    from cake_core.sim.engine import launch_dims

    admitted, refused = [], {}
    for shape in job["shapes"]:
        try:
            launch_dims(sk, shape["dims"])
            admitted.append(shape["key"])
        except SimSetupError as exc:
            refused[shape["key"]] = str(exc)
    out["admitted"] = admitted
    required = job.get("require_shapes")
    missing = [k for k in (required or []) if k not in admitted]
    warnings = [d for d in res.diagnostics if d.severity.value == "warning"]
    detail = {"warnings": len(warnings), "admitted": admitted, "refused": refused}
    if missing or not admitted:
        why = "; ".join(f"{k}: {refused.get(k, 'not admitted')}" for k in (missing or
                                                                          list(refused)))
        return "fail", detail, [{"code": "E-SHAPES", "severity": "error", "line": 0,
                                 "col": 0, "message": "the kernel's dim declarations exclude "
                                 f"task shapes ({why})", "line_text": ""}]
    return "pass", detail, [_finding(d, source) for d in warnings]


# --- simulation ------------------------------------------------------------------------------
def _sim(job: dict[str, Any], state: dict[str, Any], out: dict[str, Any]
         ) -> tuple[str, dict[str, Any], list[dict[str, Any]]]:
    from cake_core.sim.engine import launch_dims
    from cake_core.sim.program import SimSetupError
    from cake_core.sim.tasks_run import run_task

    task = _task(job["task_path"])
    sk = state["sim_kernel"]
    entry = task.kernels[job["entry"]] if job.get("entry") is not None else \
        task.entry(sk.name)
    shapes = []
    for s in task.shapes_for(entry, sim=True):
        try:
            launch_dims(sk, dict(s.dims))
            shapes.append(dict(s.dims))
        except SimSetupError:
            continue
    state["sim_shapes"] = shapes
    need = min(MIN_SIM_SHAPES, len(task.shapes_for(entry, sim=True)))
    if len(shapes) < need:
        return "fail", {"shapes": len(shapes)}, [{
            "code": "E-SIMSHAPES", "severity": "error", "line": 0, "col": 0, "line_text": "",
            "message": f"the kernel admits {len(shapes)} of the task's simulator shapes; "
                       f"at least {need} must run"}]
    sim = job.get("sim", {})
    try:
        rep = run_task(task, sk, shapes=shapes, n_schedules=int(sim.get("schedules", 2)),
                       seed=int(sim.get("seed", 0)), entry=entry)
    except SimSetupError as exc:
        return "fail", {"error": str(exc)}, [{"code": "E-SIMSETUP", "severity": "error",
                                               "line": 0, "col": 0, "message": str(exc),
                                               "line_text": ""}]
    source = state["source"]
    errors = [d for d in rep.diagnostics if d.severity.value == "error"]
    detail = {"shapes": [{"dims": s.dims_text, "passed": s.passed, "error": s.error,
                          "max_abs": s.max_abs, "max_rel": s.max_rel} for s in rep.shapes]}
    findings = [_finding(d, source) for d in errors]
    for s in rep.shapes:
        if s.error:
            findings.append({"code": "E-SIMSETUP", "severity": "error", "line": 0, "col": 0,
                             "message": f"{s.dims_text}: {s.error}", "line_text": ""})
    return ("pass" if rep.passed else "fail"), detail, findings


# --- cost model ------------------------------------------------------------------------------
def _cost(job: dict[str, Any], state: dict[str, Any], out: dict[str, Any]
          ) -> tuple[str, dict[str, Any], list[dict[str, Any]]]:
    try:
        from cake_core.cost.model import predict
    except ImportError:
        return NOT_AVAILABLE, {}, []
    kernel = state["kernel"]
    per: dict[str, Any] = {}
    refused: dict[str, str] = {}
    for shape in job["shapes"]:
        if shape["key"] not in out["admitted"]:
            continue
        try:
            p = predict(kernel, shape["dims"])
        except Exception as exc:  # CostError and friends: this shape cannot be priced
            refused[shape["key"]] = f"{type(exc).__name__}: {exc}"
            continue
        out["times"][shape["key"]] = p.seconds
        out["floors"][shape["key"]] = p.roofline_seconds
        out["bottlenecks"][shape["key"]] = p.bottleneck
        per[shape["key"]] = {"seconds": p.seconds, "roofline_s": p.roofline_seconds,
                             "bottleneck": p.bottleneck, "detail": p.bottleneck_detail,
                             "categories": dict(p.categories),
                             "lines": [{"line": ln.line, "share": round(ln.share, 4),
                                        "category": ln.category}
                                       for ln in sorted(p.lines, key=lambda x: -x.share)[:5]]}
    for key in refused:
        if key in out["admitted"]:
            out["admitted"].remove(key)
    required = job.get("require_shapes") or []
    missing = [k for k in required if k not in out["times"]]
    if missing or not out["times"]:
        return "fail", {"shapes": per, "refused": refused}, [{
            "code": "E-COST", "severity": "error", "line": 0, "col": 0, "line_text": "",
            "message": "the cost model cannot price "
                       + "; ".join(f"{k} ({refused.get(k, '?')})" for k in missing or refused)}]
    return "pass", {"shapes": per, "refused": refused}, []


# --- compiler and GPU (optional components) ----------------------------------------------
def _ptxas(job: dict[str, Any], state: dict[str, Any], out: dict[str, Any]
           ) -> tuple[str, dict[str, Any], list[dict[str, Any]]]:
    """Lower to CUDA and compile with nvcc/ptxas (`cake compile`), when nvcc is here.

    ptxas findings that are warnings (serialized wgmma, a register count the model did
    not predict) are recorded but do not fail the candidate; errors do, and so do spills
    (CK603): a kept kernel compiles without local-memory traffic, since its predicted
    time prices the schedule as written and a spilling kernel runs another one.  A
    construct the lowering does not handle yet (CK601) is the lowering's gap, not the
    candidate's fault: the gate is skipped with that reason.
    """
    try:
        from cake_core.lower.build import build_source
        from cake_core.lower.toolchain import find_toolchain
    except ImportError:
        return NOT_AVAILABLE, {}, []
    tc = find_toolchain()
    if tc is None or tc.ptxas is None:
        return NOT_AVAILABLE, {}, []
    source = state["source"]
    rep = build_source(source, kernel=state["kernel"].name, toolchain=tc)
    unsupported = [d for d in rep.diagnostics if d.code == "CK601"]
    if unsupported:
        return (f"skipped: the lowering does not handle this kernel yet "
                f"({unsupported[0].message})"), {}, [_finding(d, source) for d in unsupported]
    kb = rep.kernels[0] if rep.kernels else None
    detail = kb.as_data() if kb is not None else {}
    out["ptxas"] = {k: detail.get(k) for k in ("registers", "spill_stores", "spill_loads",
                                                "smem_total")}
    errors = [d for d in rep.diagnostics if d.severity.value == "error"]
    if errors or kb is None or not kb.ok:
        return "fail", detail, [_finding(d, source) for d in errors] or [{
            "code": "CK602", "severity": "error", "line": 0, "col": 0, "line_text": "",
            "message": "nvcc/ptxas did not produce a cubin"}]
    warnings = [d for d in rep.diagnostics if d.severity.value == "warning"]
    spills = [d for d in warnings if d.code == "CK603"]
    if spills or detail.get("spill_stores") or detail.get("spill_loads"):
        return "fail", detail, [_finding(d, source) for d in spills or warnings] or [{
            "code": "CK603", "severity": "error", "line": 0, "col": 0, "line_text": "",
            "message": "ptxas spilled registers to local memory"}]
    return "pass", detail, [_finding(d, source) for d in warnings]


def _gpu(job: dict[str, Any], state: dict[str, Any], out: dict[str, Any]
         ) -> tuple[str, dict[str, Any], list[dict[str, Any]]]:
    """The GPU runner (`cake bench`'s contract) on the target shapes, when a GPU is here.

    Only the seed and candidates whose predicted score beats the best so far go to the
    GPU: the runner computes the task's numpy reference for every shape, which takes
    minutes of CPU on headline shapes, and a winner is what must be re-verified on real
    hardware before it is reported.
    """
    try:
        from cake_core.run.device import probe_gpu
        from cake_core.run.protocol import TimingConfig
        from cake_core.run.runner import BenchOptions, BenchSetupError, NoGpuError, bench
        from cake_core.tasks import Shape
    except ImportError:
        return NOT_AVAILABLE, {}, []
    g = dict(job.get("gpu") or {})
    backend = str(g.get("backend", "auto"))
    if backend == "auto":
        probe = probe_gpu()
        if not probe.present:
            return NOT_AVAILABLE, {"reason": probe.reason}, []
    if not _beats(job, out, g.get("better_than")):
        return NOT_BETTER, {}, []
    task = _task(job["task_path"])
    shapes = [Shape(dict(d)) for d in g["shapes"]] if g.get("shapes") else [
        Shape(dict(s["dims"])) for s in job["shapes"] if s["key"] in out["admitted"]]
    timing = g.get("timing", {})
    opts = BenchOptions(shapes=shapes, seeds=(0,), backend=backend,
                        timing=TimingConfig(int(timing.get("warmup", 3)),
                                            int(timing.get("rounds", 3)),
                                            int(timing.get("calls", 5)), True),
                        timeout=float(g.get("timeout_s", 120.0)))
    with tempfile.TemporaryDirectory(prefix="cake-evolve-gpu-") as tmp:
        path = Path(tmp) / f"{job['hash']}.cake"
        path.write_text(job["text"], encoding="utf-8")
        try:
            outcome = bench(path, state["kernel"].name, task, opts)
        except NoGpuError as exc:
            return NOT_AVAILABLE, {"reason": str(exc)}, []
        except BenchSetupError as exc:
            findings = [_finding(d, state["source"]) for d in exc.diagnostics
                        if d.severity.value == "error"]
            return "fail", {"error": str(exc)}, findings or [{
                "code": "E-GPU", "severity": "error", "line": 0, "col": 0, "line_text": "",
                "message": str(exc)}]
    from cake_agents.scoring import dims_key

    measured, base = {}, {}
    for r in outcome.report.shapes:
        if r.candidate_ms is not None:
            measured[dims_key(r.dims)] = r.candidate_ms / 1e3
        if r.baseline_ms is not None:
            base[dims_key(r.dims)] = r.baseline_ms / 1e3
    out["measured"], out["measured_baseline"] = measured, base
    detail = {"device": outcome.report.device, "backend": outcome.report.backend,
              "shapes": [{"dims": dims_key(r.dims), "status": r.status, "correct": r.correct,
                          "ms": r.candidate_ms, "baseline_ms": r.baseline_ms,
                          "flags": list(r.flags)} for r in outcome.report.shapes]}
    errors = [d for d in outcome.diagnostics if d.severity.value == "error"]
    findings = [_finding(d, state["source"]) for d in errors]
    for r in outcome.report.shapes:
        if not r.correct:
            findings.append({"code": "E-GPU", "severity": "error", "line": 0, "col": 0,
                             "line_text": "", "message": f"{dims_key(r.dims)}: {r.status}"
                             + (f" ({r.error})" if r.error else "")})
    return ("pass" if outcome.passed else "fail"), detail, findings


NOT_BETTER = "skipped: not better than the best so far"


def _beats(job: dict[str, Any], out: dict[str, Any], bar: Any) -> bool:
    """Whether the predicted score beats `bar` (None: there is no bar to beat).

    The expensive gates run only for such candidates: they are the ones the search keeps.
    """
    if bar is None:
        return True
    from cake_agents.scoring import score

    sc = job.get("score") or {}
    mine = score(out["times"], sc.get("baseline", {}), sc.get("floors", {}),
                 [_Spec(k, w) for k, w in sc.get("shapes", [])])
    return mine is not None and mine > float(bar)


# --- CPU emulation of the lowered CUDA -----------------------------------------------------
@dataclass(frozen=True)
class EmulateAvailability:
    """Whether the emulate gate runs on this machine, and why not when it does not."""

    on: bool
    reason: str = ""
    notable: bool = False
    """The gate was wanted here but cannot run (the runtime or the compiler is missing):
    worth telling the user once, unlike a gate left off because a GPU will run the CUDA."""


def emulate_availability(mode: str = "auto") -> EmulateAvailability:
    """`auto`: on where there is no GPU and there is a host C++ compiler; `on`: wherever a
    compiler is; `off`: never.  The CPU runtime must be installed either way."""
    if mode == "off":
        return EmulateAvailability(False, "turned off (--no-emulate)")
    try:
        from cake_core.emulate.build import (
            NoHostCompilerError,
            find_host_compiler,
            runtime_missing,
        )
        from cake_core.run.device import probe_gpu
    except ImportError as exc:
        return EmulateAvailability(False, f"not available: {exc}")
    try:
        compiler = find_host_compiler()
    except NoHostCompilerError as exc:
        return EmulateAvailability(False, str(exc), notable=mode == "on")
    if mode == "auto":
        probe = probe_gpu()
        if probe.present:
            return EmulateAvailability(False, f"a GPU is present ({probe.name}): the gpu gate "
                                              "runs the CUDA there")
    missing = runtime_missing()
    if missing is not None:
        return EmulateAvailability(False, missing, notable=True)
    return EmulateAvailability(True, compiler.label)


_EMULATE: dict[str, EmulateAvailability] = {}


def _emulate(job: dict[str, Any], state: dict[str, Any], out: dict[str, Any]
             ) -> tuple[str, dict[str, Any], list[dict[str, Any]]]:
    """The lowered kernel on the CPU (`cake run --emulate`) on two of the task's small
    shapes, for candidates that beat the best so far: seconds each, so not for all."""
    e = dict(job.get("emulate") or {})
    mode = str(e.get("mode", "auto"))
    if mode not in _EMULATE:  # once per worker: the machine does not change under a run
        _EMULATE[mode] = emulate_availability(mode)
    avail = _EMULATE[mode]
    if not avail.on:
        return NOT_AVAILABLE, {"reason": avail.reason}, []
    if not _beats(job, out, e.get("better_than")):
        return NOT_BETTER, {}, []
    from cake_core.run.protocol import TimingConfig
    from cake_core.run.runner import EMULATE, BenchOptions, BenchSetupError, bench
    from cake_core.tasks import Shape

    task = _task(job["task_path"])
    seed = int(e.get("seed", 0))
    shapes = [Shape(dict(d)) for d in (state.get("sim_shapes") or [])[:MIN_SIM_SHAPES]]
    opts = BenchOptions(shapes=shapes or None, seeds=(seed,), backend=EMULATE, baseline=False,
                        timing=TimingConfig(enabled=False), emulate_seed=seed,
                        emulate_timeout=float(e.get("timeout_s", 60.0)))
    source = state["source"]
    with tempfile.TemporaryDirectory(prefix="cake-evolve-emu-") as tmp:
        path = Path(tmp) / f"{job['hash']}.cake"
        path.write_text(job["text"], encoding="utf-8")
        try:
            outcome = bench(path, state["kernel"].name, task, opts)
        except BenchSetupError as exc:
            unsupported = [d for d in exc.diagnostics if d.code == "CK601"]
            if unsupported:
                return (f"skipped: the lowering does not handle this kernel yet "
                        f"({unsupported[0].message})"), {}, []
            if exc.exit == 2:  # the machine, not the kernel
                return NOT_AVAILABLE, {"reason": str(exc)}, []
            findings = [_finding(d, source) for d in exc.diagnostics
                        if d.severity.value == "error"]
            return "fail", {"error": str(exc)}, findings or [{
                "code": "E-EMULATE", "severity": "error", "line": 0, "col": 0,
                "line_text": "", "message": str(exc)}]
    detail = {"device": outcome.report.device, "seconds": round(outcome.elapsed_s, 2),
              "shapes": [{"dims": r.dims_text, "status": r.status, "correct": r.correct,
                          "max_abs": r.max_abs, "max_rel": r.max_rel}
                         for r in outcome.report.shapes]}
    findings = [_finding(d, source) for d in outcome.diagnostics
                if d.severity.value == "error"]
    for r in outcome.report.shapes:
        if not r.correct and not r.findings:
            findings.append({"code": "E-EMULATE", "severity": "error", "line": 0, "col": 0,
                             "line_text": "", "message": f"{r.dims_text}: {r.status}"
                             + (f" ({r.error})" if r.error else "")})
    return ("pass" if outcome.passed else "fail"), detail, findings


class _Spec:
    """The two fields of a ShapeSpec that scoring needs (jobs carry plain data)."""

    def __init__(self, key: str, weight: float) -> None:
        self.key, self.weight = key, weight


def _cuda_compile(job: dict[str, Any], state: dict[str, Any], out: dict[str, Any]
                  ) -> tuple[str, dict[str, Any], list[dict[str, Any]]]:
    from cake_agents.cuda_arm import compile_gate

    return compile_gate(job, state, out)


def _cuda_gpu(job: dict[str, Any], state: dict[str, Any], out: dict[str, Any]
              ) -> tuple[str, dict[str, Any], list[dict[str, Any]]]:
    from cake_agents.cuda_arm import gpu_gate

    return gpu_gate(job, state, out)


_GATE_FUNCS = {"static": _static, "sim": _sim, "cost": _cost, "ptxas": _ptxas,
               "emulate": _emulate, "gpu": _gpu,
               "cuda-compile": _cuda_compile, "cuda-gpu": _cuda_gpu}
