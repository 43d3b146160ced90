"""nvMatmulHeuristics runtime estimates for GEMM configurations, run in a child process.

Reads a JSON request on stdin, writes a JSON answer on stdout and leaves with os._exit:
the library's handle cleanup crashes the interpreter at exit, and a child process keeps
that away from the benchmark.  Request:
    {"gpu": "H200_SXM", "precision": "TST", "layout": "NT_ROW_MAJOR",
     "queries": [{"shape": [M, N, K], "cta": [BM, BN, BK], "stages": S}, ...]}
Answer: {"ok": true, "version": "...", "results": [{"runtime_s": t, "relative_s": t}, ...]}
or {"ok": false, "error": "..."}; a runtime of 0 means the library does not model that
configuration.
"""

from __future__ import annotations

import ctypes
import json
import os
import sys


def main() -> None:
    req = json.loads(sys.stdin.read())
    try:
        import nvMatmulHeuristics as nvmmh
    except ImportError as exc:
        print(json.dumps({"ok": False, "error": f"nvidia-matmul-heuristics: {exc}"}))
        return
    try:
        lib = nvmmh.NvMatmulHeuristicsInterface(nvmmh.NvMatmulHeuristicsTarget.CUTLASS3,
                                                precision=req["precision"])
        hw = lib.createHardwareDescriptor()
        lib.setHardwarePredefinedGpu(hw, nvmmh.NvMatmulHeuristicsNvidiaGpu[req["gpu"]])
        layout = nvmmh.NvMatmulHeuristicsMatmulLayout[req["layout"]]
        lib.loadInternalDiscoverySet(layout, hw)
        backend = lib.createBackend(nvmmh.NvMatmulHeuristicsTarget.CUTLASS3)
        target = ctypes.c_int(int(nvmmh.NvMatmulHeuristicsTarget.CUTLASS3))
        prec = req["precision"].encode("ascii")
        relative = ctypes.c_int(int(nvmmh.NvMatmulHeuristicsSiliconMetric.RUNTIME_RELATIVE_FAST_S))
        results = []
        for q in req["queries"]:
            problem = lib.makeNvMatmulHeuristicsProblem(*q["shape"], layout)
            cfg = lib.nvmmhKernelConfiguration()
            bm, bn, bk = q["cta"]
            for i, (c, w, ins) in enumerate(zip((bm, bn, bk), (64, bn, bk), (64, bn, 16),
                                                strict=True)):
                cfg.cta[i], cfg.warp[i], cfg.instr[i] = c, w, ins
            cfg.splitK, cfg.loadStages, cfg.gridSwizzle = 1, q["stages"], 1
            cfg.ctaOrder = 1  # tiles of M along grid.x, as the CAKE kernel launches them
            cfg.cluster[0], cfg.cluster[1] = 1, 1
            t = lib.nvMatmulHeuristicsEstimateRuntime(lib.handle, prec, target,
                                                      ctypes.byref(problem), ctypes.byref(cfg),
                                                      hw)
            r = lib.nvMatmulHeuristicsEstimateSiliconMetricEx(
                lib.handle, prec, backend, ctypes.byref(problem), ctypes.byref(cfg), relative,
                hw)
            results.append({"runtime_s": float(t), "relative_s": float(r)})
        from importlib.metadata import version

        print(json.dumps({"ok": True, "version": version("nvidia-matmul-heuristics"),
                          "results": results}))
    except (OSError, KeyError, RuntimeError, AttributeError) as exc:
        print(json.dumps({"ok": False, "error": f"{type(exc).__name__}: {exc}"}))


if __name__ == "__main__":
    main()
    sys.stdout.flush()
    os._exit(0)
