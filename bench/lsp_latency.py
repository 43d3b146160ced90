"""Language-server latency: didChange -> diagnostics, as an editor sees it.

A real client (pygls) starts `cake lsp` as a subprocess, opens a synthetic 200-line and a
2,000-line file (bench/_kernels.py), and sends single-character edits one after another,
each after the diagnostics of the previous one arrived.  The edits alternate between
inserting a character and deleting it again at spread-out places, so half the versions
hold an error (a syntax error or an unknown name) and half are clean, as when typing.

Two client profiles: push (the server publishes; VS Code-like capabilities) and pull
(the client requests `textDocument/diagnostic` right after each change; Neovim-like).
Latency is from sending didChange to having the diagnostics of that version; beside it,
the same edits checked in process (`compiler_*`: re-parse + check without the protocol)
show how much of it is the compiler and how much the server.  Memory is
the server's resident set size after 100 edits and at the end; `--long` adds a run of
10,000 edits on the 200-line file to show whether memory grows.

`--bursts N` measures fast typing instead: N bursts of 5 to 15 keystrokes, one every
`--gap-ms` (default 30 ms) without waiting for diagnostics, each burst typing a suffix onto
a name (an unknown-name error) and the next one erasing it (clean again), in push mode on
the 200-line file.  It reports the latency from the last keystroke of a burst to the
diagnostics of that version (p50/p95) and the stale publishes: diagnostics that arrive
for a version older than one the client has already sent, which the editor shows for a
moment over text they no longer match.  Beside them, the intermediate publishes:
diagnostics of a version that is not the last of its burst, stale or not (at a gap longer
than a check, each keystroke is checked and published while it is the newest).

Prints a table and writes bench/results/lsp_latency.json.
Targets: p95 <= 50 ms (200 lines) and <= 150 ms (2,000 lines).

    python bench/lsp_latency.py [--edits 200] [--lines 200 2000] [--long]
    python bench/lsp_latency.py --bursts 100 [--gap-ms 30]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _kernels import ROOT, synthetic
from lsprotocol import types as lsp
from pygls.lsp.client import LanguageClient

TARGET_P95_MS = {200: 50.0, 2000: 150.0}
RESULTS = ROOT / "bench" / "results" / "lsp_latency.json"
PUSH_CAPS = lsp.ClientCapabilities(
    text_document=lsp.TextDocumentClientCapabilities(
        publish_diagnostics=lsp.PublishDiagnosticsClientCapabilities(version_support=True)))
PULL_CAPS = lsp.ClientCapabilities(
    text_document=lsp.TextDocumentClientCapabilities(
        diagnostic=lsp.DiagnosticClientCapabilities()),
    general=lsp.GeneralClientCapabilities(position_encodings=[lsp.PositionEncodingKind.Utf8]))


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, round(q * (len(xs) - 1)))]


def rss_mb(pid: int) -> float | None:
    """Resident set size of a process (Linux /proc; None elsewhere)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


class Session:
    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.client = LanguageClient("cake-lsp-bench", "1")
        self.published: dict[tuple[str, int], asyncio.Future[list[lsp.Diagnostic]]] = {}
        self.versions: list[int] = []
        """The version of every publication, in order of arrival."""
        self.sent = 0
        """The newest version sent."""
        self.stale = 0
        """Publications that arrived when a newer version had already been sent."""
        published = self.published

        def on_publish(params: lsp.PublishDiagnosticsParams) -> None:
            self.versions.append(params.version or 0)
            self.stale += (params.version or 0) < self.sent
            fut = published.get((params.uri, params.version or 0))
            if fut is not None and not fut.done():
                fut.set_result(list(params.diagnostics))

        self.client.feature(lsp.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)(on_publish)

    async def start(self) -> None:
        await self.client.start_io(sys.executable, "-m", "cake_lsp")
        caps = PUSH_CAPS if self.mode == "push" else PULL_CAPS
        await self.client.initialize_async(lsp.InitializeParams(capabilities=caps,
                                                                root_uri=ROOT.as_uri()))
        self.client.initialized(lsp.InitializedParams())

    @property
    def pid(self) -> int:
        return self.client._server.pid  # type: ignore[union-attr]

    def expect(self, uri: str, version: int) -> asyncio.Future[list[lsp.Diagnostic]]:
        fut: asyncio.Future[list[lsp.Diagnostic]] = asyncio.get_running_loop().create_future()
        self.published[(uri, version)] = fut
        return fut

    async def diagnostics(self, uri: str, version: int,
                          pending: asyncio.Future[list[lsp.Diagnostic]] | None) -> list:
        if self.mode == "push":
            assert pending is not None
            result = await pending
            del self.published[(uri, version)]
            return result
        report = await self.client.text_document_diagnostic_async(
            lsp.DocumentDiagnosticParams(text_document=lsp.TextDocumentIdentifier(uri=uri)))
        return list(report.items)

    async def stop(self) -> None:
        await self.client.shutdown_async(None)
        self.client.exit(None)
        await self.client.stop()


