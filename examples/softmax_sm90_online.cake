"""Row softmax for long rows on sm_90a: the online (one-pass max and sum) formulation.

X (M, N) bf16 with N a launch dim, a multiple of the chunk NC = 1024 (8192 at the
headline, a vocabulary-sized row would do as well); Y (M, N) bf16; f32 math, exp2 with
log2(e) folded into one multiply per element.

A whole row of 8192 f32 values is 256 per thread of its warp: more than the register file
allows.  So each block of 4 warps (BM = 4 rows, one per warp) walks its rows in chunks:
- pass 1 keeps a running max m and a running sum l of 2^(x - m), both started by the
  first chunk; a later chunk that raises the max rescales l by 2^(m_old - m_new);
- pass 2 reads the chunks again and writes 2^(x - m) / l.
X is read twice: the second read of a block's 32 KB of rows follows the first closely and
is served by L2 on the GPU, but the cost model counts both reads as DRAM traffic (it has
no reuse of a tile a block read itself earlier), so its time is an upper bound.
N must be a multiple of NC: a ragged last chunk would read zeros that count as 2^(0 - m)
in the sum, and the language has no column index to mask them with `where`.
"""

BM, NC = 4, 1024
LOG2E = 1.4426950408889634

M = dim("M")
N = dim("N", multiple_of=NC)

@kernel(arch="sm_90a", grid=(cdiv(M, BM),), warps=4)
def softmax_sm90_online(X: Tensor[bf16, (M, N)], Y: Tensor[bf16, (M, N)]):
    # the first chunk starts the running max m (log2 units) and sum l of 2^(x - m)
    x = cast(load(X.tile((BM, NC), (block.x, 0))), f32) * LOG2E
    m = row_max(x)
    l = row_sum(exp2(x - unsqueeze(m, 1)))
    for j in range(1, N // NC):
        x = cast(load(X.tile((BM, NC), (block.x, j))), f32) * LOG2E
        mx = row_max(x)
        mn = maximum(m, mx)
        l = l * exp2(m - mn) + row_sum(exp2(x - unsqueeze(mn, 1)))
        # the carried max is the result of an op: `m = mn` would not carry it (CK332)
        m = maximum(m, mx)
    inv = 1.0 / l
    for j in range(N // NC):
        x = cast(load(X.tile((BM, NC), (block.x, j))), f32) * LOG2E
        y = exp2(x - unsqueeze(m, 1)) * unsqueeze(inv, 1)
        store(Y.tile((BM, NC), (block.x, j)), cast(y, bf16))
