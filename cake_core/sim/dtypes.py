"""Number formats as the hardware stores and rounds them, vectorised in numpy.

The simulator keeps two representations of a dtype: its *storage* form (the bits that
shared and global memory hold: bf16 as uint16, fp8 as uint8 codes) and its *value* form
(what a fragment holds while it computes: float32 for every float format, already rounded
to the format, and the native integer types).  Copies move storage, math works on values,
and every conversion between them rounds the way the instruction does: round to nearest
even, fp8 saturating to the largest finite value (`cvt.rn.satfinite`).
"""

from __future__ import annotations

import numpy as np

from cake_core.ir.types import DType

#: numpy dtype of each format's bits in memory.
STORAGE: dict[DType, type[np.generic]] = {
    DType.F32: np.float32, DType.F16: np.float16, DType.BF16: np.uint16,
    DType.E4M3: np.uint8, DType.E5M2: np.uint8, DType.I32: np.int32, DType.I8: np.int8,
    DType.U32: np.uint32, DType.BOOL: np.uint8,
}

#: numpy dtype of each format's values in a fragment.
VALUE: dict[DType, type[np.generic]] = {
    DType.F32: np.float32, DType.F16: np.float32, DType.BF16: np.float32,
    DType.E4M3: np.float32, DType.E5M2: np.float32, DType.I32: np.int32, DType.I8: np.int8,
    DType.U32: np.uint32, DType.BOOL: np.bool_,
}


# --- bf16 ----------------------------------------------------------------------------------
def bf16_bits(x: np.ndarray) -> np.ndarray:
    """float32 -> bf16 bits, round to nearest even (the uint32 trick), NaN kept quiet."""
    shape = np.shape(x)
    f = np.ascontiguousarray(x, dtype=np.float32).reshape(-1)
    u = f.view(np.uint32)
    out = ((u + np.uint32(0x7FFF) + ((u >> np.uint32(16)) & np.uint32(1)))
           >> np.uint32(16)).astype(np.uint16)
    nan = np.isnan(f)
    if nan.any():
        out[nan] = ((u[nan] >> np.uint32(16)) | np.uint32(0x0040)).astype(np.uint16)
    return out.reshape(shape)


def bf16_value(bits: np.ndarray) -> np.ndarray:
    return (np.asarray(bits, dtype=np.uint16).astype(np.uint32) << np.uint32(16)).view(
        np.float32)


# --- fp8 -----------------------------------------------------------------------------------
def _fp8_table(exp_bits: int, man_bits: int, bias: int, ieee: bool) -> np.ndarray:
    """Value of every code 0..255 (e4m3 is the `fn` variant: no inf, 0x7F/0xFF are NaN)."""
    vals = np.zeros(256, dtype=np.float64)
    emax = (1 << exp_bits) - 1
    for code in range(256):
        sign = -1.0 if code & 0x80 else 1.0
        e = (code >> man_bits) & emax
        m = code & ((1 << man_bits) - 1)
        if ieee and e == emax:
            v = np.inf if m == 0 else np.nan
        elif not ieee and e == emax and m == (1 << man_bits) - 1:
            v = np.nan
        elif e == 0:
            v = m / (1 << man_bits) * 2.0 ** (1 - bias)
        else:
            v = (1 + m / (1 << man_bits)) * 2.0 ** (e - bias)
        vals[code] = sign * v
    return vals


_FP8 = {
    DType.E4M3: _fp8_table(4, 3, 7, ieee=False),
    DType.E5M2: _fp8_table(5, 2, 15, ieee=True),
}
_FP8_NAN = {DType.E4M3: 0x7F, DType.E5M2: 0x7F}


def _fp8_positive(dtype: DType) -> np.ndarray:
    """Finite non-negative values, indexed by code (they increase with the code)."""
    t = _FP8[dtype][:128]
    return t[np.isfinite(t)]


