"""Cost model benchmark: prediction latency, and rank agreement with nvMatmulHeuristics.

1. Prediction time per kernel (profile + estimate, the part `cake cost` adds to a check),
   p50/p95 over the examples and the GEMM template.  Target: < 5 ms per kernel.
2. Structural rewrites priced before and after (the relations the tactics report): a
   serialized raw-mbarrier loop against its warp-specialised form, a one-block-per-tile
   GEMM against its persistent form.  The kernels are the cost tests' (tests/cost/data).
3. The GEMM tile sweep (bench/gemm_variants.py, >= 30 configurations of the sm_90a
   template) on several shapes, predicted by CAKE and by NVIDIA's nvMatmulHeuristics
   (`pip install nvidia-matmul-heuristics`; CPU only) for an H200, compared by Kendall's
   tau per shape and pooled.  Configurations the library does not model are listed, not
   compared.  Without the package the comparison is skipped with a message.

Prints tables and writes bench/results/cost_bench.json.

    python bench/cost_bench.py [--repeat 30]
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _kernels import ROOT
from gemm_variants import TEMPLATE, sweep

from cake_core.check import check_text
from cake_core.cost.model import estimate, profile, required_dims
from cake_core.cost.rank import kendall_tau
from cake_core.hardware import get_gpu
from cake_core.ir.kernel import Kernel

GPU = "H200-SXM"
NVMMH_GPU = "H200_SXM"
#: Dims for the examples; a dim not listed gets its declared max or 4096.
EXAMPLE_DIMS = {"M": 4096, "N": 4096, "K": 4096, "B": 32}
SPECIAL = {"tinygemm_sm90.cake": {"M": 16}, "kmeans_assign_sm90.cake": {"N": 65536,
                                                                          "K": 1024}}
SHAPES = [(4096, 4096, 4096), (8192, 8192, 2048), (256, 8192, 8192)]
STRUCT = ROOT / "tests" / "cost" / "data"
#: (label, before, after, GPU, shapes); a kernel is a path, or (path, text replacements).
STRUCTURE_PAIRS: list[tuple[str, object, object, str | None, list[tuple[int, int, int]]]] = [
    *[(f"warp-specialize, {n} stages", STRUCT / "gemm_mbarrier_sm90.cake",
       (STRUCT / "gemm_ws_sm90.cake", {"STAGES = 2 ": f"STAGES = {n} "}), gpu,
       [(4096, 4096, 4096)]) for n in (2, 3, 4) for gpu in ("H100-SXM", GPU)],
    ("warp-specialize (one-role ring)", STRUCT / "gemm_one_role_sm90.cake",
     STRUCT / "gemm_ws_sm90.cake", GPU, [(4096, 4096, 4096)]),
    ("persistent-tiles", ROOT / "examples" / "gemm_sm90.cake",
     STRUCT / "gemm_persistent_sm90.cake", GPU,
     [(2048, 2048, 4096), (4096, 4096, 4096), (8192, 8192, 8192), (16384, 16384, 1024)]),
    ("persistent-tiles (sm_80)", ROOT / "examples" / "gemm_sm80.cake",
     STRUCT / "gemm_persistent_sm80.cake", None, [(4096, 4096, 4096)]),
]


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, round(q * (len(xs) - 1)))]


def dims_for(kernel: Kernel, name: str) -> dict[str, int]:
    out = {}
    for d in required_dims(kernel):
        dim = kernel.dims.get(d)
        default = EXAMPLE_DIMS.get(d, 4096)
        if dim is not None and dim.max is not None:
            default = min(default, dim.max)
        out[d] = SPECIAL.get(name, {}).get(d, default)
    return out


def latency_rows(repeat: int) -> list[dict[str, object]]:
    files = [*sorted((ROOT / "examples").glob("*.cake")), TEMPLATE]
    rows = []
    gpu = get_gpu(GPU)
    for f in files:
        res = check_text(f.read_text(encoding="utf-8"), f.name)
        if res.errors or res.program is None:
            rows.append({"file": f.name, "error": "does not check clean"})
            continue
        for k in res.program.kernels:
            dims = dims_for(k, f.name)
            g = gpu if k.arch == "sm_90a" else None
            times = []
            pred = None
            gc.collect()
            gc.disable()  # a collection in the middle of one prediction is not its cost
            try:
                for _ in range(repeat):
                    t0 = time.perf_counter()
                    pred = estimate(profile(k, dims, g))
                    times.append((time.perf_counter() - t0) * 1e3)
            finally:
                gc.enable()
            assert pred is not None
            rows.append({"file": f.name, "kernel": k.name, "gpu": pred.gpu, "dims": dims,
                         "predict_p50_ms": statistics.median(times),
                         "predict_p95_ms": pct(times, 0.95),
                         "predicted_us": pred.seconds * 1e6, "bottleneck": pred.bottleneck})
    return rows


def nvmmh(queries: list[dict[str, object]]) -> dict[str, object]:
    req = {"gpu": NVMMH_GPU, "precision": "TST", "layout": "NT_ROW_MAJOR", "queries": queries}
    try:
        proc = subprocess.run([sys.executable, str(Path(__file__).parent / "_nvmmh.py")],
                              input=json.dumps(req), capture_output=True, text=True,
                              timeout=300, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if not lines:
        return {"ok": False, "error": (proc.stderr.strip().splitlines() or ["no output"])[-1]}
    return json.loads(lines[-1])


def comparison() -> dict[str, object]:
    variants = sweep()
    gpu = get_gpu(GPU)
    kernels = {}
    for v in variants:
        res = check_text(v.text(), v.name + ".cake")
        assert not res.errors and res.program is not None, v.name
        kernels[v.name] = res.program.kernels[0]
    rows: list[dict[str, object]] = []
    queries = []
    for shape in SHAPES:
        for v in variants:
            p = estimate(profile(kernels[v.name], dict(zip("MNK", shape, strict=True)), gpu))
            rows.append({"shape": list(shape), "config": v.name, "bm": v.bm, "bn": v.bn,
                         "bk": v.bk, "stages": v.stages, "cake_us": p.seconds * 1e6,
                         "cake_bottleneck": p.bottleneck, "blocks_per_sm": p.blocks_per_sm})
            queries.append({"shape": list(shape), "cta": [v.bm, v.bn, v.bk],
                            "stages": v.stages})
    answer = nvmmh(queries)
    out: dict[str, object] = {"gpu": GPU, "configs": len(variants), "shapes": SHAPES,
                              "rows": rows}
    if not answer.get("ok"):
        out["skipped"] = (f"nvMatmulHeuristics unavailable ({answer.get('error')}); install "
                          "it with `pip install nvidia-matmul-heuristics`")
        return out
    out["nvmmh_version"] = answer["version"]
    for row, r in zip(rows, answer["results"], strict=True):  # type: ignore[arg-type]
        row["nvmmh_us"] = r["runtime_s"] * 1e6 if r["runtime_s"] > 0 else None
        row["nvmmh_relative_us"] = r["relative_s"] * 1e6 if r["relative_s"] > 0 else None
    taus = {}
    for shape in SHAPES:
        sel = [r for r in rows if r["shape"] == list(shape) and r["nvmmh_us"] is not None]
        cake = [float(r["cake_us"]) for r in sel]  # type: ignore[arg-type]
        taus[f"{shape[0]}x{shape[1]}x{shape[2]}"] = {
            "n": len(sel),
            "tau_runtime": kendall_tau(cake, [float(r["nvmmh_us"]) for r in sel]),  # type: ignore[arg-type]
            "tau_relative": kendall_tau(cake, [float(r["nvmmh_relative_us"]) for r in sel]),  # type: ignore[arg-type]
            "cake_best": min(sel, key=lambda r: r["cake_us"])["config"],  # type: ignore[arg-type,return-value]
            "nvmmh_best": min(sel, key=lambda r: r["nvmmh_us"])["config"],  # type: ignore[arg-type,return-value]
        }
    compared = [r for r in rows if r["nvmmh_us"] is not None]
    out["per_shape"] = taus
    out["compared"] = len(compared)
    out["not_modelled"] = sorted({str(r["config"]) for r in rows if r["nvmmh_us"] is None})
    out["tau_pooled"] = kendall_tau([float(r["cake_us"]) for r in compared],  # type: ignore[arg-type]
                                    [float(r["nvmmh_us"]) for r in compared])  # type: ignore[arg-type]
    per = [t["tau_runtime"] for t in taus.values() if not math.isnan(t["tau_runtime"])]
    out["tau_mean_per_shape"] = sum(per) / len(per) if per else math.nan
    return out


def _structure_kernel(spec: object) -> Kernel:
    path, subs = spec if isinstance(spec, tuple) else (spec, {})
    text = Path(path).read_text(encoding="utf-8")
    for old, new in subs.items():
        text = text.replace(old, new)
    res = check_text(text, Path(path).name)
    assert not res.errors and res.program is not None, path
    return res.program.kernels[0]


def structure_rows() -> list[dict[str, object]]:
    rows = []
    for label, before, after, gpu_name, shapes in STRUCTURE_PAIRS:
        kb, ka = _structure_kernel(before), _structure_kernel(after)
        gpu = get_gpu(gpu_name) if gpu_name else None
        for shape in shapes:
            dims = dict(zip("MNK", shape, strict=True))
            pb, pa = estimate(profile(kb, dims, gpu)), estimate(profile(ka, dims, gpu))
            rows.append({"rewrite": label, "gpu": pb.gpu, "shape": list(shape),
                         "before_us": pb.seconds * 1e6, "after_us": pa.seconds * 1e6,
                         "speedup": pb.seconds / pa.seconds, "waves_before": pb.waves,
                         "bottleneck_before": pb.bottleneck, "bottleneck_after": pa.bottleneck})
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=30)
    args = ap.parse_args()
    lat = latency_rows(args.repeat)
    print(f"{'kernel':<42}{'gpu':<16}{'predict p50/p95':>18}  {'predicted':>12}  bottleneck")
    print("-" * 104)
    for r in lat:
        if "error" in r:
            print(f"{r['file']:<42}{r['error']}")
            continue
        print(f"{r['file'] + ':' + str(r['kernel']):<42}{r['gpu']!s:<16}"
              f"{r['predict_p50_ms']:>7.2f}/{r['predict_p95_ms']:<6.2f} ms  "
              f"{r['predicted_us']:>9.1f} us  {r['bottleneck']}")
    struct = structure_rows()
    print(f"\n{'rewrite':<34}{'gpu':<16}{'shape':<18}{'before':>10}{'after':>10}{'speedup':>9}"
          "  bottleneck before -> after")
    for r in struct:
        shape = "x".join(str(d) for d in r["shape"])  # type: ignore[attr-defined]
        print(f"{r['rewrite']!s:<34}{r['gpu']!s:<16}{shape:<18}{r['before_us']:>8.1f}us"
              f"{r['after_us']:>8.1f}us{r['speedup']:>9.2f}  {r['bottleneck_before']} -> "
              f"{r['bottleneck_after']}")
    comp = comparison()
    print()
    if "skipped" in comp:
        print(f"nvMatmulHeuristics comparison skipped: {comp['skipped']}")
    else:
        print(f"GEMM sweep on {GPU}: {comp['configs']} configurations x {len(SHAPES)} shapes, "
              f"{comp['compared']} pairs compared with nvMatmulHeuristics "
              f"{comp['nvmmh_version']}")
        if comp["not_modelled"]:
            print(f"  not modelled by nvMatmulHeuristics: {', '.join(comp['not_modelled'])}")  # type: ignore[arg-type]
        print(f"{'shape':<18}{'n':>4}{'tau(runtime)':>14}{'tau(relative)':>15}  "
              f"{'CAKE best':<22}{'nvMMH best':<22}")
        for shape, t in comp["per_shape"].items():  # type: ignore[union-attr]
            print(f"{shape:<18}{t['n']:>4}{t['tau_runtime']:>14.3f}{t['tau_relative']:>15.3f}  "
                  f"{t['cake_best']:<22}{t['nvmmh_best']:<22}")
        print(f"pooled tau over all pairs: {comp['tau_pooled']:.3f};  mean per-shape tau: "
              f"{comp['tau_mean_per_shape']:.3f}")
    out = ROOT / "bench" / "results" / "cost_bench.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"repeat": args.repeat, "latency": lat, "structure": struct,
                               "comparison": comp}, indent=2) + "\n", encoding="utf-8")
    print(f"\nwrote {out.relative_to(ROOT)}; target: predict < 5 ms per kernel")


if __name__ == "__main__":
    main()
