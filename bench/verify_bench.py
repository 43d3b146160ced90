"""Verifier cost: `check_text` per example with and without the verifier passes (p50/p95).

For each `examples/*.cake` and each `tests/bugs/*.cake`: the static check with no
verifier passes (parse + IR build + type check), with the resource and layout passes
only, and with every built-in pass.  Prints a table and writes
bench/results/verify_bench.json.  Target: p95 < 50 ms for a GEMM kernel in total.

    python bench/verify_bench.py [--repeat 50]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from cake_core.check import check_text  # noqa: E402
from cake_core.verify import builtin_passes, layout, resources  # noqa: E402

RESULTS = ROOT / "bench" / "results" / "verify_bench.json"


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, round(q * (len(xs) - 1)))]


def timed(fn: Callable[[], object], repeat: int) -> list[float]:
    fn()  # warm caches (imports, registry)
    out = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t0) * 1e3)
    return out


def measure(path: Path, repeat: int) -> dict[str, object]:
    text = path.read_text(encoding="utf-8")
    name = str(path.relative_to(ROOT))
    mine = [resources.check, layout.check]
    every = builtin_passes()
    runs = {
        "none": timed(lambda: check_text(text, name, passes=[]), repeat),
        "resources_layout": timed(lambda: check_text(text, name, passes=mine), repeat),
        "all": timed(lambda: check_text(text, name, passes=every), repeat),
    }
    row: dict[str, object] = {"name": name, "lines": text.count("\n")}
    for key, xs in runs.items():
        row[f"{key}_p50_ms"] = statistics.median(xs)
        row[f"{key}_p95_ms"] = pct(xs, 0.95)
    row["verifier_p95_ms"] = max(0.0, pct(runs["all"], 0.95) - pct(runs["none"], 0.95))
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=50)
    args = ap.parse_args()
    files = sorted((ROOT / "examples").glob("*.cake")) + sorted((ROOT / "tests" / "bugs").glob(
        "*.cake"))
    rows = [measure(p, args.repeat) for p in files]
    head = f"{'file':52} {'lines':>5} {'no verify p50/p95':>18} {'res+layout p50/p95':>19} " \
           f"{'all p50/p95':>14}"
    print(head)
    print("-" * len(head))
    for r in rows:
        print(f"{r['name']:52} {r['lines']:>5} "
              f"{r['none_p50_ms']:>8.2f}/{r['none_p95_ms']:<8.2f} "
              f"{r['resources_layout_p50_ms']:>9.2f}/{r['resources_layout_p95_ms']:<8.2f} "
              f"{r['all_p50_ms']:>6.2f}/{r['all_p95_ms']:<6.2f}")
    worst = max(rows, key=lambda r: r["all_p95_ms"])  # type: ignore[arg-type,return-value]
    print(f"\nworst total p95: {worst['all_p95_ms']:.2f} ms ({worst['name']}); target 50 ms")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps({"repeat": args.repeat, "target_p95_ms": 50.0,
                                   "passes": [p.__module__ for p in builtin_passes()],
                                   "rows": rows}, indent=2) + "\n")
    print(f"wrote {RESULTS.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
