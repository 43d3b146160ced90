"""Long-running fuzz of the .cake parser and of every entry point, beyond what the test
suite can afford.

Parser kinds, in turn: random text, random bytes (through `SourceFile.from_bytes`),
mutated example kernels, chains of random edits (each `reparse` must equal a full
`parse`), and deep or long inputs.  Every case must return without raising, report no
internal error (CK901), keep every range inside the text and list findings in order.

Entry-point kinds, the probes of tests/test_entry_fuzz.py run for as long as the run
lasts: `pathological` (the saved crash and hang regressions, pathological constants such
as `10**10**10`, 5,000-deep nesting, NUL bytes, invalid UTF-8, a BOM, CRLF and CR line
endings) and `cli_mutate` (mutated examples) through a random one of `cake check`,
`lower`, `cost` and `run --sim`, each answered within BOUND_S without a traceback or an
internal error; `bulk` (10,000 kernels in one file, through `check` and `lower`; every
50th round); and `lsp` (a stream of random document opens, edits, hovers, completions and
unknown requests to one long-lived `cake lsp`, every request answered in time).

Prints a table of cases, failures and cases/s per kind, saves each failing input under
bench/results/fuzz_failures/, and writes bench/results/fuzz_long.json.

    python bench/fuzz_long.py --minutes 60
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
    every: int = 1
    """Run in one round of every `every` (the costly kinds)."""
    cases: int = 0
    failures: int = 0
    slowest_ms: float = 0.0
    seconds: float = 0.0
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


# --- entry points (the probes of tests/test_entry_fuzz.py) --------------------------------------
BOUND_S = 10.0
GEMM = (ROOT / "examples" / "gemm_sm80.cake").read_bytes()
SMALL_KERNEL = '@kernel(arch="sm_80", grid=(1,), warps=4)\ndef k{i}():\n    pass\n'
PATHOLOGICAL: dict[str, bytes] = {
    "pow_tower": b"X = 10**10**10\n",
    "big_shift": b"X = 1 << (1 << 40)\n",
    "parens_5000": b"X = " + b"(" * 5000 + b"1" + b")" * 5000 + b"\n",
    "sum_5000": b"X = " + b" + ".join([b"1"] * 5000) + b"\n",
    "huge_loop": GEMM.replace(b"for k in range(", b"for k in range(10**12 + "),
    "nul": GEMM.replace(b"STAGES = 3", b"STAGES = 3\x00"),
    "invalid_utf8": GEMM.replace(b"STAGES = 3", b"STAGES = 3 \xff\xfe"),
    "bom": b"\xef\xbb\xbf" + GEMM,
    "crlf": GEMM.replace(b"\n", b"\r\n"),
    "cr_only": GEMM.replace(b"\n", b"\r"),
    "bom_crlf_nul": b"\xef\xbb\xbf" + GEMM.replace(b"\n", b"\r\n") + b"\x00\xff",
    "empty": b"",
    **{p.stem: p.read_bytes()
       for p in sorted((ROOT / "tests" / "data" / "fuzz_regressions").glob("*.cake"))},
}
def _args(command: str, f: str) -> list[str]:
    return {"check": ["check", "--no-color", f],
            "lower": ["lower", "--no-color", "-o", f + ".cu", f],
            "cost": ["cost", "-d", "M=4096,N=4096,K=4096", f],
            "sim": ["run", "--sim", "--task", "gemm_f16_sm80", "--dims", "M=64,N=64,K=64",
                    "--schedules", "1", f]}[command]


COMMANDS = ("check", "lower", "cost", "sim")
SCRATCH = RESULTS / "fuzz_scratch"


def run_cli(command: str, data: bytes) -> float:
    """`cake COMMAND` on `data` in process; the properties of test_entry_fuzz.run_cli."""
    from click.testing import CliRunner

    from cake_cli.main import main as cake_main

    SCRATCH.mkdir(parents=True, exist_ok=True)
    path = SCRATCH / "fuzz.cake"
    path.write_bytes(data)
    start = time.perf_counter()
    res = CliRunner().invoke(cake_main, _args(command, str(path)))
    took = time.perf_counter() - start
    out = res.output
    if res.exception is not None and not isinstance(res.exception, SystemExit):
        raise Failure(f"`cake {command}` raised {type(res.exception).__name__}: "
                      f"{res.exception}")
    if "Traceback" in out or "internal error" in out or "CK9" in out:
        raise Failure(f"`cake {command}` printed an internal error: {out[-300:]!r}")
    if res.exit_code not in (0, 1, 2):
        raise Failure(f"`cake {command}` exited {res.exit_code}")
    if res.exit_code == 2 and "Error:" not in out and "fix them before" not in out:
        raise Failure(f"`cake {command}` exited 2 without a usage message")
    if took > BOUND_S:
        raise Failure(f"`cake {command}` took {took:.1f} s")
    return took * 1e3


def case_pathological(rng: random.Random) -> tuple[object, float]:
    name = rng.choice(sorted(PATHOLOGICAL))
    data = PATHOLOGICAL[name]
    return data, run_cli(rng.choice(COMMANDS), data)


def make_case_cli_mutate(texts: list[str]) -> Callable[[random.Random], tuple[object, float]]:
    def case(rng: random.Random) -> tuple[object, float]:
        data = mutate(rng, rng.choice(texts), rng.randrange(1, 5)).encode(
            "utf-8", "surrogatepass")
        return data, run_cli(rng.choice(COMMANDS), data)
    return case


def case_bulk(rng: random.Random) -> tuple[object, float]:
    data = "".join(SMALL_KERNEL.format(i=i) for i in range(10_000)).encode()
    return "10,000 kernels", run_cli(rng.choice(["check", "lower"]), data)


class LspStream:
    """One `cake lsp` over stdio for the whole run: framed JSON-RPC written by hand, every
    request's answer awaited (an error answer counts; silence or a dead server fails)."""

    def __init__(self) -> None:
        import subprocess
        import threading

        self.proc = subprocess.Popen([sys.executable, "-m", "cake_lsp"], cwd=ROOT,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL)
        self.answers: dict[int, dict[str, object]] = {}
        self.arrived = threading.Condition()
        self.next_id = 0
        threading.Thread(target=self._read, daemon=True).start()
        self.request("initialize", {"processId": None, "rootUri": ROOT.as_uri(),
                                    "capabilities": {}}, 60.0)
        self.notify("initialized", {})

    def _read(self) -> None:
        out = self.proc.stdout
        assert out is not None
        while True:
            length = 0
            while True:
                line = out.readline()
                if not line:
                    return
                if line in (b"\r\n", b"\n"):
                    break
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":")[1])
            msg = json.loads(out.read(length))
            if "id" in msg and "method" not in msg:
                with self.arrived:
                    self.answers[int(msg["id"])] = msg
                    self.arrived.notify_all()

    def _send(self, msg: dict[str, object]) -> None:
        body = json.dumps(msg).encode()
        assert self.proc.stdin is not None
        self.proc.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        self.proc.stdin.flush()

    def notify(self, method: str, params: object) -> None:
        self._send({"jsonrpc": "2.0", "method": method, "params": params})

    def request(self, method: str, params: object, bound: float = BOUND_S) -> float:
        self.next_id += 1
        rid = self.next_id
        start = time.perf_counter()
        self._send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
        with self.arrived:
            if not self.arrived.wait_for(lambda: rid in self.answers, bound):
                alive = self.proc.poll() is None
                raise Failure(f"no answer to {method} within {bound:g} s"
                              + ("" if alive else " (the server exited)"))
            self.answers.pop(rid)
        return (time.perf_counter() - start) * 1e3

    def close(self) -> None:
        try:
            self.request("shutdown", None)
            self.notify("exit", None)
            self.proc.wait(10)
        except Exception:
            self.proc.kill()


