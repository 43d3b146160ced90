# fixed twin of sync_cross_role_bias_race.cake: the load role signals a named barrier
# after staging the bias, and the epilogue waits on it
BM, BN, BK, STAGES = 128, 128, 64, 4
M, N, K = dim("M", multiple_of=128), dim("N", multiple_of=128), dim("K", multiple_of=64)

@kernel(arch="sm_90a", grid=(cdiv(M, BM), cdiv(N, BN)), warps=12)
def gemm_bias(A: Tensor[bf16, (M, K)], B: Tensor[bf16, (N, K)], Bias: Tensor[f32, (N,)],
              C: Tensor[bf16, (M, N)]):
    sa = smem(bf16, (STAGES, BM, BK), layout=swizzle(128))
    sb = smem(bf16, (STAGES, BN, BK), layout=swizzle(128))
    sbias = smem(f32, (BN,))
    ab = pipeline(stages=STAGES, producer="load", consumer="mma")
    with role("load", warps=range(0, 4), regs=40):
        for k in range(cdiv(K, BK)):
            s = ab.acquire()
            tma_load(sa[s], A.tile((BM, BK), (block.x, k)), ab)
            tma_load(sb[s], B.tile((BN, BK), (block.y, k)), ab)
            ab.commit()
        store(sbias, load(Bias.tile((BN,), (block.y,))))
        barrier_arrive(1, 12)
    with role("mma", warps=range(4, 12), regs=232):
        acc = fragment(f32, (BM, BN), layout=wgmma_acc)
        for k in range(cdiv(K, BK)):
            s = ab.wait()
            wgmma(acc, sa[s], sb[s].T)
            wgmma_wait(0)
            ab.release()
        barrier_sync(1, 12)
        bias = load(sbias)
        store(C.tile((BM, BN), (block.x, block.y)), cast(acc + bias, bf16))
