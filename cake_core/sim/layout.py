"""Shared memory as bytes: where each buffer sits and where each element of a view lives.

A block's shared memory is one byte array.  Buffers are placed by the kernel's smem plan
(`cake_core.verify.smem_plan`, the placement the lowering uses), and an element's byte
address follows the buffer's declared layout: row-major (or `order="col"`), `padded(n)`
elements at the end of each row, then the XOR swizzle TMA and wgmma apply.  Because the
address function is applied on both sides of every access, a writer and a reader that
disagree about a buffer's layout read each other's bytes scrambled, as on the GPU.

Swizzle (CuTe's `Swizzle<b, 4, 3>`, the TMA/wgmma swizzle modes): for `swizzle(S)` with
b = log2(S / 16), bits [4, 4 + b) of the byte address -- the 16-byte chunk inside an
S-byte row segment -- are XORed with bits [7, 7 + b) -- the 128-byte row index mod S / 16.
For rows of exactly 128 bytes under swizzle(128) that is "chunk XOR (row mod 8)".
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache

import numpy as np

from cake_core.hardware import get_arch
from cake_core.ir.kernel import Kernel, SmemAlloc
from cake_core.ir.types import DType, SmemLayout, SmemType
from cake_core.source import Span
from cake_core.verify.smem_plan import smem_plan

_SWIZZLE_BITS = {0: 0, 32: 1, 64: 2, 128: 3}
#: Alignment of a buffer by swizzle span when no smem plan module is available.
FALLBACK_ALIGN = {0: 16, 32: 256, 64: 512, 128: 1024}
BARRIER_BYTES = 8


class SmemFault(Exception):
    """An access outside a buffer or a view: reported as an out-of-bounds finding."""


def swizzle(addr: np.ndarray | int, span: int) -> np.ndarray | int:
    """The byte address where `swizzle(span)` stores linear byte address `addr`."""
    bits = _SWIZZLE_BITS.get(span, 0)
    if not bits:
        return addr
    return addr ^ (((addr >> 7) & ((1 << bits) - 1)) << 4)


@dataclass(frozen=True, slots=True)
class Buffer:
    """One placed allocation of a block's shared memory."""

    name: str
    dtype: DType
    shape: tuple[int, ...]
    layout: SmemLayout
    offset: int
    nbytes: int
    span: Span


def plan_offsets(kernel: Kernel) -> tuple[dict[str, int], int]:
    """Byte offset of every allocation and the total, from the kernel's smem plan.

    The verifier's plan is the placement the lowering implements; for an arch the hardware
    table does not know, buffers are placed in declaration order with the swizzle-atom
    alignment (16 bytes unswizzled) and barriers last, 8 bytes each.
    """
    arch = get_arch(kernel.arch)
    if arch is not None:
        plan = smem_plan(kernel, arch)
        return {p.name: p.offset for p in plan.placements}, plan.total
    return _fallback_plan(kernel.smem)


