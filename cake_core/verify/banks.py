"""Shared-memory bank conflicts, counted exactly from the lane addresses of each access.

Shared memory serves 128 bytes per wavefront from 32 four-byte banks.  A warp's request is
split into phases: 8 lanes for 16-byte accesses (`ldmatrix` reads one 8x8 matrix, 8 rows
of 16 bytes, per phase), 16 lanes for 8-byte accesses and all 32 lanes for 4-byte or
narrower ones.  Within a phase, accesses to different words of one bank serialise: the
phase takes as many wavefronts as the most distinct words any bank holds (lanes reading
the same word share it).  A conflict-free access takes one wavefront per phase; every
wavefront beyond that is reported as an extra one.

Which lane touches which element is the lowering's business, so the models follow it:
`ldmatrix` matrices, the `rows` fragment layout of `cake_core/lower/layouts.py` for
`load`/`store`, and row-major 16-byte chunks for `cp_async`.  Addresses come from the
layout the buffer declares, with the swizzle the hardware applies (TMA, wgmma and CuTe's
`Swizzle<b, 4, 3>`): for `swizzle(S)`, bits [4, 4 + b) of the byte offset are XORed with
bits [7, 7 + b), b = log2(S / 16).  For rows of exactly S bytes that is the 16-byte chunk
index XOR the row index (mod 8 for S = 128).  The buffer base is aligned to the swizzle
period (1024 / 512 / 256 bytes, see `smem_plan`), so offsets inside the buffer are what
the hardware sees.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable
from dataclasses import dataclass

from cake_core.ir.symbolic import SymExpr
from cake_core.verify.views import Geometry, View, environments, evaluate

_SWIZZLE_BITS = {0: 0, 32: 1, 64: 2, 128: 3}
#: Bank patterns and swizzles repeat every 1024 bytes (the 128-byte swizzle period).
PERIOD = 1024


def swizzle(offset: int, span: int) -> int:
    """The byte offset where a `swizzle(span)` layout stores linear offset `offset`."""
    bits = _SWIZZLE_BITS.get(span, 0)
    if not bits:
        return offset
    return offset ^ (((offset >> 7) & ((1 << bits) - 1)) << 4)


def address(g: Geometry, base: int, row: int, col: int) -> int:
    """Byte offset of element (row, col) of a view starting at linear offset `base`."""
    return swizzle(base + row * g.pitch + col * g.esize, g.layout.swizzle)


def phase_wavefronts(addresses: Iterable[int], width: int) -> int:
    """Wavefronts one phase of `width`-byte accesses needs."""
    unit = max(width, 4)
    groups = 128 // unit
    words: dict[int, set[int]] = {}
    for a in addresses:
        w = a // unit
        words.setdefault(w % groups, set()).add(w)
    return max((len(s) for s in words.values()), default=0)


def lanes_per_phase(width: int) -> int:
    return 128 // width if width >= 4 else 32


@dataclass(frozen=True, slots=True)
class BankReport:
    """Wavefronts of one access (one warp's `ldmatrix`, or a role's whole load/store)."""

    instructions: int
    phases: int
    wavefronts: int
    worst: int
    """Most wavefronts one phase needs: the n of an n-way conflict."""

    @property
    def extra(self) -> int:
        return self.wavefronts - self.phases


NO_CONFLICT = BankReport(0, 0, 0, 1)


def worst(reports: Iterable[BankReport]) -> BankReport:
    return max(reports, key=lambda r: (r.extra, r.worst), default=NO_CONFLICT)


def ldmatrix_report(g: Geometry, view: View, base: int) -> BankReport:
    """One warp's `ldmatrix` of the view starting at linear byte offset `base`.

    Each 8x8 matrix of 16-bit elements is one phase: 8 rows of 16 bytes.  The `.trans`
    form reads the same rows (it only redistributes them), so transposition is irrelevant.
    """
    mats_r, mats_c = view.rows // 8, view.cols * g.esize // 16
    phases = wavefronts = worst_ways = 0
    for mr in range(mats_r):
        for mc in range(mats_c):
            start = (base + 8 * mr * g.pitch + 16 * mc) % PERIOD
            wf = _matrix_wavefronts(g.layout.swizzle, g.pitch, start)
            phases += 1
            wavefronts += wf
            worst_ways = max(worst_ways, wf)
    return BankReport(-(-phases // 4), phases, wavefronts, max(worst_ways, 1))


@functools.lru_cache(maxsize=4096)
def _matrix_wavefronts(span: int, pitch: int, start: int) -> int:
    return phase_wavefronts([swizzle(start + r * pitch, span) for r in range(8)], 16)


def vector_width(g: Geometry, view: View) -> int:
    """Bytes per cp.async chunk: the widest (<= 16 B) that rows and their starts allow;
    one element when the view runs across rows (transposed)."""
    if view.transposed:
        return g.esize
    aligned = math.gcd(view.cols * g.esize, g.pitch) if view.rows > 1 else view.cols * g.esize
    width = 16
    while width > g.esize and aligned % width:
        width //= 2
    return width


def chunked_access_report(g: Geometry, view: View, threads: int, base: int) -> BankReport:
    """A `cp_async` into the view by `threads` threads.

    The view is copied in chunks of `vector_width` bytes in its logical row-major order;
    chunk i goes to thread i mod threads, so warp w's k-th instruction covers chunks
    k * threads + 32 * w + lane (a phase may span rows).
    """
    width = vector_width(g, view)
    per_vec = width // g.esize
    lr, lc = view.logical_shape
    per_row = max(1, lc // per_vec)
    nvec = lr * per_row
    lanes = lanes_per_phase(width)

    def linear(i: int) -> int:
        r, c = divmod(i, per_row)
        r, c = (c * per_vec, r) if view.transposed else (r, c * per_vec)
        return base + r * g.pitch + c * g.esize

    instructions = phases = wavefronts = worst_ways = 0
    warps = max(1, threads // 32)
    for first_round in range(0, nvec, threads):
        for w in range(warps):
            first = first_round + 32 * w
            if first >= nvec:
                break
            instructions += 1
            for p in range(0, 32, lanes):
                lo = first + p
                n = min(lanes, nvec - lo)
                if n <= 0:
                    break
                # A phase's addresses are fixed by where it starts (mod PERIOD), the
                # column it starts in and its length: cached on that, across calls.
                wf = _rows_phase(g.layout.swizzle, g.pitch, g.esize, width, per_row, per_vec,
                                 view.transposed, linear(lo) % PERIOD, lo % per_row, n)
                phases += 1
                wavefronts += wf
                worst_ways = max(worst_ways, wf)
    return BankReport(instructions, phases, wavefronts, max(worst_ways, 1))


@functools.lru_cache(maxsize=16384)
def _rows_phase(span: int, pitch: int, esize: int, width: int, per_row: int, per_vec: int,
                transposed: bool, start: int, col: int, n: int) -> int:
    """Wavefronts of `n` consecutive vectors, the first at byte `start`, column `col`."""
    addrs = []
    for j in range(n):
        down, rem = divmod(col + j, per_row)  # rows advanced, vector column reached
        across = (rem - col) * per_vec  # elements moved along the row (may be negative)
        # a transposed view's logical rows are physical columns
        offset = across * pitch + down * esize if transposed else down * pitch + across * esize
        addrs.append(swizzle(start + PERIOD * 1024 + offset, span))
    return phase_wavefronts(addrs, width)


def fragment_vector(cols: int, esize: int, lanes: int = 32) -> int:
    """Elements per lane access of a `rows` fragment: up to 16 bytes, with the columns
    splitting evenly over the lanes (the lowering's `rows` layout,
    `cake_core/lower/layouts.py`)."""
    v = max(1, 16 // esize)
    while v > 1 and cols % (lanes * v):
        v //= 2
    return v


def fragment_access_report(g: Geometry, view: View, threads: int, base: int) -> BankReport:
    """A `load`/`store` of a `rows` fragment from/to the view by `threads` threads.

    The distribution is the lowering's `rows` layout: a 2-D fragment gives row r to warp
    r mod warps, and lane l of that warp the `v` columns from l * v on (then 32 * v
    further, and so on), so one warp instruction reads part of one row; a 1-D fragment
    gives thread t the `v` elements from t * v on.  A transposed view turns a lane's
    vector into `v` single-element accesses, one instruction each.
    """
    esize, span = g.esize, g.layout.swizzle
    warps = max(1, threads // 32)
    lr, lc = view.logical_shape
    one_d = view.logical_rank == 1
    v = fragment_vector(lc, esize, threads if one_d else 32)
    step = threads * v if one_d else 32 * v
    instructions = phases = wavefronts = worst_ways = 0

    def issue(start: int, n: int, stride: int, width: int) -> None:
        nonlocal instructions, phases, wavefronts, worst_ways
        instructions += 1
        lanes = lanes_per_phase(width)
        for p in range(0, n, lanes):
            wf = _strided_phase(span, (start + p * stride) % PERIOD, min(lanes, n - p), stride,
                                width)
            phases += 1
            wavefronts += wf
            worst_ways = max(worst_ways, wf)

    for w in range(warps):
        rows = [0] if one_d else range(w, lr, warps)
        for r in rows:
            for q0 in range(0, lc, step):
                first = q0 + (32 * w * v if one_d else 0)
                n = min(32, -(-(lc - first) // v)) if first < lc else 0
                if n <= 0:
                    continue
                if not view.transposed:
                    issue(base + r * g.pitch + first * esize, n, v * esize, v * esize)
                    continue
                for j in range(v):  # physical row = logical column, physical col = r
                    issue(base + (first + j) * g.pitch + r * esize, n, v * g.pitch, esize)
    return BankReport(instructions, phases, wavefronts, max(worst_ways, 1))


@functools.lru_cache(maxsize=16384)
def _strided_phase(span: int, start: int, n: int, stride: int, width: int) -> int:
    return phase_wavefronts([swizzle(start + PERIOD * 1024 + i * stride, span)
                             for i in range(n)], width)


def positions(view: View) -> tuple[tuple[int, int], ...] | None:
    """The distinct (first row, first column) the view takes over its index values.

    Runtime indices are sampled (`views.environments`) so that every swizzle phase is
    reached.  None when the start depends on a launch-time dim.
    """
    return _positions(view.row0, view.col0)


@functools.lru_cache(maxsize=4096)
def _positions(row0: SymExpr, col0: SymExpr) -> tuple[tuple[int, int], ...] | None:
    """`positions`, by the two start expressions alone (frozen, so a sound cache key):
    the verifier and the cost model ask it for the same views, and an agent's every
    re-checked variant repeats most of them."""
    envs = environments((row0, col0))
    if envs is None:
        return None
    out: set[tuple[int, int]] = set()
    for env in envs:
        r, c = evaluate(row0, env), evaluate(col0, env)
        if r is not None and c is not None:
            out.add((r, c))
    return tuple(sorted(out)) or None


def bases(g: Geometry, starts: tuple[tuple[int, int], ...]) -> list[int]:
    """Distinct starting byte offsets, modulo PERIOD: conflicts depend on nothing else,
    so a handful of offsets stands for every stage, warp and loop iteration."""
    return sorted({(r * g.pitch + c * g.esize) % PERIOD for r, c in starts})
