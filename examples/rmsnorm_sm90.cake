"""RMSNorm on sm_90a: Y[m] = X[m] / sqrt(mean(X[m]^2) + eps) * W, bf16 in and out, f32 math.

X (M, D) holds M token rows of hidden size D = 4096 (a LLaMA-7B-like width); W (D,) is the
learned gain.  M is a launch dim and may be ragged: the last block's rows past M read as
zeros (their mean square is 0, rsqrt(eps) is finite) and are clipped by the store.

Design (memory-bound: 16 bytes moved per 6 flops per element):
- One pass over DRAM.  A block of 4 warps owns BM = 4 rows; the `rows` layout gives each
  warp one whole row, 4096 / 32 = 128 values per thread, loaded as 16-byte vectors.  The
  row stays in registers between the sum of squares and the scaling, so X is read once and
  Y written once; W (8 KB) comes from L2 after the first blocks.
- The per-row sum is a warp-shuffle reduction (row_sum), no shared memory, no barrier.
- 128 f32 values per thread cost about 250 registers (no spill), 2 blocks per SM: 64 KB of
  loads in flight per SM, above what DRAM latency times bandwidth asks for per SM.
"""

BM, D = 4, 4096
EPS = 1e-6

M = dim("M")

@kernel(arch="sm_90a", grid=(cdiv(M, BM),), warps=4)
def rmsnorm_sm90(X: Tensor[bf16, (M, D)], W: Tensor[bf16, (D,)], Y: Tensor[bf16, (M, D)]):
    x = cast(load(X.tile((BM, D), (block.x, 0))), f32)     # rows past M read as 0
    ms = row_sum(x * x) * (1.0 / D)                         # (BM,) mean of squares, f32
    r = rsqrt(ms + EPS)
    w = cast(load(W.tile((D,), (0,))), f32)                 # (D,) broadcasts over the rows
    y = x * unsqueeze(r, 1) * w
    store(Y.tile((BM, D), (block.x, 0)), cast(y, bf16))     # rows past M are dropped
