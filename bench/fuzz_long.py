"""Long-running fuzz of every entry point that reads user text, beyond what the test
suite can afford.

Parser kinds, in-process: random text, random bytes (through `SourceFile.from_bytes`),
mutated example kernels, chains of random edits (each `reparse` must equal a full
`parse`), and deep or long inputs.  Every case must return without raising, report no
internal error (CK901), keep every range inside the text and list findings in order.

Entry kinds, each in a supervised process (bench/_fuzz_entry.py): `cake check`, `lower`,
`cost`, `run --sim` and `run --emulate` on mutated examples and pathological inputs
(10**400, huge loop trip counts, towers of powers, 10,000 kernels, deep nesting, NUL,
invalid UTF-8, a BOM, CRLF), and `cake lsp` fed random edit streams interleaved with
requests at random positions, malformed JSON, bad Content-Length, unknown methods and
changes to unopened documents.  Each must answer within the time bound with no traceback,
no CK9xx and under the memory bound; a failure is counted by class (traceback, internal,
exit, hang, memory, crash).

Prints a table of cases, failures per class, the slowest case and the peak memory per
kind, saves each failing input under bench/results/fuzz_failures/, and writes
bench/results/fuzz_long.json.

    python bench/fuzz_long.py --minutes 60              # the long run: every kind
    python bench/fuzz_long.py --kinds parse --count 100000 --seed 7
    python bench/fuzz_long.py --kinds check,lsp --seconds 600
"""

from __future__ import annotations

import argparse
import functools
import json
import random
import shutil
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import _fuzz_entry as entry  # noqa: E402

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
    """A case that broke a property; `kind` is its class in the table."""

    def __init__(self, message: str, kind: str = "parse", payload: object = None) -> None:
        super().__init__(message)
        self.kind = kind
        self.payload = payload


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
    run: Case
    every: int = 1
    """Run in one round of this many: the slow kinds (emulation) get fewer cases."""
    cases: int = 0
    failures: int = 0
    slowest_ms: float = 0.0
    peak_mb: float = 0.0
    classes: dict[str, int] = field(default_factory=dict)
    examples: list[str] = field(default_factory=list)


Case = Callable[[random.Random], tuple[object, float, float]]
"""A case returns its input, its time in ms and the peak memory of its process in MB (0
for the in-process kinds, whose memory is this process's)."""


def make_case_cli(worker: entry.CliWorker, command: str, seeds: list[bytes]) -> Case:
    def case(rng: random.Random) -> tuple[object, float, float]:
        data = entry.entry_case(rng, seeds)
        verdict = worker.run(command, data)
        if verdict.failure is not None:
            raise Failure(f"{verdict.failure}: {verdict.detail}", verdict.failure, data)
        return data, verdict.ms, verdict.rss_mb
    return case


def make_case_lsp(probe: entry.LspProbe, seeds: list[bytes]) -> Case:
    def case(rng: random.Random) -> tuple[object, float, float]:
        verdict = probe.stream(rng, seeds)  # replayed from the case's seed
        if verdict.failure is not None:
            raise Failure(f"{verdict.failure}: {verdict.detail}", verdict.failure)
        return None, verdict.ms, verdict.rss_mb
    return case


def timed(fn: Callable[[], ParseResult]) -> tuple[ParseResult, float]:
    start = time.perf_counter()
    result = fn()
    return result, (time.perf_counter() - start) * 1e3


def case_text(rng: random.Random) -> tuple[object, float, float]:
    text = "".join(rng.choice(PIECES) for _ in range(rng.randrange(1, 200)))
    result, ms = timed(lambda: parse(SourceFile(text)))
    check(result)
    return text, ms, 0.0


def case_bytes(rng: random.Random) -> tuple[object, float, float]:
    raw = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 2000)))
    result, ms = timed(lambda: parse(SourceFile.from_bytes(raw)))
    check(result)
    return raw, ms, 0.0


def make_case_mutate(texts: list[str]) -> Case:
    def case(rng: random.Random) -> tuple[object, float, float]:
        text = mutate(rng, rng.choice(texts), rng.randrange(1, 10))
        result, ms = timed(lambda: parse(SourceFile(text)))
        check(result)
        return text, ms, 0.0
    return case


def make_case_edits(texts: list[str]) -> Case:
    def case(rng: random.Random) -> tuple[object, float, float]:
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
            result, ms = timed(functools.partial(reparse, old, start, end, new))
            slowest = max(slowest, ms)
            full = parse(SourceFile(text[:i] + new + text[j:]))
            if result.module != full.module or result.diagnostics != full.diagnostics:
                raise Failure(f"reparse differs from parse after edits {steps!r}")
            check(result)
        return result.source.text, slowest, 0.0
    return case


def case_deep(rng: random.Random) -> tuple[object, float, float]:
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
    return text, ms, 0.0


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


PARSE_KINDS = ("text", "bytes", "mutate", "edits", "deep")
ENTRY_KINDS = (*entry.COMMANDS, "lsp")


def modes_for(kinds: list[str], worker: entry.CliWorker, probe: entry.LspProbe) -> list[Mode]:
    texts = kernels()
    seeds = entry.examples()
    parse_cases: dict[str, Case] = {
        "text": case_text, "bytes": case_bytes, "mutate": make_case_mutate(texts),
        "edits": make_case_edits(texts), "deep": case_deep}
    modes = []
    for kind in kinds:
        if kind in parse_cases:
            modes.append(Mode(kind, parse_cases[kind]))
        elif kind == "lsp":
            modes.append(Mode(kind, make_case_lsp(probe, seeds)))
        elif kind == "emulate":
            modes.append(Mode(kind, make_case_cli(worker, kind, seeds), every=entry.EMULATE_EVERY))
        else:
            modes.append(Mode(kind, make_case_cli(worker, kind, seeds)))
    return modes


