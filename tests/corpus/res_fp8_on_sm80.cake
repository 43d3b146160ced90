# expect: CK212 7
# bug: e4m3 on sm_80
BR, BC = 64, 128
R, C = dim("R"), dim("C", multiple_of=16)

@kernel(arch="sm_80", grid=(cdiv(R, BR), cdiv(C, BC)), warps=4)
def dequant(X: Tensor[e4m3, (R, C)], scale: Tensor[f32, (R,)], Y: Tensor[f16, (R, C)]):
    x = cast(load(X.tile((BR, BC), (block.x, block.y))), f32)
    s = load(scale.tile((BR,), (block.x,)))
    store(Y.tile((BR, BC), (block.x, block.y)), cast(x * unsqueeze(s, 1), f16))
