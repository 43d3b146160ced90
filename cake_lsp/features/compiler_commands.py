"""Runners of the compiler commands: `cake.lower`, `cake.cost`, `cake.simulate`.

Each takes `{uri, kernel?, ...}` for an open document, does its (CPU-heavy) work on the
checker's thread, and answers with JSON plus a `markdown` (or `cuda`) rendering a client
can show as is.  A document that does not check answers with its diagnostics, not an
error: the editor shows why nothing was lowered or simulated.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pygls.exceptions import JsonRpcInvalidParams

from cake_core.diagnostics.json_format import to_json_obj

if TYPE_CHECKING:
    from cake_core.check import CheckResult
    from cake_lsp.server import CakeLanguageServer

#: Size given to every dim a cost prediction needs when the request names none.
DEFAULT_DIM = 4096


def _spec(args: list[Any], command: str) -> dict[str, Any]:
    spec = args[0] if args and isinstance(args[0], dict) else None
    if spec is None or not isinstance(spec.get("uri"), str):
        raise JsonRpcInvalidParams(f'{command} takes {{"uri": ..., "kernel": ...}}')
    return spec


def _dims(spec: dict[str, Any], command: str) -> dict[str, int]:
    dims = spec.get("dims") or {}
    if isinstance(dims, str):  # "M=4096,N=4096"
        try:
            dims = dict((k.strip(), int(v)) for k, v in
                        (part.split("=") for part in dims.split(",") if part.strip()))
        except ValueError:
            raise JsonRpcInvalidParams(f"{command}: dims are NAME=INT,...") from None
    if not isinstance(dims, dict) or not all(isinstance(v, int) and v > 0
                                             for v in dims.values()):
        raise JsonRpcInvalidParams(f"{command}: dims map names to positive ints")
    return dims


async def _off_loop(ls: CakeLanguageServer, fn: Callable[[], Any]) -> Any:
    return await asyncio.get_running_loop().run_in_executor(ls.checker.executor, fn)


def _not_checked(result: CheckResult) -> dict[str, Any] | None:
    if not result.has_program or result.errors:
        return {"ok": False, "diagnostics": to_json_obj(result.diagnostics,
                                                        {result.source.path: result.source}),
                "markdown": "The document has errors; fix them first."}
    return None


async def run_lower(ls: CakeLanguageServer, args: list[Any]) -> dict[str, Any]:
    """`cake.lower {uri, kernel?}`: the CUDA C++ of the document (with #line directives)."""
    spec = _spec(args, "cake.lower")
    _, result = await ls.current(spec["uri"])

    def work() -> dict[str, Any]:
        from cake_core.lower import lower_source

        lowered = lower_source(result.source, kernel=spec.get("kernel"),
                               arch=ls.check_options().arch)
        return {"ok": lowered.ok, "cuda": lowered.cu, "meta": lowered.meta,
                "diagnostics": to_json_obj(lowered.diagnostics + lowered.check_diagnostics,
                                           {result.source.path: result.source})}

    return await _off_loop(ls, work)


async def run_cost(ls: CakeLanguageServer, args: list[Any]) -> dict[str, Any]:
    """`cake.cost {uri, kernel?, dims?, gpu?}`: predicted time, bottleneck and per-line share."""
    spec = _spec(args, "cake.cost")
    dims = _dims(spec, "cake.cost")
    _, result = await ls.current(spec["uri"])
    problem = _not_checked(result)
    if problem is not None:
        return problem

    def work() -> dict[str, Any]:
        from cake_core.cost.model import CostError, predict, required_dims
        from cake_core.cost.render import render_predictions
        from cake_core.hardware import get_gpu

        gpu = get_gpu(spec["gpu"]) if isinstance(spec.get("gpu"), str) else None
        preds, problems = [], []
        for k in result.program.kernels:  # type: ignore[union-attr]
            if spec.get("kernel") not in (None, k.name):
                continue
            env = {d: dims.get(d, DEFAULT_DIM) for d in required_dims(k)}
            try:
                preds.append(predict(k, env, gpu))
            except CostError as exc:
                problems.append(f"{k.name}: {exc}")
        text = render_predictions(preds, result.source) if preds else ""
        return {"ok": not problems, "predictions": [p.to_json() for p in preds],
                "problems": problems,
                "markdown": f"```text\n{text}\n```" + "".join(f"\n- {p}" for p in problems)}

    return await _off_loop(ls, work)


async def run_simulate(ls: CakeLanguageServer, args: list[Any]) -> dict[str, Any]:
    """`cake.simulate {uri, kernel?, dims?, seed?}`: run the kernel on random inputs on the
    CPU and report the dynamic findings (races, deadlocks, out-of-bounds, ...)."""
    spec = _spec(args, "cake.simulate")
    dims = _dims(spec, "cake.simulate")
    _, result = await ls.current(spec["uri"])
    problem = _not_checked(result)
    if problem is not None:
        return problem

    def work() -> dict[str, Any]:
        from cake_core.sim import SimKernel, SimSetupError, simulate
        from cake_core.sim.inputs import default_dims, random_inputs

        try:
            sk = SimKernel.from_text(result.source.text, result.source.path,
                                     spec.get("kernel"))
            env = {**default_dims(sk), **dims}
            sim = simulate(sk, env, random_inputs(sk, env, int(spec.get("seed") or 0)))
        except SimSetupError as exc:
            return {"ok": False, "problems": [str(exc)], "markdown": str(exc)}
        findings = to_json_obj(sim.diagnostics, {result.source.path: result.source})
        n = len(sim.diagnostics)
        dims_text = ", ".join(f"{k}={v}" for k, v in env.items())
        return {"ok": n == 0, "dims": env, "diagnostics": findings,
                "markdown": f"Simulated `{sk.kernel.name}` at {dims_text}: "
                            + ("no findings." if n == 0 else f"{n} finding(s).")}

    return await _off_loop(ls, work)
