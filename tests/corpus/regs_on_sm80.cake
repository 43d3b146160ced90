# expect: CK205 8
# bug: regs= (setmaxnreg) on sm_80
BM, BN = 64, 64
M, N = dim("M", multiple_of=8), dim("N", multiple_of=8)

@kernel(arch="sm_80", grid=(cdiv(M, BM), cdiv(N, BN)), warps=4)
def copy_tiles(X: Tensor[f16, (M, N)], Y: Tensor[f16, (M, N)]):
    with role("io", warps=range(0, 4), regs=64):
        x = load(X.tile((BM, BN), (block.x, block.y)))
        store(Y.tile((BM, BN), (block.x, block.y)), x)
