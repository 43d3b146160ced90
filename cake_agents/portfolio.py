"""Portfolio output: a dispatcher that picks the evolved kernel for a runtime shape.

The table (JSON) lists, per shape bucket, the winning kernel, the bucket's center (the
geometric mean of its shapes' dims) and the kernel's dim constraints (`multiple_of`,
`max`, and `equals` for a size the task fixes, such as a head dim).  `merge_tables` joins
the tables of a family of tasks (attention at head dims 64, 128 and 256) into one.  A
shape goes to the bucket whose center is nearest in log2 space whose kernel
admits it; the next nearest if it does not; -1 if none does.  `select` implements that
rule in Python and `dispatcher_cpp` emits the same rule as a host C++ function, so the two
can be tested against each other.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

SCHEMA = "cake.dispatch/1"


def constraints_of(text: str, kernel: str) -> dict[str, dict[str, int | None]]:
    """{dim: {"multiple_of": m, "max": x}} declared by `kernel` in `text`."""
    from cake_core.check import check_text

    res = check_text(text, "winner.cake")
    if res.program is None:
        return {}
    k = next((k for k in res.program.kernels if k.name == kernel), None)
    if k is None and len(res.program.kernels) == 1:
        k = res.program.kernels[0]
    if k is None:
        return {}
    return {name: {"multiple_of": int(d.multiple_of or 1), "max": d.max}
            for name, d in k.dims.items()}


def build_table(*, task: str, kernel: str, dims: Sequence[str],
                buckets: Sequence[Any], winners: Mapping[str, str],
                texts: Mapping[str, str], scores: Mapping[str, float | None],
                fixed: Mapping[str, int] | None = None) -> dict[str, Any]:
    """The dispatch table of one portfolio run.  A task's `fixed` sizes (attention's head
    dim) become dims of the table that each row admits only at its value, so tables of a
    family's tasks can be merged (`merge_tables`) into one dispatcher."""
    fixed = dict(fixed or {})
    rows = []
    for b in buckets:
        h = winners.get(b.key)
        if h is None:
            continue
        constraints: dict[str, dict[str, int | None]] = constraints_of(texts[h], kernel)
        constraints.update({d: {"equals": v} for d, v in fixed.items()})
        rows.append({"bucket": b.key, "shapes": list(b.shapes),
                     "center": {**{d: b.center.get(d, 1.0) for d in dims},
                                **{d: float(v) for d, v in fixed.items()}},
                     "kernel": h, "symbol": f"{kernel}_{h[:8]}",
                     "constraints": constraints, "score": scores.get(b.key)})
    return {"schema": SCHEMA, "task": task, "kernel": kernel,
            "dims": [*dims, *(d for d in fixed if d not in dims)], "buckets": rows}


class MergeError(ValueError):
    """Tables that cannot share one dispatcher."""


def merge_tables(tables: Sequence[Mapping[str, Any]], name: str) -> dict[str, Any]:
    """One table over several runs' rows: a family of tasks (one per head dim, say) that
    take the same dims.  Each row keeps its own constraints, so a row fixed to `D == 128`
    never serves another head dim; rows of one task keep their order."""
    if not tables:
        raise MergeError("no tables to merge")
    dims = list(tables[0]["dims"])
    rows: list[dict[str, Any]] = []
    symbols: set[str] = set()
    for t in tables:
        if t.get("schema") != SCHEMA:
            raise MergeError(f"table of {t.get('task')!r} is not {SCHEMA}")
        if sorted(t["dims"]) != sorted(dims):
            raise MergeError(f"{t['task']} dispatches on {', '.join(t['dims'])}, "
                             f"{tables[0]['task']} on {', '.join(dims)}: a merged "
                             "dispatcher needs the same dims (fixed sizes included)")
        for row in t["buckets"]:
            if row["symbol"] in symbols:
                continue  # the same kernel won in two runs
            symbols.add(row["symbol"])
            rows.append({**row, "task": t["task"]})
    return {"schema": SCHEMA, "task": name, "kernel": name, "dims": dims, "buckets": rows}


def _admits(row: Mapping[str, Any], shape: Mapping[str, int]) -> bool:
    for name, c in row.get("constraints", {}).items():
        v = shape.get(name)
        if v is None:
            continue
        if c.get("equals") is not None:
            if v != int(c["equals"]):
                return False
            continue
        if v % max(1, int(c.get("multiple_of") or 1)):
            return False
        if c.get("max") is not None and v > int(c["max"]):
            return False
    return True