def parse_kinds(text: str) -> list[str]:
    kinds: list[str] = []
    for word in text.split(","):
        word = word.strip()
        group = {"all": PARSE_KINDS + ENTRY_KINDS, "parse": PARSE_KINDS,
                 "entry": ENTRY_KINDS}.get(word, (word,))
        for kind in group:
            if kind not in PARSE_KINDS + ENTRY_KINDS:
                raise argparse.ArgumentTypeError(
                    f"unknown kind {kind!r}: pick from all, parse, entry, "
                    + ", ".join(PARSE_KINDS + ENTRY_KINDS))
            if kind not in kinds:
                kinds.append(kind)
    if "emulate" in kinds and shutil.which("g++") is None and shutil.which("clang++") is None:
        print("note: no host C++ compiler, so no emulation cases")
        kinds.remove("emulate")
    return kinds


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=60.0, help="stop after this long")
    ap.add_argument("--minutes", type=float, default=0.0,
                    help="stop after this long (overrides --seconds)")
    ap.add_argument("--count", type=int, default=0, help="stop after this many cases (0: no cap)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--kinds", type=parse_kinds, default="all",
                    help="comma-separated kinds or groups: all (default), parse, entry, "
                         + ", ".join(PARSE_KINDS + ENTRY_KINDS))
    ap.add_argument("--max-failures", type=int, default=20, help="stop after this many")
    args = ap.parse_args()
    if args.minutes:
        args.seconds = args.minutes * 60
    worker, probe = entry.CliWorker(), entry.LspProbe()
    try:
        run(args, modes_for(args.kinds, worker, probe))
    finally:
        worker.close()
        probe.close()


def run(args: argparse.Namespace, modes: list[Mode]) -> None:
    rng = random.Random(args.seed)
    started = time.monotonic()
    deadline = started + args.seconds
    total = failures = rounds = 0
    stop = False
    while not stop:
        for mode in modes:
            if rounds % mode.every:
                continue
            if time.monotonic() >= deadline or (args.count and total >= args.count):
                stop = True
                break
            case_seed = rng.randrange(2**63)
            payload: object = None
            try:
                payload, ms, mb = mode.run(random.Random(case_seed))
                mode.slowest_ms = max(mode.slowest_ms, ms)
                mode.peak_mb = max(mode.peak_mb, mb)
            except Exception as err:  # a failure to record, never to stop the run
                kind = err.kind if isinstance(err, Failure) else "raised"
                if isinstance(err, Failure) and err.payload is not None:
                    payload = err.payload
                mode.failures += 1
                mode.classes[kind] = mode.classes.get(kind, 0) + 1
                failures += 1
                reason = f"{type(err).__name__}: {err}"
                if not isinstance(err, Failure):
                    reason += "\n" + traceback.format_exc()
                path = save(mode.name, mode.cases,
                            payload if payload is not None else case_seed,
                            f"seed {case_seed}: {reason}")
                mode.examples.append(str(path.relative_to(ROOT)))
                print(f"FAIL {mode.name} case {mode.cases} (seed {case_seed}): "
                      f"{reason.splitlines()[0][:200]}", flush=True)
                if failures >= args.max_failures:
                    stop = True
                    break
            mode.cases += 1
            total += 1
        rounds += 1
    elapsed = time.monotonic() - started
    report(args, modes, total, failures, elapsed)
    sys.exit(1 if failures else 0)


def report(args: argparse.Namespace, modes: list[Mode], total: int, failures: int,
           elapsed: float) -> None:
    print(f"\n{'kind':<9}{'cases':>9}{'cases/s':>9}{'failures':>10}  {'by class':<22}"
          f"{'slowest':>11}{'peak MB':>9}")
    print("-" * 79)
    for m in modes:
        classes = ", ".join(f"{k} {n}" for k, n in sorted(m.classes.items())) or "-"
        peak = f"{m.peak_mb:.0f}" if m.peak_mb else "-"
        print(f"{m.name:<9}{m.cases:>9}{m.cases / elapsed:>9.2f}{m.failures:>10}  {classes:<22}"
              f"{m.slowest_ms:>8.1f} ms{peak:>9}")
    print("-" * 79)
    print(f"{'total':<9}{total:>9}{total / elapsed:>9.2f}{failures:>10}   in {elapsed:.0f} s")
    print(f"bounds: {entry.BOUND_S:.0f} s per case; CLI workers limited to "
          f"{entry.MEM_BOUND_MB} MB of address space; the server to "
          f"{entry.LSP_RSS_BOUND_MB} MB RSS")
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = RESULTS / "fuzz_long.json"
    out.write_text(json.dumps({
        "seed": args.seed, "seconds": round(elapsed, 1), "cases": total, "failures": failures,
        "bounds": {"seconds_per_case": entry.BOUND_S, "cli_address_space_mb": entry.MEM_BOUND_MB,
                   "lsp_rss_mb": entry.LSP_RSS_BOUND_MB},
        "kinds": [{"kind": m.name, "cases": m.cases, "cases_per_s": round(m.cases / elapsed, 3),
                   "failures": m.failures, "classes": m.classes,
                   "slowest_ms": round(m.slowest_ms, 2), "peak_mb": round(m.peak_mb, 1),
                   "failing_inputs": m.examples}
                  for m in modes],
    }, indent=2) + "\n")
    print(f"\nwrote {out.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
