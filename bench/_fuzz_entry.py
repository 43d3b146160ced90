"""Entry-point fuzzing for bench/fuzz_long.py: the CLI commands and the language server,
each in a supervised process, so a hang or a runaway allocation is a failure of its class
and not the end of the run.

The parser modes of fuzz_long run in-process, but a `cake check` that loops or allocates
for ever would take the whole run with it.  So every CLI case goes to a long-lived worker
process that runs the command in-process with Click's runner under an address-space
limit (`MEM_BOUND_MB`), and the parent waits no longer than `BOUND_S` for its answer; a
worker that overruns is killed, its case recorded, and a fresh worker started.  Starting
one process per case would spend most of an hour importing.

The language server is a real `cake lsp` process fed raw JSON-RPC: random edit streams
interleaved with requests at random (often out-of-range) positions, malformed JSON, a
Content-Length that does not match its body, unknown methods and changes to documents that
were never opened.  After each stream the server must answer a hover within `BOUND_S`, must
not have printed a traceback, and must stay under `LSP_RSS_BOUND_MB`.

Failure classes: `traceback` (an exception reached the user), `internal` (a CK9xx finding
or "internal error"), `exit` (an exit status other than 0/1, or 2 without a usage message),
`hang` (no answer within the bound), `memory` (MemoryError under the limit, or RSS past it),
`crash` (the process died).
"""

from __future__ import annotations

import base64
import json
import os
import random
import resource
import select
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BOUND_S = 20.0
"""Per case.  Every pathological input of tests/test_entry_fuzz.py answers in under
2.2 s on a quiet machine; the rest is room for a machine busy with other work."""
EMULATE_BOUND_S = 360.0
"""`run --emulate` compiles the lowered CUDA with the host C++ compiler (5-10 s quiet) and
then runs it under the runner's own per-shape limit (`EMULATE_TIMEOUT`, 300 s), which a
kernel with a long empty loop reaches: the emulated threads really run it."""
MEM_BOUND_MB = 6144
"""Address space of a CLI worker (virtual, so above its RSS: thread stacks and the
imported libraries reserve more than they touch)."""
LSP_RSS_BOUND_MB = 600
EMULATE_EVERY = 10
"""Emulation compiles C++ per kernel (seconds); one case in this many is an emulation."""

COMMANDS: dict[str, Callable[[str], list[str]]] = {
    "check": lambda f: ["check", "--no-color", f],
    "lower": lambda f: ["lower", "--no-color", "-o", f + ".cu", f],
    "cost": lambda f: ["cost", "-d", "M=4096,N=4096,K=4096", f],
    "sim": lambda f: ["run", "--sim", "--task", "gemm_f16_sm80", "--dims", "M=64,N=64,K=64",
                      "--schedules", "1", f],
    "emulate": lambda f: ["run", "--emulate", "--task", "gemm_f16_sm80",
                          "--dims", "M=64,N=64,K=64", "--order", "lazy", f],
}

TOKENS = ["(", ")", "[", "]", ":", ",", ".", "=", "+", "*", "**", "//", "-", "\n", "    ",
          "0", "1", "7", "64", "10**12", "2**40", "10**400", "-1", "range(", "for ", "if ",
          "with ", "role(", "smem(", "fragment(", "wgmma(", "mbarrier(", "pipeline(",
          "barrier_sync(", "tma_load(", "cp_async(", "elect_one()", "lane.id", "warp.rank",
          "\x00", "\ufeff", "\r\n", "\r", "é", "'", '"', "#", "@kernel", "def ", "pass"]

SMALL_KERNEL = '@kernel(arch="sm_80", grid=(1,), warps=4)\ndef k{i}():\n    pass\n'


def examples() -> list[bytes]:
    return [p.read_bytes() for p in sorted((ROOT / "examples").glob("*.cake"))]


def mutate(rng: random.Random, text: str, edits: int) -> str:
    for _ in range(edits):
        pos = rng.randrange(len(text) + 1)
        piece = rng.choice(TOKENS)
        kind = rng.random()
        if kind < 0.4:
            text = text[:pos] + piece + text[pos:]
        elif kind < 0.7:
            text = text[:pos] + text[pos + rng.randint(1, 12):]
        else:
            text = text[:pos] + piece + text[pos + len(piece):]
    return text


REGRESSIONS = [p.read_bytes()
               for p in sorted((ROOT / "tests" / "data" / "fuzz_regressions").glob("*.cake"))]
"""Every crash or hang the fuzzers found, kept as a test and replayed here too."""


