"""Long-running fuzz of the .cake parser, beyond what the test suite can afford.

Five kinds of case, in turn: random text, random bytes (through `SourceFile.from_bytes`),
mutated example kernels, chains of random edits (each `reparse` must equal a full
`parse`), and deep or long inputs.  Every case must return without raising, report no
internal error (CK901), keep every range inside the text and list findings in order.
Prints a table of cases and failures per kind, saves each failing input under
bench/results/fuzz_failures/, and writes bench/results/fuzz_long.json.

    python bench/fuzz_long.py --seconds 600
    python bench/fuzz_long.py --count 100000 --seed 7
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from cake_core.source import SourceFile  # noqa: E402
from cake_core.syntax.parser import ParseResult, parse, reparse  # noqa: E402

RESULTS = ROOT / "bench" / "results"
PIECES = [*"()[]{}:,.=+-*/%@&|^~<> \n\t\r\\'\"#_0123456789abcxyzé😀\x00\ufeff",
          "for ", "in ", "if ", "elif ", "else", "def ", "with ", "as ", "return ", "pass",
          "lambda ", "while ", "import ", "not ", "and ", "or ", "f'", "b'", "r'", '"""',
          "'''", "    ", "\t", "\r\n", "\\\n", ":=", "**", "->", "@kernel", "0x", "1e9",
          "(" * 40, ")" * 40, "[" * 10, "]" * 10]


def kernels() -> list[str]:
    found = sorted((ROOT / "examples").glob("*.cake"))
    found += sorted((ROOT / "bench" / "data").glob("*.cake"))
    texts = [p.read_text(encoding="utf-8") for p in found]
    return texts or ["x = 1\n"]


class Failure(Exception):
    pass


def check(result: ParseResult) -> None:
    size = len(result.source.data)
    last = -1
    for diag in result.diagnostics:
        if diag.code == "CK901":
            raise Failure(f"internal error: {diag.message}")
        span = diag.span
        if not 0 <= span.start.offset <= span.end.offset <= size:
            raise Failure(f"{diag.code} range {span.start.offset}-{span.end.offset} "
                          f"outside a text of {size} bytes")
        if span.start.offset < last:
            raise Failure("findings out of order")
        last = span.start.offset
        for fix in diag.fixes:
            for edit in fix.edits:
                if not 0 <= edit.span.start.offset <= edit.span.end.offset <= size:
                    raise Failure(f"{diag.code} fix edit outside the text")
    for stmt in result.module.body:
        if not 0 <= stmt.span.start.offset <= stmt.span.end.offset <= size:
            raise Failure("statement range outside the text")


def mutate(rng: random.Random, text: str, edits: int) -> str:
    for _ in range(edits):
        i = rng.randrange(len(text) + 1)
        j = min(len(text), i + rng.choice([1, 1, 2, 5, 20]))
        op = rng.random()
        if op < 0.4:
            text = text[:i] + rng.choice(PIECES) + text[i:]
        elif op < 0.7:
            text = text[:i] + text[j:]
        else:
            text = text[:i] + rng.choice(PIECES) + text[j:]
    return text


@dataclass
class Mode:
    name: str
    run: Callable[[random.Random], tuple[object, float]]
    cases: int = 0
    failures: int = 0
    slowest_ms: float = 0.0
    examples: list[str] = field(default_factory=list)


def timed(fn: Callable[[], ParseResult]) -> tuple[ParseResult, float]:
    start = time.perf_counter()
    result = fn()
    return result, (time.perf_counter() - start) * 1e3


def case_text(rng: random.Random) -> tuple[object, float]:
    text = "".join(rng.choice(PIECES) for _ in range(rng.randrange(1, 200)))
    result, ms = timed(lambda: parse(SourceFile(text)))
    check(result)
    return text, ms


def case_bytes(rng: random.Random) -> tuple[object, float]:
    raw = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 2000)))
    result, ms = timed(lambda: parse(SourceFile.from_bytes(raw)))
    check(result)
    return raw, ms


def make_case_mutate(texts: list[str]) -> Callable[[random.Random], tuple[object, float]]:
    def case(rng: random.Random) -> tuple[object, float]:
        text = mutate(rng, rng.choice(texts), rng.randrange(1, 10))
        result, ms = timed(lambda: parse(SourceFile(text)))
        check(result)
        return text, ms
    return case


