"""Parse + type-check latency of the front end (p50/p95), full and incremental.

For each example and for synthetic 200- and 2,000-line files: a full parse, the full
static check (parse + IR build + type check + verifier), and an incremental re-parse
after a one-character edit.  Prints a table and writes bench/results/check_latency.json.
Target: p95 < 20 ms for a 200-line kernel (parse + type check).

    python bench/check_latency.py [--repeat 50]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _kernels import ROOT, synthetic

from cake_core.check import check_source, default_plugins
from cake_core.syntax.parser import parse, reparse
from cake_core.syntax.source import SourceFile
from cake_core.verify.cache import KernelVerdicts


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, round(q * (len(xs) - 1)))]


def measure(name: str, text: str, repeat: int) -> dict[str, object]:
    full, typed, check, incr = [], [], [], []
    plugins = default_plugins()
    src = SourceFile(text, name)
    base = parse(src)
    # a one-character edit in the middle of the file: insert a space before a newline
    mid = text.encode().find(b"\n", len(text.encode()) // 2)
    for i in range(repeat):
        t0 = time.perf_counter()
        parse(SourceFile(text, name))
        t1 = time.perf_counter()
        check_source(SourceFile(text, name), passes=())
        plugins.verdicts = KernelVerdicts()  # a cold verifier: no findings reused
        t1b = time.perf_counter()
        check_source(SourceFile(text, name), plugins=plugins)
        t2 = time.perf_counter()
        reparse(base, mid, mid, " " if i % 2 == 0 else "\t")
        t3 = time.perf_counter()
        full.append((t1 - t0) * 1e3)
        typed.append((t1b - t1) * 1e3)
        check.append((t2 - t1b) * 1e3)
        incr.append((t3 - t2) * 1e3)
    return {
        "name": name,
        "lines": text.count("\n"),
        "parse_p50_ms": statistics.median(full), "parse_p95_ms": pct(full, 0.95),
        "typecheck_p50_ms": statistics.median(typed), "typecheck_p95_ms": pct(typed, 0.95),
        "check_p50_ms": statistics.median(check), "check_p95_ms": pct(check, 0.95),
        "reparse_p50_ms": statistics.median(incr), "reparse_p95_ms": pct(incr, 0.95),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=50)
    args = ap.parse_args()
    cases = [(p.name, p.read_text(encoding="utf-8"))
             for p in sorted((ROOT / "examples").glob("*.cake"))]
    cases += [("synthetic-200", synthetic(200)), ("synthetic-2000", synthetic(2000))]
    rows = [measure(n, t, args.repeat) for n, t in cases]
    head = f"{'file':<26}{'lines':>6}  {'parse p50/p95':>15}  {'+types p50/p95':>15}  " \
           f"{'+verify p50/p95':>15}  {'reparse p50/p95':>16}"
    print(head)
    print("-" * len(head))
    for r in rows:
        print(f"{r['name']:<26}{r['lines']:>6}  "
              f"{r['parse_p50_ms']:>6.2f}/{r['parse_p95_ms']:<6.2f} ms "
              f"{r['typecheck_p50_ms']:>6.2f}/{r['typecheck_p95_ms']:<6.2f} ms "
              f"{r['check_p50_ms']:>6.2f}/{r['check_p95_ms']:<6.2f} ms "
              f"{r['reparse_p50_ms']:>6.3f}/{r['reparse_p95_ms']:<6.3f} ms")
    out = ROOT / "bench" / "results" / "check_latency.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"repeat": args.repeat, "rows": rows}, indent=2) + "\n")
    print(f"\nwrote {out.relative_to(ROOT)}; +types = parse + IR build + type check; "
          "+verify = that plus every verifier pass")


if __name__ == "__main__":
    main()
