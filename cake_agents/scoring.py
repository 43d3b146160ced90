"""Scores: per-shape speedups, shape buckets, and the weighted geometric mean.

A kernel is judged on the task's weighted GPU shapes.  Each shape contributes its speedup
over the seed kernel, `seed_time / max(time, floor)`, where the floor is the roofline time
of that shape (the seed's: a property of the problem, not of the candidate) and the
speedup is capped at `SPEEDUP_CAP`; either clamp flags the shape.  The score is the
weighted geometric mean of those speedups, so one shape with an implausible time can move
the score by at most its weight's share of log(cap), never collapse or dominate it.

Shapes fall into buckets by rounding each dim to the nearest power of two: a ragged
4000x4104 GEMM and a 4096x4096 one want the same kernel, a 2048 one may not.  Portfolio
runs evolve a winner per bucket.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

SPEEDUP_CAP = 10.0


@dataclass(frozen=True)
class ShapeSpec:
    """One GPU shape of the task: its key (`B=32,N=65536,K=1024`), dims, weight, bucket."""

    key: str
    dims: dict[str, int]
    weight: float
    label: str
    bucket: str


@dataclass(frozen=True)
class Bucket:
    key: str
    shapes: tuple[str, ...]
    """Keys of the shapes in this bucket."""
    center: dict[str, float] = field(default_factory=dict)
    """Geometric mean of each dim over the bucket's shapes (what the dispatcher measures
    distance to)."""
    weight: float = 0.0


def dims_key(dims: Mapping[str, int]) -> str:
    return ",".join(f"{k}={int(v)}" for k, v in dims.items())


def bucket_key(dims: Mapping[str, int]) -> str:
    """`B~32,N~65536,K~1024`: each dim rounded to the nearest power of two."""
    return ",".join(f"{k}~{2 ** round(math.log2(max(int(v), 1)))}" for k, v in dims.items())


def shape_specs(shapes: Iterable[tuple[Mapping[str, int], float, str]]) -> list[ShapeSpec]:
    out = []
    for dims, weight, label in shapes:
        d = {k: int(v) for k, v in dims.items()}
        out.append(ShapeSpec(dims_key(d), d, float(weight), label, bucket_key(d)))
    return out


def make_buckets(shapes: Sequence[ShapeSpec]) -> list[Bucket]:
    """Buckets in the order their first shape appears (the headline's bucket first)."""
    order: list[str] = []
    members: dict[str, list[ShapeSpec]] = {}
    for s in shapes:
        if s.bucket not in members:
            order.append(s.bucket)
            members[s.bucket] = []
        members[s.bucket].append(s)
    out = []
    for key in order:
        ms = members[key]
        names = list(ms[0].dims)
        center = {n: round(math.exp(sum(math.log(max(m.dims[n], 1)) for m in ms) / len(ms)),
                           6) for n in names}
        out.append(Bucket(key, tuple(m.key for m in ms), center, sum(m.weight for m in ms)))
    return out


def shape_speedup(base_s: float, time_s: float, floor_s: float = 0.0) -> tuple[float, bool]:
    """(speedup over the seed, flagged): time clamped at the floor, speedup at the cap."""
    flagged = False
    t = time_s
    if floor_s > 0 and t < floor_s:
        t, flagged = floor_s, True
    if t <= 0 or base_s <= 0:
        return 1.0, True
    s = base_s / t
    if s > SPEEDUP_CAP:
        s, flagged = SPEEDUP_CAP, True
    if s < 1.0 / SPEEDUP_CAP:
        s, flagged = 1.0 / SPEEDUP_CAP, True
    return s, flagged


def weighted_geomean(pairs: Iterable[tuple[float, float]]) -> float:
    """exp(sum w log x / sum w) over (x, w) pairs; 0 when there is no weight."""
    num = den = 0.0
    for x, w in pairs:
        if w <= 0:
            continue
        num += w * math.log(max(x, 1e-300))
        den += w
    return math.exp(num / den) if den > 0 else 0.0


def speedups(times: Mapping[str, float], baseline: Mapping[str, float],
             floors: Mapping[str, float], keys: Iterable[str]) -> dict[str, float] | None:
    """Per-shape speedups for `keys`; None when a shape has no time (not admitted)."""
    out = {}
    for k in keys:
        if k not in times or k not in baseline:
            return None
        out[k] = shape_speedup(baseline[k], times[k], floors.get(k, 0.0))[0]
    return out


class Weighted(Protocol):
    """What scoring reads of a shape: its key and its weight (an evaluation job carries
    only these two, not the whole ShapeSpec)."""

    @property
    def key(self) -> str: ...

    @property
    def weight(self) -> float: ...


def score(times: Mapping[str, float], baseline: Mapping[str, float],
          floors: Mapping[str, float], shapes: Sequence[Weighted]) -> float | None:
    """Weighted geometric-mean speedup over `shapes`; None if any of them has no time."""
    sp = speedups(times, baseline, floors, [s.key for s in shapes])
    if sp is None:
        return None
    return weighted_geomean((sp[s.key], s.weight) for s in shapes)
