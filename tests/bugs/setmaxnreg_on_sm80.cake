# expect: CK205 8
# bug: regs= (setmaxnreg) on sm_80
BR, BC = 64, 128
R, C = dim("R"), dim("C", multiple_of=8)

@kernel(arch="sm_80", grid=(cdiv(R, BR), cdiv(C, BC)), warps=4)
def scale(X: Tensor[f16, (R, C)], Y: Tensor[f16, (R, C)]):
    with role("work", warps=range(0, 4), regs=128):
        x = load(X.tile((BR, BC), (block.x, block.y)))
        store(Y.tile((BR, BC), (block.x, block.y)), x * 2.0)
