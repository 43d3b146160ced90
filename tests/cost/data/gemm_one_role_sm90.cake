"""C = A @ B.T on sm_90a with a pipeline whose producer and consumer are the same role.

The two warpgroups acquire a stage, issues its TMA copies, commits, then waits for the
same stage and computes: the ring is there, but nobody else fills it while the tensor
cores work.  The input the `warp-specialize` tactic splits into two roles.
"""

BM, BN, BK = 128, 128, 64
STAGES = 2

M = dim("M")
N = dim("N", multiple_of=8)
K = dim("K", multiple_of=8)

@kernel(arch="sm_90a", grid=(cdiv(M, BM), cdiv(N, BN)), warps=8)
def gemm_one_role_sm90(A: Tensor[bf16, (M, K)], B: Tensor[bf16, (N, K)],
                       C: Tensor[bf16, (M, N)]):
    sa = smem(bf16, (STAGES, BM, BK), layout=swizzle(128))
    sb = smem(bf16, (STAGES, BN, BK), layout=swizzle(128))
    ab = pipeline(stages=STAGES, producer="main", consumer="main")
    with role("main", warps=range(0, 8)):
        acc = fragment(f32, (BM, BN), layout=wgmma_acc)
        for k in range(cdiv(K, BK)):
            s = ab.acquire()
            tma_load(sa[s], A.tile((BM, BK), (block.x, k)), ab)
            tma_load(sb[s], B.tile((BN, BK), (block.y, k)), ab)
            ab.commit()
            t = ab.wait()
            wgmma(acc, sa[t], sb[t].T)
            wgmma_wait(0)
            ab.release()
            syncthreads()         # every warp is done with stage t before it is refilled
        store(C.tile((BM, BN), (block.x, block.y)), cast(acc, bf16))