def pathological(rng: random.Random, seeds: list[bytes]) -> bytes:
    """One input from the families that once hung, crashed or grew without bound."""
    if REGRESSIONS and rng.random() < 0.15:
        return rng.choice(REGRESSIONS)
    base = rng.choice(seeds)
    n = rng.choice([10, 100, 1000, 5000])
    trips = rng.choice(["10**12", "2**62", "10**400", "-1"])
    loop = f"    for q in range({trips}):\n        pass\n"
    constant = rng.choice(["10**10**10", "2**2**2**2**2", "10**400", "-(10**400)", "1 << 10**9"])
    shapes: list[bytes] = [
        f"X = {constant}\n".encode(),
        b"X = " + b"(" * n + b"1" + b")" * n + b"\n",
        b"X = " + b" + ".join([b"1"] * n) + b"\n",
        b"X = 2\n" + b"".join(f"X{i} = X{i - 1 if i else ''} * X{i - 1 if i else ''}\n".encode()
                             for i in range(rng.choice([20, 40, 64]))),
        base.replace(b"STAGES = 3", b"STAGES = " + rng.choice([b"2**40", b"10**12", b"0", b"-3"])),
        base.replace(b"\n    with role(", b"\n" + loop.encode() + b"    with role(", 1),
        "".join(SMALL_KERNEL.format(i=i) for i in range(rng.choice([10, 1000, 10_000]))).encode(),
        base.replace(b"\n", b"\r\n"),
        base.replace(b"\n", b"\r"),
        b"\xef\xbb\xbf" + base,
        base[: rng.randrange(len(base) + 1)] + b"\x00" + base[rng.randrange(len(base) + 1):],
        base[: rng.randrange(len(base) + 1)] + bytes([rng.randrange(0x80, 0x100)]) * 3,
    ]
    return rng.choice(shapes)


def entry_case(rng: random.Random, seeds: list[bytes]) -> bytes:
    if rng.random() < 0.3:
        return pathological(rng, seeds)
    text = rng.choice(seeds).decode("utf-8", "surrogateescape")
    return mutate(rng, text, rng.randint(1, 6)).encode("utf-8", "surrogateescape")


@dataclass
class Verdict:
    """What one case gave: `failure` is a class name, or None when the answer was good."""

    failure: str | None
    detail: str
    ms: float
    rss_mb: float


def judge(answer: dict[str, object]) -> str | None:
    out = str(answer.get("out", ""))
    exc = answer.get("exception")
    code = answer.get("exit")
    if exc == "MemoryError":
        return "memory"
    if exc is not None or "Traceback" in out:
        return "traceback"
    if "internal error" in out or "CK9" in out:
        return "internal"
    if code not in (0, 1, 2):
        return "exit"
    if code == 2 and "Error:" not in out and "fix them before" not in out and "cake:" not in out:
        return "exit"
    return None


def rss_mb(pid: int, field: str = "VmRSS") -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


class CliWorker:
    """A `cake` process that answers one JSON case per line until it is killed."""

    def __init__(self) -> None:
        self.proc: subprocess.Popen[bytes] | None = None
        self.folder = Path(tempfile.mkdtemp(prefix="cake-fuzz-"))

    def _start(self) -> subprocess.Popen[bytes]:
        path = os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
        env = {**os.environ, "PYTHONPATH": path}
        return subprocess.Popen([sys.executable, str(Path(__file__)), "--worker", str(self.folder)],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, env=env, cwd=self.folder)

    def run(self, command: str, data: bytes) -> Verdict:
        if self.proc is None or self.proc.poll() is not None:
            self.proc = self._start()
        proc = self.proc
        assert proc.stdin is not None and proc.stdout is not None
        line = json.dumps({"command": command, "data": base64.b64encode(data).decode()})
        start = time.perf_counter()
        try:
            proc.stdin.write(line.encode() + b"\n")
            proc.stdin.flush()
        except BrokenPipeError:
            self.stop()
            return Verdict("crash", "the worker died before the case", 0.0, 0.0)
        bound = EMULATE_BOUND_S if command == "emulate" else BOUND_S
        ready, _, _ = select.select([proc.stdout], [], [], bound + 30.0)  # + import time
        took = (time.perf_counter() - start) * 1e3
        if not ready:
            peak = rss_mb(proc.pid, "VmHWM")
            self.stop()
            return Verdict("hang", f"no answer within {bound:.0f} s", took, peak)
        raw = proc.stdout.readline()
        if not raw:
            code = proc.wait()
            self.stop()
            return Verdict("memory" if code in (-9, 137) else "crash",
                           f"the worker died (status {code})", took, 0.0)
        answer = json.loads(raw)
        ms = float(answer["ms"])
        failure = judge(answer)
        if failure is None and ms > bound * 1e3:
            failure = "hang"
        return Verdict(failure, str(answer.get("out", ""))[-1500:], ms, float(answer["rss_mb"]))

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc = None

    def close(self) -> None:
        self.stop()
        shutil.rmtree(self.folder, ignore_errors=True)