_FP8_POS = {d: _fp8_positive(d) for d in _FP8}


def fp8_bits(x: np.ndarray, dtype: DType) -> np.ndarray:
    """float32 -> fp8 codes: nearest, ties to the even code, saturating (satfinite)."""
    shape = np.shape(x)
    f = np.asarray(x, dtype=np.float32).astype(np.float64).reshape(-1)
    pos = _FP8_POS[dtype]
    a = np.abs(f)
    hi = np.clip(np.searchsorted(pos, a, side="left"), 0, len(pos) - 1)
    lo = np.clip(hi - 1, 0, len(pos) - 1)
    dlo, dhi = np.abs(a - pos[lo]), np.abs(pos[hi] - a)
    pick_hi = (dhi < dlo) | ((dhi == dlo) & (hi % 2 == 0))
    code = np.where(pick_hi, hi, lo)
    code = np.where(a >= pos[-1], len(pos) - 1, code)  # satfinite (inf included)
    out = (code | np.where(np.signbit(f), 0x80, 0)).astype(np.uint8)
    nan = np.isnan(f)
    if nan.any():
        out[nan] = _FP8_NAN[dtype]
    return out.reshape(shape)


def fp8_value(bits: np.ndarray, dtype: DType) -> np.ndarray:
    return _FP8[dtype][np.asarray(bits, dtype=np.uint8)].astype(np.float32)


# --- conversions ---------------------------------------------------------------------------
def encode(values: np.ndarray | np.generic | float, dtype: DType) -> np.ndarray:
    """Values -> storage bits of `dtype`, rounding floats as a conversion instruction does."""
    v = np.asarray(values)
    if dtype == DType.BF16:
        return bf16_bits(v.astype(np.float32))
    if dtype in _FP8:
        return fp8_bits(v, dtype)
    if dtype == DType.F16:
        with np.errstate(over="ignore"):
            return v.astype(np.float16)
    if dtype == DType.F32:
        return v.astype(np.float32)
    if dtype == DType.BOOL:
        return (v != 0).astype(np.uint8)
    return to_int(v, dtype)


def decode(bits: np.ndarray, dtype: DType) -> np.ndarray:
    """Storage bits -> values (floats widen to float32 exactly)."""
    if dtype == DType.BF16:
        return bf16_value(bits)
    if dtype in _FP8:
        return fp8_value(bits, dtype)
    if dtype == DType.F16:
        return np.asarray(bits, dtype=np.float16).astype(np.float32)
    if dtype == DType.BOOL:
        return np.asarray(bits) != 0
    return np.asarray(bits).astype(VALUE[dtype])


def round_to(values: np.ndarray | float | int, dtype: DType) -> np.ndarray:
    """Values rounded to `dtype`, kept in the value form (float32 for float formats)."""
    v = np.asarray(values)
    if dtype == DType.F32:
        return v.astype(np.float32)
    if dtype in (DType.BF16, DType.F16) or dtype in _FP8:
        return decode(encode(v, dtype), dtype)
    if dtype == DType.BOOL:
        return v != 0
    return to_int(v, dtype)


def to_int(values: np.ndarray, dtype: DType) -> np.ndarray:
    """Float -> int truncates toward zero and saturates (cvt.rzi.sat); NaN becomes 0."""
    v = np.asarray(values)
    np_t = VALUE[dtype]
    if v.dtype.kind == "f":
        info = np.iinfo(np.dtype(np_t))
        with np.errstate(invalid="ignore"):
            t = np.trunc(np.nan_to_num(v.astype(np.float64), nan=0.0))
        return np.clip(t, info.min, info.max).astype(np_t)
    if v.dtype == np.bool_:
        return v.astype(np_t)
    return v.astype(np_t)  # integer -> integer wraps, as the hardware's moves do


#: Memory nothing wrote holds this byte: NaN in every float format, -1 in every int type.
POISON_BYTE = 0xFF
