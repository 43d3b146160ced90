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

Prints a table and writes bench/results/lsp_latency.json.
Targets: p95 <= 50 ms (200 lines) and <= 150 ms (2,000 lines).

    python bench/lsp_latency.py [--edits 200] [--long]
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
        published = self.published

        def on_publish(params: lsp.PublishDiagnosticsParams) -> None:
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


def fmt(x: object) -> str:
    if isinstance(x, float):
        return f"{x:8.1f}"
    return f"{x!s:>8}"


async def main_async(edits: int, long: bool) -> dict[str, object]:
    rows = []
    for lines in (200, 2000):
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
    args = parser.parse_args()
    report = asyncio.run(main_async(args.edits, args.long))
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
