"""Numeric and string literal values, read from their text without executing anything.

CAKE never hands user text to `eval`, `compile` or `ast.literal_eval`: a literal's value
is computed here from its characters, and a malformed or out-of-range literal becomes a
`LiteralError` that the parser turns into a located diagnostic.
"""

from __future__ import annotations

import math
import re
import unicodedata

INT_BITS = 64
"""Integer literals must fit in 64 bits (signed or unsigned): the widest index type a
kernel can hold."""

_MAX_INT = (1 << INT_BITS) - 1

_DIGITS = r"[0-9](?:_?[0-9])*"
_INT_RE = re.compile(
    r"""(?x)
    (?: 0[xX] (?:_?[0-9a-fA-F])+
      | 0[oO] (?:_?[0-7])+
      | 0[bB] (?:_?[01])+
      | [1-9] (?:_?[0-9])*
      | 0 (?:_?0)*
    )\Z"""
)
_FLOAT_RE = re.compile(
    rf"""(?x)
    (?: (?:{_DIGITS})? \. {_DIGITS} (?:[eE][+-]?{_DIGITS})?
      | {_DIGITS} \. (?:[eE][+-]?{_DIGITS})?
      | {_DIGITS} [eE][+-]?{_DIGITS}
    )\Z"""
)
_IMAGINARY_RE = re.compile(r".*[jJ]\Z")
_LEADING_ZERO_RE = re.compile(r"0+_?[0-9]")


class LiteralError(Exception):
    """Why a literal has no value; `unsupported` marks valid Python outside CAKE IR."""

    def __init__(self, message: str, unsupported: bool = False) -> None:
        super().__init__(message)
        self.message = message
        self.unsupported = unsupported


def parse_integer(text: str) -> int:
    """The value of an integer literal such as `1_000`, `0x_ff`, `0b1010` or `0o17`."""
    if _IMAGINARY_RE.match(text):
        raise LiteralError("complex number literals are not part of CAKE IR", unsupported=True)
    if not _INT_RE.match(text):
        if _LEADING_ZERO_RE.match(text) and text.replace("_", "").isdigit():
            raise LiteralError(
                f"invalid integer literal `{text}`: leading zeros are not allowed "
                f"(write `0o{text.lstrip('0_')}` for an octal number)"
            )
        raise LiteralError(f"invalid integer literal `{text}`")
    digits = text.replace("_", "")
    # Reject huge digit strings before int() converts them (int() itself refuses
    # strings past 4,300 digits, and 64-bit values need far fewer).
    significant = digits[2:] if digits[1:2].isalpha() else digits
    if len(significant.lstrip("0")) > 70:
        raise LiteralError(f"integer literal `{_short(text)}` does not fit in {INT_BITS} bits")
    value = int(digits, 0)
    if value > _MAX_INT:
        raise LiteralError(f"integer literal `{_short(text)}` does not fit in {INT_BITS} bits")
    return value


def parse_float(text: str) -> float:
    """The value of a float literal such as `1e3`, `.5`, `1_000.5` or `1.`."""
    if _IMAGINARY_RE.match(text):
        raise LiteralError("complex number literals are not part of CAKE IR", unsupported=True)
    if not _FLOAT_RE.match(text):
        raise LiteralError(f"invalid float literal `{_short(text)}`")
    value = float(text.replace("_", ""))
    if math.isinf(value):
        raise LiteralError(f"float literal `{_short(text)}` is too large for a 64-bit float")
    return value


def _short(text: str, limit: int = 24) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


# --- strings ------------------------------------------------------------------------------
_SIMPLE_ESCAPES = {
    "\n": "",
    "\\": "\\",
    "'": "'",
    '"': '"',
    "a": "\a",
    "b": "\b",
    "f": "\f",
    "n": "\n",
    "r": "\r",
    "t": "\t",
    "v": "\v",
}
_HEX_WIDTH = {"x": 2, "u": 4, "U": 8}
_OCTAL = frozenset("01234567")


def decode_string_body(body: str, raw: bool) -> str:
    """The value of the text between a string's quotes.

    Raw strings are kept as written (a `\\` before a line break included, as in Python).
    Otherwise the Python escapes are decoded; an unknown escape such as `\\q` keeps its
    backslash, as Python does.  Line breaks written as CRLF read as `\\n`, matching what
    Python's own reader does with a CRLF file.
    """
    body = body.replace("\r\n", "\n").replace("\r", "\n")
    if raw or "\\" not in body:
        return body
    out: list[str] = []
    i = 0
    n = len(body)
    while i < n:
        ch = body[i]
        if ch != "\\" or i + 1 >= n:
            out.append(ch)
            i += 1
            continue
        nxt = body[i + 1]
        if nxt in _SIMPLE_ESCAPES:
            out.append(_SIMPLE_ESCAPES[nxt])
            i += 2
        elif nxt in _HEX_WIDTH:
            width = _HEX_WIDTH[nxt]
            digits = body[i + 2 : i + 2 + width]
            if len(digits) == width and all(c in "0123456789abcdefABCDEF" for c in digits):
                code = int(digits, 16)
                if code > 0x10FFFF:
                    raise LiteralError(f"invalid escape `\\{nxt}{digits}`: not a code point")
                out.append(chr(code))
                i += 2 + width
            else:
                raise LiteralError(f"truncated `\\{nxt}` escape: expected {width} hex digits")
        elif nxt in _OCTAL:
            j = i + 1
            while j < n and j < i + 4 and body[j] in _OCTAL:
                j += 1
            out.append(chr(int(body[i + 1 : j], 8)))
            i = j
        elif nxt == "N":
            end = body.find("}", i + 3) if body.startswith("{", i + 2) else -1
            if end == -1:
                raise LiteralError("malformed `\\N{...}` escape")
            name = body[i + 3 : end]
            try:
                out.append(unicodedata.lookup(name))
            except KeyError:
                raise LiteralError(f"unknown Unicode character name `{_short(name)}`") from None
            i = end + 1
        else:
            out.append("\\")
            out.append(nxt)
            i += 2
    return "".join(out)
