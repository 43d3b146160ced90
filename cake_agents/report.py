"""`cake runs report RUN`: one self-contained HTML page per run.

Inline CSS and inline SVG charts, no scripts and no external assets, so the file opens
in any browser, offline, and can be attached to an issue.  Charts: search progress over
time (every evaluation, and the best predicted speedup so far), the best kernel's
predicted (and, with a GPU, measured) speedup per shape, and failures by gate.  Every kept
candidate is listed with its rationale, a chain's steps or a model's stated intent, and its
diffs against its parent and the seed (`observe.py`), in closed `<details>` blocks.

The page is a Jinja2 template (templates/report.html.j2, shipped as package data) rather
than f-strings: the markup reads as markup, and escaping is the engine's default
(autoescape) instead of an `esc()` call that every interpolation had to remember.  Every
value the template prints also passes through `scrub` (the environment's `finalize`), so
secrets stay out whichever field they hide in.  This module computes the numbers (chart
geometry, tables); the template only lays them out.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from functools import cache
from pathlib import Path
from typing import Any

import jinja2
from markupsafe import Markup

from cake_agents.observe import kept
from cake_agents.redact import scrub
from cake_agents.store import RunsStore

W, H, PAD = 720, 260, 48
COLORS = {"pass": "#2b8a3e", "fail": "#c92a2a", "best": "#1c7ed6", "seed": "#868e96",
          "measured": "#e8590c"}


def _scrubbed(value: object) -> object:
    """Every printed value, scrubbed of secrets; markup the template built stays as is."""
    return value if isinstance(value, Markup) else scrub(str(value))


@cache
def _template() -> jinja2.Template:
    env = jinja2.Environment(loader=jinja2.PackageLoader("cake_agents", "templates"),
                             autoescape=True, finalize=_scrubbed, keep_trailing_newline=True)
    env.globals.update(W=W, H=H, PAD=PAD, COLORS=COLORS, diff_lines=diff_lines)
    return env.get_template("report.html.j2")


def diff_lines(diff: str) -> list[tuple[str, str]]:
    """A unified diff's lines with the class that colours them."""
    out = []
    for line in diff.splitlines():
        cls = ("hunk" if line.startswith("@@") else "" if line.startswith(("+++", "---"))
               else "add" if line.startswith("+") else "del" if line.startswith("-") else "")
        out.append((cls, line))
    return out


def _scale(v: float, lo: float, hi: float, a: float, b: float) -> float:
    return a if hi <= lo else a + (v - lo) * (b - a) / (hi - lo)


def progress_chart(rows: list[dict[str, Any]]) -> dict[str, Any] | None:
    """Geometry of every evaluation over time (passing or failing) and the best so far."""
    if not rows:
        return None
    t0 = rows[0]["time"]
    xs = [r["time"] - t0 for r in rows]
    ys = [r["score"] for r in rows if r["score"] is not None]
    bests = [r["best"] for r in rows if r["best"] is not None]
    lo = min([*ys, *bests, 1.0]) * 0.98
    hi = max([*ys, *bests, 1.0]) * 1.02
    xmax = max(xs) or 1.0
    ticks = [(_scale(v, lo, hi, H - PAD, 10), v)
             for v in (lo + frac * (hi - lo) for frac in (0, 0.5, 1))]
    path: list[str] = []
    points = []
    for r, x in zip(rows, xs, strict=True):
        px = _scale(x, 0, xmax, PAD + 4, W - 14)
        if r["best"] is not None:
            py = _scale(r["best"], lo, hi, H - PAD, 10)
            path.append(f"{'M' if not path else 'L'}{px:.1f},{py:.1f}")
        passed = r["status"] == "pass" and r["score"] is not None
        points.append({"x": px, "y": _scale(r["score"], lo, hi, H - PAD, 10) if passed
                       else H - PAD - 6, "passed": passed, "seq": r["seq"],
                       "hash": r["hash"], "status": r["status"], "tactic": r["tactic"]})
    return {"ticks": ticks, "xmax": xmax, "one": _scale(1.0, lo, hi, H - PAD, 10),
            "points": points, "path": " ".join(path)}


def bar_chart(items: list[tuple[str, float, str]], *, unit: str = "",
              ref: float | None = None) -> dict[str, Any] | None:
    """Geometry of horizontal bars: (label, value, color)."""
    if not items:
        return None
    row_h = 26
    label_w = 230
    vmax = max([v for _, v, _ in items] + ([ref] if ref else [])) * 1.1 or 1.0
    bars = [{"y": 10 + i * row_h, "label": label, "value": v, "color": color,
             "width": _scale(v, 0, vmax, 0, W - label_w - 80)}
            for i, (label, v, color) in enumerate(items)]
    return {"bars": bars, "height": row_h * len(items) + 30, "label_w": label_w,
            "bar_h": row_h - 8, "unit": unit,
            "ref_x": None if ref is None else label_w + _scale(ref, 0, vmax, 0,
                                                                W - label_w - 80)}


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
    dispatch = None
    if "dispatch.json" in artifacts:
        table = json.loads(artifacts["dispatch.json"])
        dispatch = {"rows": [[r["bucket"], r["symbol"], ", ".join(r["shapes"]),
                              f"{r['score']:.3f}x" if r.get("score") else "-"]
                             for r in table["buckets"]],
                    "header": artifacts.get("dispatch.hpp", "")}
    measured_note = (", and measured on the GPU" if any("measured" in i[0] for i in shape_items)
                     else " (no GPU measurements in this run)")
    return _template().render(
        run_id=run_id, run=run, cfg=cfg, created=created, cards=cards,
        progress=progress_chart(progress), measured_note=measured_note,
        shapes=bar_chart(shape_items, unit="x", ref=1.0), gates=bar_chart(gate_items),
        signatures=sig_rows, gates_note=", ".join(f"{g} ({n} candidates)"
                                                  for g, n in skipped.items()),
        best=best, lineage=_lineage(store, run_id, best), best_text=best_text,
        dispatch=dispatch, usage_rows=usage_rows, kept=kept(store, run_id))


def write_report(store: RunsStore, run_id: str, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_report(store, run_id), encoding="utf-8")
    return path