def worker(folder: str) -> None:
    """The worker's loop: read a case, run the command in-process, answer with a verdict."""
    resource.setrlimit(resource.RLIMIT_AS, (MEM_BOUND_MB << 20, MEM_BOUND_MB << 20))
    from click.testing import CliRunner

    from cake_cli.main import main as cake

    answers = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # anything else written to fd 1 (a compiler's output) must not corrupt answers
    path = Path(folder) / "fuzz.cake"
    for line in sys.stdin:
        case = json.loads(line)
        path.write_bytes(base64.b64decode(case["data"]))
        start = time.perf_counter()
        exception: str | None = None
        try:
            res = CliRunner().invoke(cake, COMMANDS[case["command"]](str(path)))
            out, code = res.output, res.exit_code
            if res.exception is not None and not isinstance(res.exception, SystemExit):
                exception = type(res.exception).__name__
        except MemoryError:
            out, code, exception = "", -1, "MemoryError"
        ms = (time.perf_counter() - start) * 1e3
        answers.write(json.dumps({"exit": code, "out": out[-4000:], "exception": exception,
                                  "ms": ms, "rss_mb": rss_mb(os.getpid(), "VmHWM")}) + "\n")
        answers.flush()


# ---------------------------------------------------------------------------------------
# The language server


def frame(body: bytes, length: int | None = None) -> bytes:
    return f"Content-Length: {len(body) if length is None else length}\r\n\r\n".encode() + body


def message(obj: dict[str, object]) -> bytes:
    return frame(json.dumps(obj).encode())


