# expect: CK002 8:11-8:36
BR, BC = 64, 128
R, C = dim("R"), dim("C", max=128)

@kernel(arch="sm_80", grid=(cdiv(R, BR),), warps=4)
def relu(X: Tensor[f32, (R, C)], Y: Tensor[f32, (R, C)]):
    x = load(X.tile((BR, BC), (block.x, 0)))
    act = lambda v: maximum(v, 0.0)
    store(Y.tile((BR, BC), (block.x, 0)), maximum(x, 0.0))