def _fallback_plan(allocs: list[SmemAlloc]) -> tuple[dict[str, int], int]:
    offsets: dict[str, int] = {}
    off = 0
    for a in sorted(allocs, key=lambda a: a.kind == "barrier"):
        align = BARRIER_BYTES if a.kind == "barrier" else \
            FALLBACK_ALIGN.get(a.layout.swizzle if a.layout else 0, 16)
        off = -(-off // align) * align
        offsets[a.name] = off
        off += a.nbytes
    return offsets, off


def buffers_of(kernel: Kernel) -> tuple[dict[str, Buffer], int]:
    offsets, total = plan_offsets(kernel)
    out: dict[str, Buffer] = {}
    for a in kernel.smem:
        if a.kind != "buffer" or a.dtype is None:
            continue
        out[a.name] = Buffer(a.name, a.dtype, a.shape, a.layout or SmemLayout(),
                             offsets[a.name], a.nbytes, a.span)
    return out, total


@dataclass(frozen=True, slots=True)
class SmemView:
    """A rectangle of a buffer: fixed leading indices, then a box in the remaining dims.

    `origin` and `shape` are in the buffer's dimension order; `transposed` swaps the last
    two dimensions logically (no data moves).  `layout` is the layout this access
    believes the buffer has -- normally the buffer's own.
    """

    buffer: Buffer
    lead: tuple[int, ...]
    origin: tuple[int, ...]
    shape: tuple[int, ...]
    transposed: bool
    layout: SmemLayout

    @classmethod
    def whole(cls, b: Buffer) -> SmemView:
        return cls(b, (), (0,) * len(b.shape), b.shape, False, b.layout)

    @property
    def logical_shape(self) -> tuple[int, ...]:
        if self.transposed and len(self.shape) >= 2:
            return (*self.shape[:-2], self.shape[-1], self.shape[-2])
        return self.shape

    @property
    def dtype(self) -> DType:
        return self.buffer.dtype

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape)) * self.dtype.bytes

    def index(self, idx: tuple[int, ...]) -> SmemView:
        """`view[i, j]`: fix leading dimensions (the stage of a ring)."""
        if len(idx) >= len(self.shape):
            raise SmemFault(f"{len(idx)} indices leave nothing of a rank-{len(self.shape)} view")
        if self.transposed and len(self.shape) - len(idx) < 2:
            raise SmemFault("cannot index into the transposed dimensions of a view")
        for i, (x, n) in enumerate(zip(idx, self.shape, strict=False)):
            if not 0 <= x < n:
                dim = len(self.lead) + i
                raise SmemFault(f"index {x} is out of range for dimension {dim} of "
                                f"`{self.buffer.name}` (extent {n})")
        k = len(idx)
        lead = (*self.lead, *(o + x for o, x in zip(self.origin, idx, strict=False)))
        return replace(self, lead=lead, origin=self.origin[k:], shape=self.shape[k:])

    def tile(self, shape: tuple[int, ...], coords: tuple[int, ...]) -> SmemView:
        """`view.tile(shape, coords)`: coordinates count tiles, in the view's logical order."""
        if self.transposed and len(shape) >= 2:
            shape = (*shape[:-2], shape[-1], shape[-2])
            coords = (*coords[:-2], coords[-1], coords[-2])
        origin = []
        for d, (o, n, t, c) in enumerate(zip(self.origin, self.shape, shape, coords,
                                             strict=True)):
            start = c * t
            if c < 0 or start + t > n:
                raise SmemFault(f"tile {c} of extent {t} covers [{start}, {start + t}) of "
                                f"dimension {d} of a view with extent {n} "
                                f"(buffer `{self.buffer.name}`)")
            origin.append(o + start)
        return replace(self, origin=tuple(origin), shape=tuple(shape))

    def retyped(self, t: SmemType) -> SmemView:
        """The view as a value of type `t` sees it: its transposition and layout."""
        if t.transposed == self.transposed and t.layout == self.layout:
            return self
        return replace(self, transposed=t.transposed, layout=t.layout)

    def addresses(self) -> Footprint:
        b = self.buffer
        return _footprint(b.name, b.offset, b.shape, b.dtype, self.lead, self.origin,
                          self.shape, self.transposed, self.layout)

    def describe(self) -> str:
        idx = "".join(f"[{i}]" for i in self.lead)
        box = ", ".join(f"{o}:{o + n}" for o, n in zip(self.origin, self.shape, strict=True))
        t = ".T" if self.transposed else ""
        return f"{self.buffer.name}{idx}[{box}]{t}"


@dataclass(frozen=True, slots=True, eq=False)
class Footprint:
    """The bytes a view touches: element addresses in the view's logical shape."""

    byte_addr: np.ndarray
    """Start byte of each element (int64, logical shape)."""
    elem_index: np.ndarray
    """byte_addr // itemsize: the index into the smem array viewed as the storage dtype."""
    lo: int
    hi: int
    dense: bool
    """Whether the elements cover [lo, hi) exactly (then the interval says everything)."""
    itemsize: int


@lru_cache(maxsize=4096)
def _footprint(name: str, offset: int, bshape: tuple[int, ...], dtype: DType,
               lead: tuple[int, ...], origin: tuple[int, ...], shape: tuple[int, ...],
               transposed: bool, layout: SmemLayout) -> Footprint:
    del name
    nd = len(bshape)
    es = dtype.bytes
    col = layout.order == "col" and nd >= 2
    # storage shape: the contiguous dimension last
    sshape = list(bshape)
    if col:
        sshape[-1], sshape[-2] = sshape[-2], sshape[-1]
    strides = [0] * nd
    acc = 1
    for d in range(nd - 1, -1, -1):
        strides[d] = acc
        acc *= sshape[d] + (layout.pad if d == nd - 1 else 0)
    if col:  # buffer dim -1 is stored at storage dim -2 and vice versa
        strides[-1], strides[-2] = strides[-2], strides[-1]
    nview = len(shape)
    lin = np.zeros((1,) * nview, dtype=np.int64)
    for d, x in enumerate(lead):
        lin = lin + x * strides[d]
    for j in range(nview):
        d = len(lead) + j
        ax = np.arange(origin[j], origin[j] + shape[j], dtype=np.int64) * strides[d]
        lin = lin + ax.reshape((1,) * j + (-1,) + (1,) * (nview - j - 1))
    addr = swizzle(offset + lin * es, layout.swizzle)
    assert isinstance(addr, np.ndarray)
    if transposed and nview >= 2:
        addr = np.swapaxes(addr, -1, -2)
    addr = np.ascontiguousarray(addr)
    addr.setflags(write=False)
    idx = addr // es
    idx.setflags(write=False)
    lo = int(addr.min())
    hi = int(addr.max()) + es
    return Footprint(addr, idx, lo, hi, hi - lo == addr.size * es, es)
