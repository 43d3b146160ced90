"""`cake runs report RUN`: one self-contained HTML page per run.

Inline CSS and inline SVG charts, no scripts and no external assets, so the file opens
in any browser, offline, and can be attached to an issue.  Charts: search progress over
time (every evaluation, and the best predicted speedup so far), the best kernel's
predicted (and, with a GPU, measured) speedup per shape, and failures by gate.  Every
string is escaped and scrubbed of secrets.
"""

from __future__ import annotations

import html
import json
import time
from collections import Counter
from pathlib import Path
from typing import Any

from cake_agents.redact import scrub
from cake_agents.store import RunsStore

W, H, PAD = 720, 260, 48
COLORS = {"pass": "#2b8a3e", "fail": "#c92a2a", "best": "#1c7ed6", "seed": "#868e96",
          "measured": "#e8590c"}


def esc(x: object) -> str:
    return html.escape(scrub(str(x)), quote=True)


def _scale(v: float, lo: float, hi: float, a: float, b: float) -> float:
    return a if hi <= lo else a + (v - lo) * (b - a) / (hi - lo)


def progress_chart(rows: list[dict[str, Any]]) -> str:
    """Every evaluation over time (dots: passing, crosses: failing) and the best so far."""
    if not rows:
        return "<p class=muted>No evaluations.</p>"
    t0 = rows[0]["time"]
    xs = [r["time"] - t0 for r in rows]
    ys = [r["score"] for r in rows if r["score"] is not None]
    bests = [r["best"] for r in rows if r["best"] is not None]
    lo = min([*ys, *bests, 1.0]) * 0.98
    hi = max([*ys, *bests, 1.0]) * 1.02
    xmax = max(xs) or 1.0
    parts = [f'<svg viewBox="0 0 {W} {H}" width="{W}" height="{H}" role="img" '
             'aria-label="search progress">',
             f'<line x1="{PAD}" y1="{H - PAD}" x2="{W - 10}" y2="{H - PAD}" class=axis />',
             f'<line x1="{PAD}" y1="10" x2="{PAD}" y2="{H - PAD}" class=axis />']
    for frac in (0, 0.5, 1):
        v = lo + frac * (hi - lo)
        y = _scale(v, lo, hi, H - PAD, 10)
        parts.append(f'<text x="{PAD - 6}" y="{y + 4:.1f}" text-anchor="end">{v:.3f}x</text>')
    parts.append(f'<text x="{W - 10}" y="{H - PAD + 30}" text-anchor="end">seconds since '
                 f'start ({xmax:.0f} s)</text>')
    one = _scale(1.0, lo, hi, H - PAD, 10)
    parts.append(f'<line x1="{PAD}" y1="{one:.1f}" x2="{W - 10}" y2="{one:.1f}" '
                 f'stroke="{COLORS["seed"]}" stroke-dasharray="4 3" />')
    path: list[str] = []
    for r, x in zip(rows, xs, strict=True):
        px = _scale(x, 0, xmax, PAD + 4, W - 14)
        if r["best"] is not None:
            py = _scale(r["best"], lo, hi, H - PAD, 10)
            path.append(f"{'M' if not path else 'L'}{px:.1f},{py:.1f}")
        title = f"<title>#{r['seq']} {esc(r['hash'][:10])} {esc(r['status'])} " \
                f"{esc(r['tactic'])}</title>"
        if r["status"] == "pass" and r["score"] is not None:
            py = _scale(r["score"], lo, hi, H - PAD, 10)
            parts.append(f'<circle cx="{px:.1f}" cy="{py:.1f}" r="3.5" '
                         f'fill="{COLORS["pass"]}">{title}</circle>')
        else:
            py = H - PAD - 6
            parts.append(f'<g stroke="{COLORS["fail"]}">{title}<line x1="{px - 3:.1f}" '
                         f'y1="{py - 3:.1f}" x2="{px + 3:.1f}" y2="{py + 3:.1f}"/>'
                         f'<line x1="{px - 3:.1f}" y1="{py + 3:.1f}" x2="{px + 3:.1f}" '
                         f'y2="{py - 3:.1f}"/></g>')
    if path:
        parts.append(f'<path d="{" ".join(path)}" fill="none" stroke="{COLORS["best"]}" '
                     'stroke-width="2" />')
    parts.append("</svg>")
    return "".join(parts)


