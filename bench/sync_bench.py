"""Cost of the synchronization rules alone: `sync.check` per kernel (p50/p95).

For each `examples/*.cake` and each sync bug kernel in `tests/bugs/` (and its fixed
twin), the program is parsed and type-checked once, then the sync pass is timed on its
IR.  Also reports how long the unrolled programs are.  Prints a table and writes
bench/results/sync_bench.json.  Target: all GEMM examples together well under 50 ms.

    python bench/sync_bench.py [--repeat 30]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from cake_core.check import check_text  # noqa: E402
from cake_core.verify import sync  # noqa: E402
from cake_core.verify.facts import KernelFacts  # noqa: E402
from cake_core.verify.local import run_agents  # noqa: E402

RESULTS = ROOT / "bench" / "results" / "sync_bench.json"


def kernels() -> list[Path]:
    bugs = [p for p in sorted((ROOT / "tests" / "bugs").glob("sync_*.cake"))]
    return sorted((ROOT / "examples").glob("*.cake")) + bugs


def measure(path: Path, repeat: int) -> dict[str, object] | None:
    text = path.read_text(encoding="utf-8")
    result = check_text(text, str(path), passes=[])
    if result.program is None or not result.program.kernels:
        return None
    program, source = result.program, result.source
    sync.check(program, source)  # warm up
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        sync.check(program, source)
        times.append((time.perf_counter() - t0) * 1e3)
    facts = KernelFacts(program.kernels[0], source)
    events = sum(len(r.events) for r in run_agents(facts))
    times.sort()
    return {"name": str(path.relative_to(ROOT)), "events": events,
            "p50_ms": statistics.median(times),
            "p95_ms": times[min(len(times) - 1, round(0.95 * (len(times) - 1)))]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=30)
    args = ap.parse_args()
    rows = [r for p in kernels() if (r := measure(p, args.repeat)) is not None]
    width = max(len(str(r["name"])) for r in rows)
    print(f"{'kernel':<{width}}  {'events':>7}  {'p50 ms':>7}  {'p95 ms':>7}")
    for r in rows:
        print(f"{r['name']:<{width}}  {r['events']:>7}  {r['p50_ms']:>7.2f}  {r['p95_ms']:>7.2f}")
    gemms = [r for r in rows if str(r["name"]).startswith("examples/") and "gemm" in str(r["name"])]
    total = sum(float(r["p95_ms"]) for r in gemms)  # type: ignore[arg-type]
    print(f"\nGEMM examples together (p95 sum): {total:.2f} ms  (target < 50 ms)")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps({"rows": rows, "gemm_examples_p95_sum_ms": total}, indent=2))
    print(f"wrote {RESULTS.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