def make_case_lsp(texts: list[str]) -> Callable[[random.Random], tuple[object, float]]:
    holder: dict[str, LspStream] = {}

    def case(rng: random.Random) -> tuple[object, float]:
        if "s" not in holder or holder["s"].proc.poll() is not None:
            holder["s"] = LspStream()
        s = holder["s"]
        uri = f"file:///fuzz/doc{rng.randrange(8)}.cake"
        text = mutate(rng, rng.choice(texts), rng.randrange(0, 6))
        s.notify("textDocument/didOpen", {"textDocument": {
            "uri": uri, "languageId": "cake", "version": 1, "text": text}})
        slowest = 0.0
        version = 1
        for _ in range(rng.randrange(1, 8)):
            kind = rng.random()
            line, col = rng.randrange(0, 200), rng.randrange(0, 120)
            pos = {"line": line, "character": col}
            if kind < 0.4:
                version += 1
                s.notify("textDocument/didChange", {
                    "textDocument": {"uri": uri, "version": version},
                    "contentChanges": [{"range": {"start": pos, "end": pos},
                                        "text": rng.choice(PIECES)}]})
                continue
            method = rng.choice(["textDocument/hover", "textDocument/completion",
                                 "textDocument/definition", "textDocument/codeAction",
                                 "cake/unknownRequest"])
            params: dict[str, object] = {"textDocument": {"uri": uri}, "position": pos}
            if method == "textDocument/codeAction":
                params = {"textDocument": {"uri": uri}, "range": {"start": pos, "end": pos},
                          "context": {"diagnostics": []}}
            slowest = max(slowest, s.request(method, params))
        s.notify("textDocument/didClose", {"textDocument": {"uri": uri}})
        return text, slowest
    def close() -> None:
        if "s" in holder:
            holder["s"].close()

    case.close = close  # type: ignore[attr-defined]
    return case


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
    ap.add_argument("--minutes", type=float, default=0.0, help="stop after this long "
                    "(overrides --seconds)")
    ap.add_argument("--parser-only", action="store_true",
                    help="only the parser kinds (no entry points, no language server)")
    ap.add_argument("--count", type=int, default=0, help="stop after this many cases (0: no cap)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--max-failures", type=int, default=20, help="stop after this many")
    args = ap.parse_args()
    if args.minutes:
        args.seconds = args.minutes * 60.0
    texts = kernels()
    modes = [Mode("text", case_text), Mode("bytes", case_bytes),
             Mode("mutate", make_case_mutate(texts)), Mode("edits", make_case_edits(texts)),
             Mode("deep", case_deep)]
    if not args.parser_only:
        modes += [Mode("pathological", case_pathological),
                  Mode("cli_mutate", make_case_cli_mutate(texts)),
                  Mode("lsp", make_case_lsp(texts)), Mode("bulk", case_bulk, every=50)]
    rng = random.Random(args.seed)
    started = time.monotonic()
    deadline = started + args.seconds
    total = failures = rounds = 0
    schedule: list[Mode] = []
    while time.monotonic() < deadline and (not args.count or total < args.count):
        if not schedule:
            schedule = [m for m in modes if rounds % m.every == 0]
            rounds += 1
        mode = schedule.pop(0)
        case_seed = rng.randrange(2**63)
        payload: object = None
        t0 = time.perf_counter()
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
                mode.cases += 1
                total += 1
                break
        finally:
            mode.seconds += time.perf_counter() - t0
        mode.cases += 1
        total += 1
    for m in modes:
        close = getattr(m.run, "close", None)
        if close is not None:
            close()
    elapsed = time.monotonic() - started
    print(f"\n{'kind':<14}{'cases':>9}{'failures':>10}{'cases/s':>10}{'slowest':>12}")
    print("-" * 55)
    for m in modes:
        rate = m.cases / m.seconds if m.seconds else 0.0
        print(f"{m.name:<14}{m.cases:>9}{m.failures:>10}{rate:>10.1f}"
              f"{m.slowest_ms:>9.1f} ms")
    print("-" * 55)
    print(f"{'total':<14}{total:>9}{failures:>10}{total / max(elapsed, 1e-9):>10.1f}")
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = RESULTS / "fuzz_long.json"
    out.write_text(json.dumps({
        "seed": args.seed, "seconds": args.seconds, "cases": total, "failures": failures,
        "cases_per_s": round(total / max(elapsed, 1e-9), 2),
        "kinds": [{"kind": m.name, "cases": m.cases, "failures": m.failures,
                   "cases_per_s": round(m.cases / m.seconds, 2) if m.seconds else 0.0,
                   "slowest_ms": round(m.slowest_ms, 2), "failing_inputs": m.examples}
                  for m in modes],
    }, indent=2) + "\n")
    print(f"\nwrote {out.relative_to(ROOT)}")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
