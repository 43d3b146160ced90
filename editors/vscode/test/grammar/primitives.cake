# SYNTAX TEST "source.cake" "primitives, methods and builder forms"
M, N, K = dim("M"), dim("N"), dim("K", multiple_of=64)
#         ^^^ support.function.builtin.cake
@kernel(arch="sm_90a", grid=(cdiv(M, BM), cdiv(N, BN)), warps=12)
#                            ^^^^ support.function.builtin.cake
def gemm(A: Tensor[bf16, (M, K)], B: Tensor[bf16, (N, K)], C: Tensor[bf16, (M, N)]):
    sa = smem(bf16, (STAGES, BM, BK), layout=swizzle(128))
#        ^^^^ support.function.primitive.cake
    ab = pipeline(stages=STAGES, producer="load", consumer="mma")
#        ^^^^^^^^ support.function.primitive.cake
    with role("load", warps=range(0, 4), regs=40):
        for k in range(cdiv(K, BK)):
            s = ab.acquire()
#                 ^ punctuation.accessor.cake
#                  ^^^^^^^ support.function.method.cake
            tma_load(sa[s], A.tile((BM, BK), (block.x, k)), ab)
#           ^^^^^^^^ support.function.primitive.cake
#                             ^^^^ support.function.method.cake
            ab.commit()
#              ^^^^^^ support.function.method.cake
    with role("mma", warps=range(4, 12), regs=232):
        acc = fragment(f32, (BM, BN), layout=wgmma_acc)
#             ^^^^^^^^ support.function.primitive.cake
        for k in range(cdiv(K, BK)):
            s = ab.wait()
#                  ^^^^ support.function.method.cake
            wgmma(acc, sa[s], sb[s].T)
#           ^^^^^ support.function.primitive.cake
            wgmma_wait(0)
#           ^^^^^^^^^^ support.function.primitive.cake
            ab.release()
#              ^^^^^^^ support.function.method.cake
        store(C.tile((BM, BN), (block.x, block.y)), cast(acc, bf16))
#       ^^^^^ support.function.primitive.cake
#                                                   ^^^^ support.function.primitive.cake
    exp2(x)
#   ^^^^ support.function.primitive.cake
    exp = 3
#   ^^^ - support.function.primitive.cake
    x.load(y)
#     ^^^^ - support.function.primitive.cake
    my_store(z)
#   ^^^^^^^^ - support.function.primitive.cake