def make_case_edits(texts: list[str]) -> Callable[[random.Random], tuple[object, float]]:
    def case(rng: random.Random) -> tuple[object, float]:
        result = parse(SourceFile(rng.choice(texts)))
        steps: list[tuple[int, int, str]] = []
        slowest = 0.0
        for _ in range(rng.randrange(1, 12)):
            text = result.source.text
            i = rng.randrange(len(text) + 1)
            j = min(len(text), i + rng.choice([0, 0, 1, 3]))
            new = rng.choice(PIECES) if rng.random() < 0.8 else ""
            steps.append((i, j, new))
            start, end = len(text[:i].encode()), len(text[:j].encode())
            old = result
            result, ms = timed(lambda old=old, start=start, end=end, new=new:
                               reparse(old, start, end, new))
            slowest = max(slowest, ms)
            full = parse(SourceFile(text[:i] + new + text[j:]))
            if result.module != full.module or result.diagnostics != full.diagnostics:
                raise Failure(f"reparse differs from parse after edits {steps!r}")
            check(result)
        return result.source.text, slowest
    return case


def case_deep(rng: random.Random) -> tuple[object, float]:
    n = rng.choice([50, 99, 100, 101, 500, 5000])
    shapes = [
        "x = " + "(" * n + "1" + ")" * n,
        "x = " + "[" * n + "]" * n,
        "x = " + "-" * n + "1",
        "x = " + " + ".join(["a"] * n),
        "x = a" + ".b" * n,
        "x = " + "f(" * n + ")" * n,
        "".join("    " * i + "if x:\n" for i in range(min(n, 600))) + "    " * min(n, 600) + "pass",
        "x = " + "(" * n,
    ]
    text = rng.choice(shapes) + "\n"
    result, ms = timed(lambda: parse(SourceFile(text)))
    check(result)
    return text, ms


def save(mode: str, index: int, payload: object, reason: str) -> Path:
    folder = RESULTS / "fuzz_failures"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{mode}-{index}.cake"
    if isinstance(payload, bytes):
        path.write_bytes(payload)
    else:
        path.write_text(str(payload), encoding="utf-8", errors="surrogatepass")
    path.with_suffix(".txt").write_text(reason + "\n", encoding="utf-8")
    return path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=60.0, help="stop after this long")
    ap.add_argument("--count", type=int, default=0, help="stop after this many cases (0: no cap)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--max-failures", type=int, default=20, help="stop after this many")
    args = ap.parse_args()
    texts = kernels()
    modes = [Mode("text", case_text), Mode("bytes", case_bytes),
             Mode("mutate", make_case_mutate(texts)), Mode("edits", make_case_edits(texts)),
             Mode("deep", case_deep)]
    rng = random.Random(args.seed)
    deadline = time.monotonic() + args.seconds
    total = failures = 0
    while time.monotonic() < deadline and (not args.count or total < args.count):
        mode = modes[total % len(modes)]
        case_seed = rng.randrange(2**63)
        payload: object = None
        try:
            payload, ms = mode.run(random.Random(case_seed))
            mode.slowest_ms = max(mode.slowest_ms, ms)
        except Exception as err:  # a failure to record, never to stop the run
            mode.failures += 1
            failures += 1
            reason = f"{type(err).__name__}: {err}"
            if not isinstance(err, Failure):
                reason += "\n" + traceback.format_exc()
            path = save(mode.name, mode.cases, payload if payload is not None else case_seed,
                        f"seed {case_seed}: {reason}")
            mode.examples.append(str(path.relative_to(ROOT)))
            print(f"FAIL {mode.name} case {mode.cases} (seed {case_seed}): "
                  f"{reason.splitlines()[0]}")
            if failures >= args.max_failures:
                break
        mode.cases += 1
        total += 1
    print(f"\n{'kind':<8}{'cases':>10}{'failures':>10}{'slowest':>12}")
    print("-" * 40)
    for m in modes:
        print(f"{m.name:<8}{m.cases:>10}{m.failures:>10}{m.slowest_ms:>9.1f} ms")
    print("-" * 40)
    print(f"{'total':<8}{total:>10}{failures:>10}")
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = RESULTS / "fuzz_long.json"
    out.write_text(json.dumps({
        "seed": args.seed, "seconds": args.seconds, "cases": total, "failures": failures,
        "kinds": [{"kind": m.name, "cases": m.cases, "failures": m.failures,
                   "slowest_ms": round(m.slowest_ms, 2), "failing_inputs": m.examples}
                  for m in modes],
    }, indent=2) + "\n")
    print(f"\nwrote {out.relative_to(ROOT)}")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
