# expect: CK109 6:37-6:38
BR, BC = 64, 128
R, C = dim("R"), dim("C", max=128)

@kernel(arch="sm_80", grid=(cdiv(R, BR),), warps=4)
def softmax(X: Tensor[f32, (R, C)], Y):
    x = load(X.tile((BR, BC), (block.x, 0)))
    m = row_max(x)
    e = exp(x - unsqueeze(m, 1))
    total = row_sum(e)
    store(Y.tile((BR, BC), (block.x, 0)), e / unsqueeze(total, 1))
