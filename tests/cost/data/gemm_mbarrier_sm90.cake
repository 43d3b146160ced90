"""C = A @ B.T on sm_90a without warp specialisation: every warp loads and computes.

One buffer per operand and one raw mbarrier: the block arms the barrier, one thread
issues both TMA copies, every warp waits for the phase of tile k (parity k % 2), runs
its wgmma and waits for it, and a block barrier proves every warp finished reading
before the next tile overwrites the buffers.  Copies and tensor-core work never
overlap: the input the `warp-specialize` tactic is written for.
"""

BM, BN, BK = 128, 128, 64

M = dim("M")
N = dim("N", multiple_of=8)   # TMA: 16-byte aligned global rows
K = dim("K", multiple_of=8)

@kernel(arch="sm_90a", grid=(cdiv(M, BM), cdiv(N, BN)), warps=8)
def gemm_mbarrier_sm90(A: Tensor[bf16, (M, K)], B: Tensor[bf16, (N, K)],
                       C: Tensor[bf16, (M, N)]):
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
