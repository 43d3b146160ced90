# A de-tuned sm_90a GEMM, the second starting point of bench/agent_search.py (task
# gemm_bf16): TMA + wgmma with neither warp specialisation nor a ring.  Every warp loads
# and computes, one buffer per operand and one raw mbarrier, so copies and tensor-core work
# never overlap, and a narrow 128x64 tile reloads A for every 64 columns of C.  Getting
# close to the best kernel the tactics reach takes a structural move (producer and consumer
# roles with a pipeline) and two retuning ones (BN up twice); making the tiles persistent
# adds a little more.
"""C = A @ B.T on sm_90a without warp specialisation: every warp loads and computes.

A (M, K) and B (N, K) are K-major (a linear layer: y = x @ W.T); C is (M, N).
bf16 inputs, f32 accumulation, bf16 output.

One buffer per operand and one raw mbarrier: the block arms the barrier, one thread issues
both TMA copies, every warp waits for the phase of tile k (parity k % 2), runs its wgmma and
waits for it, and a block barrier proves every warp finished reading before the next tile
overwrites the buffers.  64 bf16 = 128 B per smem row: one swizzle(128) atom.
"""

BM, BN, BK = 128, 64, 64

M = dim("M")
N = dim("N", multiple_of=8)   # TMA: 16-byte aligned global rows
K = dim("K", multiple_of=8)

@kernel(arch="sm_90a", grid=(cdiv(M, BM), cdiv(N, BN)), warps=8)
def gemm_sm90(A: Tensor[bf16, (M, K)], B: Tensor[bf16, (N, K)], C: Tensor[bf16, (M, N)]):
    sa = smem(bf16, (BM, BK), layout=swizzle(128))
    sb = smem(bf16, (BN, BK), layout=swizzle(128))
    ready = mbarrier(count=1)
    fence_barrier_init()
    syncthreads()
    acc = fragment(f32, (BM, BN), layout=wgmma_acc)
    for k in range(cdiv(K, BK)):
        ready.expect_tx((BM + BN) * BK * 2)
        tma_load(sa, A.tile((BM, BK), (block.x, k)), ready)
        tma_load(sb, B.tile((BN, BK), (block.y, k)), ready)
        ready.wait(k % 2)
        wgmma(acc, sa, sb.T)
        wgmma_wait(0)
        syncthreads()             # every warp is done with sa and sb before the next copy
    store(C.tile((BM, BN), (block.x, block.y)), cast(acc, bf16))