def edit_plan(text: str, n: int) -> list[tuple[int, int, str]]:
    """(line, column, text): insert a character, then delete it, at spread-out lines.

    Columns are UTF-8 bytes and UTF-16 units at once: the synthetic files are ASCII.
    """
    lines = text.split("\n")
    code = [i for i, line in enumerate(lines) if line.strip() and not line.startswith("#")]
    plan = []
    for i in range(n // 2):
        line = code[(i * 7919) % len(code)]
        col = min(len(lines[line]), 4 + (i * 31) % max(1, len(lines[line]) - 3))
        plan.append((line, col, "x"))
        plan.append((line, col, ""))
    return plan


def compiler_share(lines: int, edits: int) -> dict[str, float]:
    """The same edits applied in process, checked as the server checks them (incremental
    re-parse, then the check with the per-kernel caches, no protocol): what the compiler
    costs, so that latency minus this is the server's own overhead.  The collector is
    handled as in the server (`cake_lsp/heap.py`)."""
    import gc

    from cake_core.plugins import load_config, load_plugins
    from cake_lsp.documents import CheckOptions, OpenDocument
    from cake_lsp.guard import PassGuard
    from cake_lsp.heap import Heap

    plugins = load_plugins(load_config(ROOT))
    kernel_passes, passes = PassGuard.from_plugins(plugins, {}).split(frozenset())
    options = CheckOptions(None, plugins, passes, 0, kernel_passes)
    text = synthetic(lines)
    doc = OpenDocument("file:///bench.cake", text, 1)
    heap = Heap()
    heap.started()
    doc.analyze(text, options)
    heap.checked()
    times = []
    for line, col, new in edit_plan(text, edits):
        lines_ = doc.text.split("\n")
        lines_[line] = lines_[line][:col] + new + lines_[line][col + (0 if new else 1):]
        t0 = time.perf_counter()
        doc.analyze("\n".join(lines_), options)
        times.append((time.perf_counter() - t0) * 1e3)
        heap.checked()
        doc.text = "\n".join(lines_)
    gc.unfreeze()
    return {"compiler_p50_ms": pct(times, 0.5), "compiler_p95_ms": pct(times, 0.95)}


async def run_case(lines: int, mode: str, edits: int) -> dict[str, object]:
    text = synthetic(lines)
    s = Session(mode)
    await s.start()
    uri = (ROOT / "bench" / "data" / f"lsp-{lines}.cake").as_uri()
    first = s.expect(uri, 1) if mode == "push" else None
    s.client.text_document_did_open(lsp.DidOpenTextDocumentParams(
        text_document=lsp.TextDocumentItem(uri=uri, language_id="cake", version=1, text=text)))
    await s.diagnostics(uri, 1, first)
    latencies: list[float] = []
    rss_100: float | None = None
    errors = 0
    for i, (line, col, new) in enumerate(edit_plan(text, edits)):
        version = i + 2
        start = lsp.Position(line=line, character=col)
        end = start if new else lsp.Position(line=line, character=col + 1)
        pending = s.expect(uri, version) if mode == "push" else None
        t0 = time.perf_counter()
        s.client.text_document_did_change(lsp.DidChangeTextDocumentParams(
            text_document=lsp.VersionedTextDocumentIdentifier(uri=uri, version=version),
            content_changes=[lsp.TextDocumentContentChangePartial(
                range=lsp.Range(start=start, end=end), text=new)]))
        diags = await s.diagnostics(uri, version, pending)
        latencies.append((time.perf_counter() - t0) * 1e3)
        errors += bool(diags)
        if i + 1 == 100:
            rss_100 = rss_mb(s.pid)
    rss_end = rss_mb(s.pid)
    await s.stop()
    p95 = pct(latencies, 0.95)
    target = TARGET_P95_MS.get(lines)
    return {
        "lines": text.count("\n"), "mode": mode, "edits": len(latencies),
        "versions_with_errors": errors,
        "p50_ms": pct(latencies, 0.5), "p95_ms": p95, "max_ms": max(latencies),
        "mean_ms": statistics.fmean(latencies),
        "rss_mb_after_100": rss_100, "rss_mb_at_end": rss_end,
        "target_p95_ms": target, "meets_target": None if target is None else p95 <= target,
        **compiler_share(lines, min(edits, 200)),
    }


def burst_plan(text: str, bursts: int) -> list[list[tuple[int, int, str]]]:
    """Bursts of keystrokes (line, column, text): odd bursts type a suffix of 5 to 15
    letters onto a name in a code line, even ones erase it again with backspaces."""
    lines = text.split("\n")
    spots = []
    for i, text_line in enumerate(lines):
        stripped = text_line.strip()
        if stripped and not stripped.startswith("#") and "=" in text_line:
            indent = len(text_line) - len(text_line.lstrip())
            spots.append((i, indent + len(stripped.split("=")[0].rstrip())))
    plan = []
    for b in range(bursts // 2):
        line, col = spots[(b * 7919) % len(spots)]
        n = 5 + (b * 7) % 11
        plan.append([(line, col + k, "abcdefghijklmno"[k]) for k in range(n)])
        plan.append([(line, col + n - 1 - k, "") for k in range(n)])
    return plan


async def run_bursts(lines: int, bursts: int, gap_ms: float) -> dict[str, object]:
    text = synthetic(lines)
    s = Session("push")
    await s.start()
    uri = (ROOT / "bench" / "data" / f"lsp-burst-{lines}.cake").as_uri()
    first = s.expect(uri, 1)
    s.client.text_document_did_open(lsp.DidOpenTextDocumentParams(
        text_document=lsp.TextDocumentItem(uri=uri, language_id="cake", version=1, text=text)))
    await s.diagnostics(uri, 1, first)
    version = 1
    latencies: list[float] = []
    last_of_burst: set[int] = {1}
    errors = 0
    for keys in burst_plan(text, bursts):
        pending = None
        for k, (line, col, new) in enumerate(keys):
            version += 1
            start = lsp.Position(line=line, character=col)
            end = start if new else lsp.Position(line=line, character=col + 1)
            if k == len(keys) - 1:
                pending = s.expect(uri, version)
                last_of_burst.add(version)
            t0 = time.perf_counter()
            s.sent = version
            s.client.text_document_did_change(lsp.DidChangeTextDocumentParams(
                text_document=lsp.VersionedTextDocumentIdentifier(uri=uri, version=version),
                content_changes=[lsp.TextDocumentContentChangePartial(
                    range=lsp.Range(start=start, end=end), text=new)]))
            if k < len(keys) - 1:
                await asyncio.sleep(gap_ms / 1e3)
        assert pending is not None
        diags = await s.diagnostics(uri, version, pending)
        latencies.append((time.perf_counter() - t0) * 1e3)
        errors += bool(diags)
        await asyncio.sleep(0.05)  # a pause between bursts; stale publishes still count
    rss_end = rss_mb(s.pid)
    await s.stop()
    intermediate = sum(v not in last_of_burst for v in s.versions)
    return {
        "lines": text.count("\n"), "mode": "burst", "bursts": len(latencies),
        "gap_ms": gap_ms, "keystrokes": version - 1, "bursts_with_errors": errors,
        "publishes": len(s.versions), "stale_publishes": s.stale,
        "intermediate_publishes": intermediate,
        "last_edit_p50_ms": pct(latencies, 0.5), "last_edit_p95_ms": pct(latencies, 0.95),
        "last_edit_max_ms": max(latencies), "rss_mb_at_end": rss_end,
        "target_p95_ms": 100.0, "meets_target": pct(latencies, 0.95) <= 100.0 and not s.stale,
    }


def fmt(x: object) -> str:
    if isinstance(x, float):
        return f"{x:8.1f}"
    return f"{x!s:>8}"


async def main_async(edits: int, long: bool,
                     sizes: tuple[int, ...] = (200, 2000)) -> dict[str, object]:
    rows = []
    for lines in sizes:
        for mode in ("push", "pull"):
            rows.append(await run_case(lines, mode, edits))
            print(f"  done: {lines} lines, {mode}", file=sys.stderr)
    if long:
        rows.append(await run_case(200, "push", 10_000))
    return {"edits": edits, "python": sys.version.split()[0], "rows": rows}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--edits", type=int, default=200, help="edits per file and mode")
    parser.add_argument("--long", action="store_true",
                        help="also 10,000 edits on the 200-line file (memory growth)")
    parser.add_argument("--bursts", type=int, default=0,
                        help="measure N bursts of fast typing instead (200 lines, push)")
    parser.add_argument("--gap-ms", type=float, default=30.0,
                        help="time between two keystrokes of a burst")
    parser.add_argument("--lines", type=int, nargs="+", default=[200, 2000],
                        help="file sizes to measure (lines)")
    args = parser.parse_args()
    if args.bursts:
        row = asyncio.run(run_bursts(200, args.bursts, args.gap_ms))
        print("\n".join(f"{k:>20} {fmt(v)}" for k, v in row.items()))
        out = RESULTS.with_name("lsp_bursts.json")
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(row, indent=2) + "\n")
        print(f"wrote {out.relative_to(ROOT)}")
        return
    report = asyncio.run(main_async(args.edits, args.long, tuple(args.lines)))
    cols = ["lines", "mode", "edits", "p50_ms", "p95_ms", "max_ms", "compiler_p50_ms",
            "compiler_p95_ms", "rss_mb_after_100", "rss_mb_at_end", "target_p95_ms",
            "meets_target"]
    print(" ".join(f"{c[:8]:>8}" for c in cols))
    for row in report["rows"]:  # type: ignore[union-attr]
        print(" ".join(fmt(row[c]) for c in cols))
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {RESULTS.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