class LspProbe:
    """A `cake lsp` over stdio, fed random streams; restarted after a failure."""

    def __init__(self) -> None:
        self.proc: subprocess.Popen[bytes] | None = None
        self.next_id = 1
        self.buffer = b""
        self.errfile = tempfile.TemporaryFile()  # noqa: SIM115 (lives as long as the probe)

    def _start(self) -> None:
        self.errfile.seek(0)
        self.errfile.truncate()
        self.proc = subprocess.Popen([sys.executable, "-m", "cake", "lsp"], cwd=ROOT,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self.errfile)
        self.buffer = b""
        self.request("initialize", {"processId": os.getpid(), "rootUri": None,
                                    "capabilities": {}}, wait=60.0)
        self.notify("initialized", {})

    def send(self, raw: bytes) -> None:
        assert self.proc is not None and self.proc.stdin is not None
        self.proc.stdin.write(raw)
        self.proc.stdin.flush()

    def notify(self, method: str, params: object) -> None:
        self.send(message({"jsonrpc": "2.0", "method": method, "params": params}))

    def request(self, method: str, params: object, wait: float | None = None) -> object:
        """Send a request; with `wait`, read until its answer (None on timeout)."""
        rid = self.next_id
        self.next_id += 1
        self.send(message({"jsonrpc": "2.0", "id": rid, "method": method, "params": params}))
        if wait is None:
            return None
        return self.answer(rid, wait)

    def answer(self, rid: int, wait: float) -> object:
        assert self.proc is not None and self.proc.stdout is not None
        deadline = time.monotonic() + wait
        fd = self.proc.stdout.fileno()
        while True:
            while b"\r\n\r\n" in self.buffer:
                head, _, rest = self.buffer.partition(b"\r\n\r\n")
                length = next(int(h.split(b":")[1]) for h in head.split(b"\r\n")
                              if h.lower().startswith(b"content-length"))
                if len(rest) < length:
                    break
                body, self.buffer = rest[:length], rest[length:]
                msg = json.loads(body)
                if msg.get("id") == rid and "method" not in msg:
                    return msg
                if "method" in msg and "id" in msg:  # a request from the server: answer it
                    self.send(message({"jsonrpc": "2.0", "id": msg["id"], "result": None}))
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            ready, _, _ = select.select([fd], [], [], left)
            if not ready:
                return None
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                return None
            self.buffer += chunk

    def stream(self, rng: random.Random, seeds: list[bytes]) -> Verdict:
        """One random session on one document; the verdict of the server after it."""
        if self.proc is None or self.proc.poll() is not None:
            self._start()
        assert self.proc is not None
        uri = f"file:///fuzz/doc{self.next_id}.cake"
        text = rng.choice(seeds).decode("utf-8", "replace")
        version = 1
        self.notify("textDocument/didOpen", {"textDocument": {
            "uri": uri, "languageId": "cake", "version": version, "text": text}})
        start = time.perf_counter()
        for _ in range(rng.randint(10, 60)):
            version += 1
            self.one(rng, uri, text, version)
            if rng.random() < 0.5:
                lines = text.split("\n")
                line = rng.randrange(len(lines) + 2)
                col = rng.randrange(200)
                new = rng.choice(TOKENS)
                self.notify("textDocument/didChange", {
                    "textDocument": {"uri": uri, "version": version},
                    "contentChanges": [{"range": {"start": {"line": line, "character": col},
                                                  "end": {"line": line, "character": col}},
                                        "text": new}]})
                if line < len(lines):
                    cut = min(col, len(lines[line]))
                    lines[line] = lines[line][:cut] + new + lines[line][cut:]
                    text = "\n".join(lines)
        alive = self.request("textDocument/hover", {"textDocument": {"uri": uri},
                                                    "position": {"line": 0, "character": 0}},
                             wait=BOUND_S)
        took = (time.perf_counter() - start) * 1e3
        peak = rss_mb(self.proc.pid)
        self.notify("textDocument/didClose", {"textDocument": {"uri": uri}})
        self.errfile.seek(0)
        err = self.errfile.read().decode("utf-8", "replace")
        if self.proc.poll() is not None:
            return self.fail("crash", f"the server exited ({self.proc.returncode}): {err[-800:]}",
                             took, peak)
        if alive is None:
            return self.fail("hang", f"no hover answer within {BOUND_S:.0f} s", took, peak)
        if "Traceback" in err:
            return self.fail("traceback", err[-1500:], took, peak)
        if peak > LSP_RSS_BOUND_MB:
            return self.fail("memory", f"RSS {peak:.0f} MB", took, peak)
        return Verdict(None, "", took, peak)

    def one(self, rng: random.Random, uri: str, text: str, version: int) -> None:
        """One random message: a request at a random position, or something malformed."""
        line, col = rng.randrange(text.count("\n") + 5), rng.randrange(120)
        pos = {"line": line, "character": col}
        doc = {"uri": uri if rng.random() < 0.9 else "file:///fuzz/never-opened.cake"}
        kind = rng.random()
        if kind < 0.45:
            method = rng.choice(["textDocument/hover", "textDocument/completion",
                                 "textDocument/signatureHelp", "textDocument/definition",
                                 "textDocument/documentHighlight", "textDocument/references"])
            params: dict[str, object] = {"textDocument": doc, "position": pos}
            if method == "textDocument/references":
                params["context"] = {"includeDeclaration": True}
            self.request(method, params)
        elif kind < 0.6:
            rng_range = {"start": pos, "end": {"line": line + rng.randrange(3), "character": 0}}
            self.request("textDocument/codeAction", {"textDocument": doc, "range": rng_range,
                                                     "context": {"diagnostics": []}})
        elif kind < 0.7:
            self.request(rng.choice(["textDocument/semanticTokens/full",
                                     "textDocument/documentSymbol", "textDocument/diagnostic"]),
                         {"textDocument": doc})
        elif kind < 0.75:
            self.request("textDocument/inlayHint", {"textDocument": doc, "range": {
                "start": {"line": 0, "character": 0}, "end": pos}})
        elif kind < 0.8:
            self.request(f"cake/unknown{rng.randrange(9)}", {"x": 1})
        elif kind < 0.85:
            self.notify("textDocument/didChange", {
                "textDocument": {"uri": "file:///fuzz/never-opened.cake", "version": version},
                "contentChanges": [{"text": "x = 1\n"}]})
        elif kind < 0.9:
            self.send(frame(b'{"jsonrpc": "2.0", "id": 999999, "method": "textDocument/hover", '))
        elif kind < 0.95:
            self.request("textDocument/hover", {"textDocument": doc, "position": {
                "line": rng.choice([-1, 2**31, "x", None]), "character": -5}})
        else:  # a frame whose Content-Length is short: the rest of its body is junk
            body = json.dumps({"jsonrpc": "2.0", "method": "$/noop", "params": {}}).encode()
            self.send(frame(body, max(0, len(body) - rng.randint(1, 10))))

    def fail(self, failure: str, detail: str, took: float, peak: float) -> Verdict:
        self.stop()
        return Verdict(failure, detail, took, peak)

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc = None

    def close(self) -> None:
        self.stop()
        self.errfile.close()


if __name__ == "__main__" and len(sys.argv) == 3 and sys.argv[1] == "--worker":
    worker(sys.argv[2])
