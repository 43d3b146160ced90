"""Variable-length attention forward: B sequences of different lengths in one launch, bf16.

O = softmax(Q @ K.T / sqrt(D)) @ V within each sequence, non-causal, D = 128.  Q, K and O
(T, H * D) stack every sequence's tokens, each token's H heads side by side; Vt (H * D, T)
is V transposed.  Sequence b owns rows Offsets[b] .. Offsets[b] + Lens[b]; each sequence
starts on a 128-row boundary and is padded up to the next one (Offsets[b + 1] - Offsets[b]
= 128 * cdiv(Lens[b], 128)), and the padded sequences fill all T rows.  SMAX is the longest
length.  The padding rows of Q, K and Vt hold noise (a kernel that attends to them, or
writes them through, fails); O is 0 there.
"""

from __future__ import annotations

import numpy as np

from cake_core.tasks import Dims, KernelEntry, Shape, Task, Tolerance, as_dtype

D = 128
ALIGN = 128
"""Sequence alignment in rows: the kernel's query tile."""


def padded(n: int) -> int:
    return -(-n // ALIGN) * ALIGN


def lengths_for(b: int, t: int, smax: int, rng: np.random.Generator) -> np.ndarray:
    """Ragged lengths whose padded sequences fill exactly `t` rows: the first is `smax` long,
    the last is not a multiple of 64 (when there are two or more), the others random."""
    if t % ALIGN:
        raise ValueError(f"T must be a multiple of {ALIGN}, not {t}")
    if not b * ALIGN <= t - padded(smax) + ALIGN <= b * padded(smax):
        raise ValueError(f"{b} sequences of at most {smax} tokens cannot fill T = {t} rows")
    tiles = [padded(smax) // ALIGN]             # each sequence's padded length, in tiles
    left = t // ALIGN - tiles[0]
    for i in range(1, b):
        rest = b - 1 - i                        # sequences after this one: >= 1 tile each
        lo = max(1, left - rest * tiles[0])
        hi = min(tiles[0], left - rest)
        tiles.append(int(rng.integers(lo, hi + 1)))
        left -= tiles[-1]
    lens = [smax]
    for i, n in enumerate(tiles[1:], start=1):
        top = min(n * ALIGN, smax)              # a length that pads to n tiles
        length = int(rng.integers((n - 1) * ALIGN + 1, top + 1))
        if i == b - 1 and length % 64 == 0:
            length -= 1 if length > (n - 1) * ALIGN + 1 else -1
        lens.append(length)
    return np.asarray(lens, dtype=np.int32)


def offsets_for(lens: np.ndarray) -> np.ndarray:
    out = np.zeros(len(lens) + 1, dtype=np.int32)
    out[1:] = np.cumsum([padded(int(n)) for n in lens])
    return out


def inputs(dims: Dims, rng: np.random.Generator) -> dict[str, np.ndarray]:
    b, h, t, smax = dims["B"], dims["H"], dims["T"], dims["SMAX"]
    lens = lengths_for(b, t, smax, rng)
    return {"Q": as_dtype(rng.standard_normal((t, h * D)), "bf16"),
            "K": as_dtype(rng.standard_normal((t, h * D)), "bf16"),
            "Vt": as_dtype(rng.standard_normal((h * D, t)), "bf16"),
            "Offsets": offsets_for(lens), "Lens": lens}


def reference(x: dict[str, np.ndarray], dims: Dims) -> dict[str, np.ndarray]:
    h, t = dims["H"], dims["T"]
    q = x["Q"].astype(np.float64).reshape(t, h, D)
    k = x["K"].astype(np.float64).reshape(t, h, D)
    v = x["Vt"].astype(np.float64).reshape(h, D, t)
    out = np.zeros((t, h, D))
    for lo, n in zip(x["Offsets"][:-1], x["Lens"], strict=True):
        qs = np.swapaxes(q[lo:lo + n], 0, 1)                  # (H, n, D)
        ks = np.swapaxes(k[lo:lo + n], 0, 1)
        vs = np.swapaxes(v[:, :, lo:lo + n], 1, 2)             # (H, n, D)
        s = qs @ np.swapaxes(ks, 1, 2) / np.sqrt(D)
        p = np.exp(s - s.max(axis=-1, keepdims=True))
        out[lo:lo + n] = np.swapaxes((p @ vs) / p.sum(axis=-1, keepdims=True), 0, 1)
    return {"O": as_dtype(out.reshape(t, h * D), "bf16")}


TASK = Task(
    name="attention_fwd_varlen",
    description=__doc__.strip().splitlines()[0],
    kernels=(KernelEntry("../attention_fwd_sm90_varlen.cake", "attention_fwd_sm90_varlen"),),
    inputs=inputs,
    reference=reference,
    outputs=("O",),
    shapes=(Shape({"B": 16, "H": 16, "T": 40960, "SMAX": 4096}, 1.0,
                  "headline: 16 prompts of up to 4K tokens, 16 heads"),
            Shape({"B": 64, "H": 32, "T": 40960, "SMAX": 1024}, 0.5,
                  "64 short prompts, 32 heads"),
            Shape({"B": 4, "H": 32, "T": 49152, "SMAX": 16384}, 0.5,
                  "a long context beside short ones")),
    sim_shapes=(Shape({"B": 3, "H": 2, "T": 512, "SMAX": 200},
                      label="lengths 200 and two shorter, one query tile past an end"),
                Shape({"B": 4, "H": 1, "T": 896, "SMAX": 300},
                      label="a sequence of one or two tiles beside a long one")),
    # As attention_fwd: O is a convex combination of V rows (|V| ~ 1), P rounded to bf16
    # before P @ V and O to bf16 once; far below what a wrong row, key or sequence gives.
    tolerances={"bf16": Tolerance(atol=2e-2, rtol=2e-2)},
    baseline="flash_attn_varlen_func (or torch SDPA per sequence) on the unpadded "
             "sequences, bf16, same lengths",
    fixed={"D": D},
)
