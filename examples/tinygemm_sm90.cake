"""Small-M GEMM for decoding: C = A @ W.T with M <= 64 tokens, on sm_90a.

A (M, K) holds the activations of at most 64 tokens, W (N, K) the K-major weights, C is
(M, N).  bf16 in, f32 accumulation, bf16 out.

At M <= 64 the kernel is bound by streaming W from HBM, not by the tensor cores, so the
design is about bytes in flight, not FLOPs:
- One 64-row tile covers every token (BM = 64, one wgmma warpgroup); rows past M are
  zero-filled by TMA and cost no DRAM traffic.
- A narrow BN = 32 makes many blocks: N = 4096 already gives 128 blocks for 132 SMs.
- 8 stages of (64x64 + 32x64) x 2 B = 96 KB keep 32 KB of W in flight per block, and two
  blocks fit on one SM.
- No setmaxnreg: a 64x32 f32 accumulator is 16 registers per thread, nobody is short.
- The epilogue stages C through shared memory and writes it with one TMA store, which
  clips the rows past M without any predicate in the kernel.
"""

BM, BN, BK = 64, 32, 64
STAGES = 8

M = dim("M", max=64)
N = dim("N", multiple_of=8)   # TMA: 16-byte aligned global rows
K = dim("K", multiple_of=8)

@kernel(arch="sm_90a", grid=(cdiv(N, BN),), warps=8)
def tinygemm_sm90(A: Tensor[bf16, (M, K)], W: Tensor[bf16, (N, K)], C: Tensor[bf16, (M, N)]):
    sa = smem(bf16, (STAGES, BM, BK), layout=swizzle(128))
    sw = smem(bf16, (STAGES, BN, BK), layout=swizzle(128))
    sc = smem(bf16, (BM, BN), layout=swizzle(64))   # 32 bf16 = 64 B rows
    ring = pipeline(stages=STAGES, producer="load", consumer="mma")
    ktiles = cdiv(K, BK)

    with role("load", warps=range(0, 4)):
        for k in range(ktiles):
            s = ring.acquire()
            tma_load(sa[s], A.tile((BM, BK), (0, k)), ring)   # M <= BM: always tile row 0
            tma_load(sw[s], W.tile((BN, BK), (block.x, k)), ring)
            ring.commit()

    with role("mma", warps=range(4, 8)):
        acc = fragment(f32, (BM, BN), layout=wgmma_acc)
        for k in range(ktiles):
            s = ring.wait()
            wgmma(acc, sa[s], sw[s].T)
            # Memory bound: the wgmma is short next to the TMA latency, so waiting for it
            # before releasing the stage costs nothing measurable.
            wgmma_wait(0)
            ring.release()

        # Epilogue: registers -> smem (generic proxy), fence so the TMA engine (async
        # proxy) sees the writes, sync the four warps that wrote, then one TMA store.
        store(sc, cast(acc, bf16))
        fence_proxy_async()
        barrier_sync(1, 4)            # named barrier 1 over this role's 4 warps (0 is syncthreads)
        tma_store(C.tile((BM, BN), (0, block.x)), sc)
        tma_store_wait(0)             # sc must stay alive until the store has read it
