"""Number formats and addresses: the two things a simulator must get bit-exact."""

from __future__ import annotations

import numpy as np
import pytest

from cake_core.ir.types import DType, SmemLayout
from cake_core.sim.dtypes import decode, encode, round_to
from cake_core.sim.layout import Buffer, SmemView, swizzle
from cake_core.source import Position, Span

_SPAN = Span(Position(0, 0, 0, 0), Position(0, 0, 0, 0))


def test_bf16_rounds_to_nearest_even() -> None:
    one_ulp = 2.0 ** -7
    x = np.array([1.0 + one_ulp / 2, 1.0 + 3 * one_ulp / 2, 1.0 + one_ulp / 2 + 2 ** -20,
                  -(1.0 + one_ulp / 2)], dtype=np.float32)
    np.testing.assert_array_equal(round_to(x, DType.BF16),
                                  [1.0, 1.0 + 2 * one_ulp, 1.0 + one_ulp, -1.0])
    assert encode(np.float32(1.0), DType.BF16) == 0x3F80
    assert np.isnan(round_to(np.float32(np.nan), DType.BF16))
    assert round_to(np.float32(3.4e38), DType.BF16) == np.inf  # rounds past the largest


def test_bf16_is_exact_on_its_own_values() -> None:
    bits = np.arange(0, 1 << 16, dtype=np.uint32).astype(np.uint16)
    vals = decode(bits, DType.BF16)
    finite = np.isfinite(vals)
    np.testing.assert_array_equal(encode(vals[finite], DType.BF16), bits[finite])


def test_f16() -> None:
    assert round_to(np.float32(65520.0), DType.F16) == np.inf
    assert round_to(np.float32(1 + 2 ** -11), DType.F16) == 1.0  # a tie, to even


@pytest.mark.parametrize(("dtype", "largest"), [(DType.E4M3, 448.0), (DType.E5M2, 57344.0)])
def test_fp8_codes_round_trip_and_saturate(dtype: DType, largest: float) -> None:
    codes = np.arange(256, dtype=np.uint8)
    vals = decode(codes, dtype)
    finite = np.isfinite(vals)
    back = encode(vals[finite], dtype)
    # +0 and -0 are distinct codes with equal values: compare values, not codes
    np.testing.assert_array_equal(decode(back, dtype), vals[finite])
    assert np.nanmax(vals[finite]) == largest
    np.testing.assert_array_equal(round_to(np.array([1e9, -1e9, np.inf]), dtype),
                                  [largest, -largest, largest])
    assert np.isnan(round_to(np.float32(np.nan), dtype))


def test_e4m3_ties_go_to_the_even_code() -> None:
    # 1.0 is code 0x38, 1.125 is 0x39: 1.0625 is halfway and goes to the even 0x38;
    # 1.1875 is halfway between 0x39 and 0x3A and goes to 0x3A (1.25)
    np.testing.assert_array_equal(encode(np.array([1.0625, 1.1875]), DType.E4M3), [0x38, 0x3A])


def test_int_casts_truncate_and_saturate() -> None:
    x = np.array([2.7, -2.7, 1e12, -1e12, np.nan], dtype=np.float32)
    np.testing.assert_array_equal(round_to(x, DType.I32), [2, -2, 2**31 - 1, -2**31, 0])


def test_swizzle_is_the_tma_pattern() -> None:
    # swizzle(128): the 16-byte chunk index is XORed with the 128-byte row index mod 8
    for row in range(16):
        for chunk in range(8):
            addr = row * 128 + chunk * 16 + 6
            assert swizzle(addr, 128) == row * 128 + (chunk ^ (row % 8)) * 16 + 6
    # swizzle(64) / swizzle(32): two / one chunk-index bits, from the same 128-byte row
    assert swizzle(128 + 16, 64) == 128 + (1 ^ 1) * 16
    assert swizzle(3 * 128, 64) == 3 * 128 + 3 * 16
    assert swizzle(5 * 128 + 16, 32) == 5 * 128
    assert swizzle(12345, 0) == 12345


def test_swizzle_agrees_with_the_bank_checker() -> None:
    from cake_core.verify import banks

    addrs = np.arange(0, 4096, 2)
    for span in (0, 32, 64, 128):
        got = swizzle(addrs, span)
        assert isinstance(got, np.ndarray)
        assert [banks.swizzle(int(a), span) for a in addrs] == got.tolist()


def test_swizzle_permutes_within_each_atom() -> None:
    for span, atom in ((32, 256), (64, 512), (128, 1024)):
        addrs = np.arange(0, 4 * atom, 16)
        out = swizzle(addrs, span)
        assert isinstance(out, np.ndarray)
        assert sorted(out.tolist()) == addrs.tolist()
        assert (out // atom == addrs // atom).all()


def test_view_addresses_follow_the_layout() -> None:
    b = Buffer("s", DType.BF16, (2, 64, 64), SmemLayout(swizzle=128), 1024, 16384, _SPAN)
    stage1 = SmemView.whole(b).index((1,))
    fp = stage1.addresses()
    assert fp.byte_addr.shape == (64, 64)
    assert fp.lo == 1024 + 8192 and fp.hi == 1024 + 16384 and fp.dense
    # element (r, c): row r is 128 bytes, column c sits in chunk c // 8, swizzled by r % 8
    r, c = 5, 19
    want = 1024 + 8192 + r * 128 + ((c // 8) ^ (r % 8)) * 16 + (c % 8) * 2
    assert fp.byte_addr[r, c] == want
    tr = SmemView(b, (1,), (0, 0), (64, 64), True, b.layout)
    assert tr.addresses().byte_addr[c, r] == want  # .T swaps indices, not bytes
    sub = stage1.tile((16, 16), (2, 1))
    assert sub.addresses().byte_addr[0, 0] == fp.byte_addr[32, 16]
    assert not sub.addresses().dense


def test_padded_and_column_major_layouts() -> None:
    b = Buffer("p", DType.F32, (4, 8), SmemLayout(pad=4), 0, 4 * 12 * 4, _SPAN)
    a = SmemView.whole(b).addresses().byte_addr
    assert a[1, 0] == 12 * 4 and a[3, 7] == (3 * 12 + 7) * 4
    c = Buffer("c", DType.F32, (4, 8), SmemLayout(order="col"), 0, 128, _SPAN)
    a = SmemView.whole(c).addresses().byte_addr
    assert a[1, 0] == 4 and a[0, 1] == 4 * 4  # rows are contiguous
