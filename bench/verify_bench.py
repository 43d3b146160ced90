"""Verifier quality and cost over the planted bugs (tests/bugs + tests/corpus) and examples.

Quality, over every bad kernel with a `# expect: CODE LINE` header and its `.fixed.cake`
twin: catch rate (the expected code is reported), right-line rate (reported at the
expected line), one-finding rate (the expected finding and nothing else: no cascade), and
false positives (fixed twins with any finding, error or warning).
Targets: catch >= 95 %, right line >= 90 %, 0 false positives.

Cost, for each `examples/*.cake` and each `tests/bugs/*.cake`: the static check with no
verifier passes (parse + IR build + type check), with the resource and layout passes
only, and with every built-in pass (p50/p95).  Target: p95 < 50 ms for the GEMM examples.

Prints both tables and writes bench/results/verify_bench.json.

    python bench/verify_bench.py [--repeat 50]
"""

from __future__ import annotations

import argparse
import json
import re
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
CORPORA = (ROOT / "tests" / "bugs", ROOT / "tests" / "corpus")
_EXPECT = re.compile(r"^# expect: (CK\d{3}) (\d+)\s*$")


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


def quality_row(path: Path) -> dict[str, object] | None:
    """One bad kernel against its header, and its twin; None for a file with no header."""
    text = path.read_text(encoding="utf-8")
    m = _EXPECT.match(text.split("\n", 1)[0])
    if m is None:
        return None
    code, line = m.group(1), int(m.group(2))
    found = check_text(text, str(path)).diagnostics
    twin = path.with_name(path.stem + ".fixed.cake")
    on_twin = check_text(twin.read_text(encoding="utf-8"), str(twin)).diagnostics \
        if twin.is_file() else []
    return {
        "name": str(path.relative_to(ROOT)), "code": code, "line": line,
        "found": [[d.code, d.span.start.line + 1] for d in found],
        "caught": any(d.code == code for d in found),
        "right_line": any(d.code == code and d.span.start.line + 1 == line for d in found),
        "one_finding": [d.code for d in found] == [code],
        "twin_findings": [[d.code, d.span.start.line + 1] for d in on_twin],
    }


def quality(rows: list[dict[str, object]]) -> dict[str, object]:
    n = len(rows)

    def rate(key: str) -> float:
        return sum(1 for r in rows if r[key]) / n if n else 0.0

    return {"cases": n, "catch_rate": rate("caught"), "right_line_rate": rate("right_line"),
            "one_finding_rate": rate("one_finding"),
            "false_positives": sum(1 for r in rows if r["twin_findings"])}


def print_quality(by_corpus: dict[str, dict[str, object]]) -> None:
    head = f"{'corpus':16} {'cases':>5} {'catch':>7} {'right line':>10} {'one finding':>11} " \
           f"{'false pos.':>10}"
    print(head)
    print("-" * len(head))
    for name, q in by_corpus.items():
        print(f"{name:16} {q['cases']:>5} {q['catch_rate']:>7.1%} {q['right_line_rate']:>10.1%} "
              f"{q['one_finding_rate']:>11.1%} {q['false_positives']:>10}")
    print("targets: catch >= 95 %, right line >= 90 %, 0 false positives\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=50)
    args = ap.parse_args()
    files = sorted((ROOT / "examples").glob("*.cake")) + sorted((ROOT / "tests" / "bugs").glob(
        "*.cake"))
    qrows: dict[str, list[dict[str, object]]] = {}
    for corpus in CORPORA:
        bad = sorted(p for p in corpus.glob("*.cake") if not p.name.endswith(".fixed.cake"))
        qrows[str(corpus.relative_to(ROOT))] = [
            r for r in (quality_row(p) for p in bad) if r is not None]
    by_corpus = {name: quality(rs) for name, rs in qrows.items()}
    by_corpus["all"] = quality([r for rs in qrows.values() for r in rs])
    print_quality(by_corpus)
    misses = [r for rs in qrows.values() for r in rs
              if not (r["right_line"] and r["one_finding"]) or r["twin_findings"]]
    for r in misses:
        print(f"  miss: {r['name']}: expected {r['code']} at {r['line']}, found {r['found']}"
              + (f"; twin: {r['twin_findings']}" if r["twin_findings"] else ""))
    if misses:
        print()

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
    gemm = [r for r in rows if "gemm" in str(r["name"]) and str(r["name"]).startswith("examples")]
    gemm_p95 = max((float(r["all_p95_ms"]) for r in gemm), default=0.0)  # type: ignore[arg-type]
    print(f"GEMM examples, worst total p95: {gemm_p95:.2f} ms; target 50 ms")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps({"repeat": args.repeat, "target_p95_ms": 50.0,
                                   "passes": [p.__module__ for p in builtin_passes()],
                                   "quality": by_corpus, "quality_rows": qrows,
                                   "gemm_p95_ms": gemm_p95,
                                   "rows": rows}, indent=2) + "\n")
    print(f"wrote {RESULTS.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
