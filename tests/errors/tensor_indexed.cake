# expect: CK111 8:14-8:21
BR, BC = 64, 128
R, C = dim("R"), dim("C", max=128)

@kernel(arch="sm_80", grid=(cdiv(R, BR),), warps=4)
def add_bias(X: Tensor[f32, (R, C)], Bias: Tensor[f32, (1, C)], Y: Tensor[f32, (R, C)]):
    x = load(X.tile((BR, BC), (block.x, 0)))
    b = load(Bias[0])
    store(Y.tile((BR, BC), (block.x, 0)), x + b)