def distance(row: Mapping[str, Any], shape: Mapping[str, int], dims: Sequence[str]) -> float:
    total = 0.0
    for d in dims:
        t = math.log2(max(int(shape[d]), 1)) - math.log2(max(float(row["center"][d]), 1.0))
        total += t * t
    return total


def select(table: Mapping[str, Any], shape: Mapping[str, int]) -> int:
    """Index of the bucket row that serves `shape`, or -1 if no kernel admits it."""
    dims = table["dims"]
    order = sorted(range(len(table["buckets"])),
                   key=lambda i: (distance(table["buckets"][i], shape, dims), i))
    for i in order:
        if _admits(table["buckets"][i], shape):
            return i
    return -1


def _ident(text: str) -> str:
    s = re.sub(r"[^A-Za-z0-9_]", "_", text)
    return s if s and not s[0].isdigit() else f"_{s}"


def dispatcher_cpp(table: Mapping[str, Any]) -> str:
    """A header with `select(dims...) -> int` and the kernel symbol of each variant."""
    dims = [_ident(d) for d in table["dims"]]
    rows = table["buckets"]
    n, nd = len(rows), len(dims)
    ns = _ident(f"cake_dispatch_{table['task']}")
    centers = ",\n      ".join(
        "{" + ", ".join(f"{math.log2(max(float(r['center'][d]), 1.0)):.17g}"
                        for d in table["dims"]) + "}" for r in rows)
    checks = []
    for i, r in enumerate(rows):
        conds = []
        for d in table["dims"]:
            c = r.get("constraints", {}).get(d)
            if not c:
                continue
            if c.get("equals") is not None:
                conds.append(f"{_ident(d)} == {int(c['equals'])}")
                continue
            if int(c.get("multiple_of") or 1) > 1:
                conds.append(f"{_ident(d)} % {int(c['multiple_of'])} == 0")
            if c.get("max") is not None:
                conds.append(f"{_ident(d)} <= {int(c['max'])}")
        checks.append(f"    case {i}: return {' && '.join(conds) if conds else 'true'};")
    names = ", ".join(f'"{r["symbol"]}"' for r in rows)
    params = ", ".join(f"int64_t {d}" for d in dims)
    args = ", ".join(dims)
    logs = ", ".join(f"std::log2(static_cast<double>({d} > 0 ? {d} : 1))" for d in dims)
    buckets_doc = "\n".join(f"//   {i}: {r['bucket']} -> {r['symbol']}"
                            for i, r in enumerate(rows))
    return f"""// Generated by cake (evolve --mode portfolio, runs dispatch): {table['task']}.
// Picks the kernel evolved for the shape bucket nearest to the runtime shape (squared
// distance of log2 dims to each bucket's center), skipping kernels whose dim constraints
// do not admit the shape; -1 when none does.
{buckets_doc}
#pragma once
#include <cmath>
#include <cstdint>

namespace {ns} {{

constexpr int kVariants = {n};

inline bool admits(int v, {params}) {{
  switch (v) {{
{chr(10).join(checks)}
    default: return false;
  }}
}}

inline int select({params}) {{
  static const double centers[{max(n, 1)}][{max(nd, 1)}] = {{
      {centers}}};
  const double x[{max(nd, 1)}] = {{{logs}}};
  bool used[{max(n, 1)}] = {{}};
  for (int round = 0; round < kVariants; ++round) {{
    int best = -1;
    double best_d = 0.0;
    for (int b = 0; b < kVariants; ++b) {{
      if (used[b]) continue;
      double d = 0.0;
      for (int i = 0; i < {nd}; ++i) {{
        const double t = x[i] - centers[b][i];
        d += t * t;
      }}
      if (best < 0 || d < best_d) {{
        best = b;
        best_d = d;
      }}
    }}
    used[best] = true;
    if (admits(best, {args})) return best;
  }}
  return -1;
}}

inline const char* kernel_symbol(int v) {{
  static const char* const names[] = {{{names}}};
  return (v >= 0 && v < kVariants) ? names[v] : nullptr;
}}

}}  // namespace {ns}
"""
