"""C = A @ B.T on sm_90a with a 2x1 thread-block cluster sharing the B tile by TMA multicast.

The variant of gemm_sm90.cake for L2 bandwidth: the two blocks of a cluster sit next to
each other along M (block.x = 2c, 2c + 1) and need the same 256x64 B tile every
k-step.  Each loads its own A tile and *half* of the B tile, multicast to both blocks
(`multicast=0b11`), so the cluster reads B from L2 once instead of twice.

Design (what changes against gemm_sm90):
- Raw full/empty mbarriers instead of a pipeline: a stage is refilled by *both* blocks'
  producers, so it may only be refilled once the consumers of both blocks released it.
  Each consumer warp arrives on its own block's empty barrier and on the peer's
  (`cta=1 - cluster.rank`): empty counts 8 warps x 2 blocks = 16 arrivals.
- Each full barrier expects the A tile plus *both* halves of B: every block receives
  one half from itself and one from its peer.
- `cluster_sync()` after the barrier initialisation (a peer's copy may complete on our
  barriers; CK323) and at the very end (a peer's last release arrives on our empty
  barriers; nobody may exit before that, CK324).
- The grid's x extent is rounded up to whole clusters; blocks past M read zero-filled
  tiles and their stores are clipped.
"""

BM, BN, BK = 128, 256, 64
STAGES = 4

M = dim("M")
N = dim("N", multiple_of=8)   # TMA: every global row stride is a multiple of 16 bytes
K = dim("K", multiple_of=8)

@kernel(arch="sm_90a", grid=(cdiv(M, 2 * BM) * 2, cdiv(N, BN)), warps=12, cluster=(2, 1))
def gemm_sm90_cluster(A: Tensor[bf16, (M, K)], B: Tensor[bf16, (N, K)],
                      C: Tensor[bf16, (M, N)]):
    sa = smem(bf16, (STAGES, BM, BK), layout=swizzle(128))
    sb = smem(bf16, (STAGES, BN, BK), layout=swizzle(128))
    full = mbarrier(count=1, n=STAGES)
    empty = mbarrier(count=16, n=STAGES)   # 8 consumer warps here + 8 in the peer
    fence_barrier_init()
    cluster_sync()                         # the peer's barriers exist before our copies
    ktiles = cdiv(K, BK)

    with role("load", warps=range(0, 4), regs=40):
        for k in range(ktiles):
            s = k % STAGES
            empty[s].wait((k // STAGES + 1) % 2)   # both blocks' consumers released s
            full[s].expect_tx((BM * BK + BN * BK) * 2)
            tma_load(sa[s], A.tile((BM, BK), (block.x, k)), full[s])
            tma_load(sb[s].tile((BN // 2, BK), (cluster.rank, 0)),
                     B.tile((BN // 2, BK), (block.y * 2 + cluster.rank, k)), full[s],
                     multicast=0b11)

    with role("mma", warps=range(4, 12), regs=232):
        acc = fragment(f32, (BM, BN), layout=wgmma_acc)
        # As in gemm_sm90: keep one wgmma group in flight, release the stage of k - 1.
        full[0].wait(0)
        wgmma(acc, sa[0], sb[0].T)
        for k in range(1, ktiles):
            s = k % STAGES
            full[s].wait((k // STAGES) % 2)
            wgmma(acc, sa[s], sb[s].T)
            wgmma_wait(1)
            p = (k - 1) % STAGES
            empty[p].arrive(per="warp")                       # our producer may refill
            empty[p].arrive(per="warp", cta=1 - cluster.rank)  # and the peer's may too
        wgmma_wait(0)
        last = (ktiles - 1) % STAGES
        empty[last].arrive(per="warp")
        empty[last].arrive(per="warp", cta=1 - cluster.rank)
        store(C.tile((BM, BN), (block.x, block.y)), cast(acc, bf16))

    cluster_sync()                         # the peer's last arrivals land before we exit