def bar_chart(items: list[tuple[str, float, str]], *, unit: str = "", ref: float | None = None,
              empty: str = "nothing to show") -> str:
    """Horizontal bars: (label, value, color)."""
    if not items:
        return (f'<svg viewBox="0 0 {W} 40" width="{W}" height="40" role="img">'
                f'<text x="10" y="24">{esc(empty)}</text></svg>')
    row_h = 26
    h = row_h * len(items) + 30
    label_w = 230
    vmax = max([v for _, v, _ in items] + ([ref] if ref else [])) * 1.1 or 1.0
    parts = [f'<svg viewBox="0 0 {W} {h}" width="{W}" height="{h}" role="img">']
    for i, (label, v, color) in enumerate(items):
        y = 10 + i * row_h
        bw = _scale(v, 0, vmax, 0, W - label_w - 80)
        parts.append(f'<text x="{label_w - 8}" y="{y + 14}" text-anchor="end">'
                     f'{esc(label[:38])}</text>')
        parts.append(f'<rect x="{label_w}" y="{y}" width="{bw:.1f}" height="{row_h - 8}" '
                     f'fill="{color}"><title>{esc(label)}: {v:.4g}{esc(unit)}</title></rect>')
        parts.append(f'<text x="{label_w + bw + 6:.1f}" y="{y + 14}">{v:.3g}{esc(unit)}'
                     '</text>')
    if ref is not None:
        x = label_w + _scale(ref, 0, vmax, 0, W - label_w - 80)
        parts.append(f'<line x1="{x:.1f}" y1="4" x2="{x:.1f}" y2="{h - 20}" '
                     f'stroke="{COLORS["seed"]}" stroke-dasharray="4 3" />')
    parts.append("</svg>")
    return "".join(parts)


def _table(headers: list[str], rows: list[list[object]]) -> str:
    if not rows:
        return "<p class=muted>None.</p>"
    head = "".join(f"<th>{esc(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{esc(c)}</td>" for c in r) + "</tr>" for r in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _lineage(store: RunsStore, run_id: str, best: str) -> list[list[object]]:
    chain = []
    h = best
    seen: set[str] = set()
    results = {r["hash"]: r for r in store.evaluations(run_id) if r["gate"] == "_result"}
    while h and h not in seen:
        seen.add(h)
        c = store.candidate(run_id, h)
        if c is None:
            break
        chain.append([h[:10], c["tactic"], c["origin"], c["step"],
                      results.get(h, {}).get("status", "")])
        h = c["parent"]
    return list(reversed(chain))


