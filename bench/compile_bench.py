"""Lowering and compile cost per example: IR -> CUDA, then nvcc/ptxas, and kernels per second.

For each `examples/*.cake`: the time to lower the checked IR to CUDA C++ (median of
`--repeat` runs, the check excluded), and one uncached nvcc run to a cubin (front end +
ptxas, `-Xptxas -v`).  Prints a table and writes bench/results/compile_bench.json.
Without nvcc only the lowering is measured.

    python bench/compile_bench.py [--repeat 20]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from cake_core.check import check_source  # noqa: E402
from cake_core.lower import lower_checked  # noqa: E402
from cake_core.lower.ptxas import parse_log  # noqa: E402
from cake_core.lower.toolchain import compile_cu, find_toolchain  # noqa: E402
from cake_core.source import SourceFile  # noqa: E402

RESULTS = ROOT / "bench" / "results" / "compile_bench.json"


def measure(path: Path, repeat: int, cache: Path) -> dict[str, object]:
    src = SourceFile(path.read_text(encoding="utf-8"), f"examples/{path.name}")
    checked = check_source(src)
    lower_checked(checked)  # warm imports
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        res = lower_checked(checked)
        times.append((time.perf_counter() - t0) * 1e3)
    assert res.cu is not None, f"{path.name} did not lower"
    row: dict[str, object] = {
        "name": path.name, "kernels": len(res.kernels),
        "arch": ",".join(k.arch for k in res.kernels),
        "cu_lines": res.cu.count("\n"),
        "lower_p50_ms": statistics.median(times), "lower_min_ms": min(times),
    }
    tc = find_toolchain()
    if tc is None:
        return row
    k = res.kernels[0]
    out = compile_cu(res.cu, k.arch, cu_name=f"{path.stem}.cu", toolchain=tc, cache=cache,
                     use_cache=False)
    funcs, _ = parse_log(out.log)
    fr = funcs.get(k.entry)
    row.update({"nvcc_s": out.seconds, "ok": out.ok,
                "registers": fr.registers if fr else None,
                "spill_bytes": (fr.spill_stores + fr.spill_loads) if fr else None,
                "toolchain": tc.version})
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=20)
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for path in sorted((ROOT / "examples").glob("*.cake")):
            rows.append(measure(path, args.repeat, Path(tmp)))
    print(f"{'example':<26} {'arch':<7} {'.cu lines':>9} {'lower p50 ms':>13} {'nvcc s':>7} "
          f"{'regs':>5} {'spills':>7}")
    for r in rows:
        nv = f"{r['nvcc_s']:.2f}" if "nvcc_s" in r else "-"
        print(f"{r['name']:<26} {r['arch']:<7} {r['cu_lines']:>9} {r['lower_p50_ms']:>13.1f} "
              f"{nv:>7} {r.get('registers', '-')!s:>5} {r.get('spill_bytes', '-')!s:>7}")
    lower_total = sum(float(r["lower_p50_ms"]) for r in rows) / 1e3  # type: ignore[arg-type]
    nvcc_total = sum(float(r["nvcc_s"]) for r in rows if "nvcc_s" in r)  # type: ignore[arg-type]
    summary = {
        "examples": len(rows),
        "lower_kernels_per_s": len(rows) / lower_total if lower_total else None,
        "nvcc_kernels_per_s": (len(rows) / nvcc_total) if nvcc_total else None,
        "end_to_end_kernels_per_s": (len(rows) / (lower_total + nvcc_total))
        if nvcc_total else None,
    }
    print(f"lowering: {summary['lower_kernels_per_s']:.0f} kernels/s" if summary[
        "lower_kernels_per_s"] else "lowering: -")
    if nvcc_total:
        print(f"nvcc/ptxas: {summary['nvcc_kernels_per_s']:.2f} kernels/s; end to end "
              f"{summary['end_to_end_kernels_per_s']:.2f} kernels/s")
    else:
        print("nvcc not found: compile times not measured")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps({"rows": rows, "summary": summary}, indent=2) + "\n",
                       encoding="utf-8")
    print(f"wrote {RESULTS.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