def render_report(store: RunsStore, run_id: str) -> str:
    run = store.run(run_id)
    if run is None:
        raise KeyError(run_id)
    summary = run["summary"] or {}
    progress = store.progress(run_id)
    failures = store.failures(run_id)
    usage = store.usage(run_id)
    artifacts = store.artifacts(run_id)
    evals = {r["hash"]: r for r in store.evaluations(run_id) if r["gate"] == "_result"}
    best = summary.get("best_hash") or ""
    best_res = evals.get(best, {}).get("detail", {})
    cfg = run["config"]

    # per-shape speedups of the best kernel
    seed_res: dict[str, Any] = next(
        (r["detail"] for h, r in evals.items()
         if (store.candidate(run_id, h) or {}).get("origin") == "seed"), {})
    base = seed_res.get("times", {})
    shape_items = []
    for key, t in (best_res.get("times") or {}).items():
        if key in base and t > 0:
            shape_items.append((f"{key} predicted", base[key] / t, COLORS["best"]))
        measured = (best_res.get("measured") or {}).get(key)
        seed_measured = (seed_res.get("measured") or {}).get(key)
        if measured and seed_measured:
            shape_items.append((f"{key} measured", seed_measured / measured,
                                COLORS["measured"]))

    by_gate = Counter(f["gate"] for f in failures)
    gate_items = [(g, float(n), COLORS["fail"]) for g, n in by_gate.most_common()]
    sigs = Counter((f["gate"], f["code"], f["construct"] or f["norm_message"]) for f in failures)
    sig_rows = [[n, g, c, s] for (g, c, s), n in sigs.most_common(15)]
    skipped = Counter(g for r in store.evaluations(run_id)
                      if r["gate"] != "_result" and str(r["status"]).startswith("skipped")
                      for g in [r["gate"]])
    per_node: dict[str, list[float]] = {}
    for u in usage:
        slot = per_node.setdefault(u["node"], [0, 0, 0, 0.0, 0])
        slot[0] += 1
        slot[1] += u["tokens_in"]
        slot[2] += u["tokens_out"]
        slot[3] += u["usd"]
        slot[4] += 0 if u["ok"] else 1
    usage_rows = [[n, int(v[0]), int(v[1]), int(v[2]), f"${v[3]:.4f}", int(v[4])]
                  for n, v in sorted(per_node.items())]
    best_text = artifacts.get("best.cake") or (store.candidate_text(run_id, best) or "")
    created = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(run["created"]))
    score = summary.get("best_score")
    cards = [("evaluations", summary.get("evals", 0)),
             ("candidates", summary.get("proposed", 0)),
             ("best predicted speedup", f"{score:.3f}x" if score else "-"),
             ("tokens", int(summary.get("usage", {}).get("tokens_in", 0)
                            + summary.get("usage", {}).get("tokens_out", 0))),
             ("cost", f"${summary.get('usage', {}).get('usd', 0.0):.4f}")]
    card_html = "".join(f"<div class=card><div class=v>{esc(v)}</div><div class=k>{esc(k)}"
                        "</div></div>" for k, v in cards)
    dispatch = ""
    if "dispatch.json" in artifacts:
        table = json.loads(artifacts["dispatch.json"])
        rows = [[r["bucket"], r["symbol"], ", ".join(r["shapes"]),
                 f"{r['score']:.3f}x" if r.get("score") else "-"] for r in table["buckets"]]
        dispatch = ("<h2>Portfolio dispatcher</h2>"
                    + _table(["bucket", "kernel", "shapes", "bucket speedup"], rows)
                    + "<details><summary>dispatch.hpp</summary><pre>"
                    + esc(artifacts.get("dispatch.hpp", "")) + "</pre></details>")
    measured_note = (", and measured on the GPU" if any("measured" in i[0] for i in shape_items)
                     else " (no GPU measurements in this run)")
    gates_note = ", ".join(f"{g} ({n} candidates)" for g, n in skipped.items())
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<title>cake evolve {esc(run_id)}</title>
<style>
body {{ font: 14px/1.45 system-ui, sans-serif; margin: 2em auto; max-width: 900px;
       color: #212529; padding: 0 1em; }}
h1 {{ font-size: 1.4em; }} h2 {{ font-size: 1.15em; margin-top: 1.8em; }}
.muted {{ color: #868e96; }}
.cards {{ display: flex; gap: .8em; flex-wrap: wrap; }}
.card {{ border: 1px solid #dee2e6; border-radius: 6px; padding: .6em 1em; min-width: 8em; }}
.card .v {{ font-size: 1.3em; font-weight: 600; }} .card .k {{ color: #868e96; }}
table {{ border-collapse: collapse; margin: .5em 0; }}
td, th {{ border-bottom: 1px solid #dee2e6; padding: .25em .7em; text-align: left;
          vertical-align: top; }}
pre {{ background: #f8f9fa; padding: 1em; overflow-x: auto; font-size: 12px; }}
svg text {{ font: 11px system-ui, sans-serif; fill: #495057; }}
svg .axis {{ stroke: #adb5bd; }}
</style></head><body>
<h1>cake evolve: {esc(run["task"])} <span class=muted>({esc(run["mode"])},
{esc(run["model"] or "offline policy")})</span></h1>
<p>Run <code>{esc(run_id)}</code>, started {esc(created)}; status <b>{esc(run["status"])}</b>
{("&mdash; " + esc(run["stop_reason"])) if run["stop_reason"] else ""}.
Seed RNG {esc(run["seed_rng"])}; budgets: evaluations {esc(cfg.get("budget_evals") or "default")},
tokens {esc(cfg.get("budget_tokens") or "-")}, dollars {esc(cfg.get("budget_usd") or "-")}.</p>
<div class=cards>{card_html}</div>
<h2>Search progress</h2>
<p class=muted>Each evaluation over time (dots pass every gate, crosses failed one); the line
is the best predicted speedup over the seed so far (dashed: the seed).</p>
{progress_chart(progress)}
<h2>Best kernel per shape</h2>
<p class=muted>Speedup over the seed kernel: predicted by the cost model{measured_note}.</p>
{bar_chart(shape_items, unit="x", ref=1.0, empty="no passing kernel")}
<h2>Failures by gate</h2>
{bar_chart(gate_items, empty="no failures")}
{_table(["count", "gate", "code", "construct / message"], sig_rows)}
<p class=muted>Gates skipped as not available: {esc(gates_note or "none")}.</p>
<h2>Best kernel <code>{esc(best[:10])}</code></h2>
{_table(["candidate", "tactic", "written by", "generation", "gates"],
        _lineage(store, run_id, best))}
<details><summary>kernel text</summary><pre>{esc(best_text)}</pre></details>
{dispatch}
<h2>Model usage</h2>
{_table(["node", "calls", "tokens in", "tokens out", "cost", "failed"], usage_rows)}
</body></html>
"""


def write_report(store: RunsStore, run_id: str, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_report(store, run_id), encoding="utf-8")
    return path


