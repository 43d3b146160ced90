# expect: CK005 4:1-4:15
BR, BC = 64, 128
R, C = dim("R"), dim("C", max=128)
print(BR * BC)

@kernel(arch="sm_80", grid=(cdiv(R, BR),), warps=4)
def softmax(X: Tensor[f32, (R, C)], Y: Tensor[f32, (R, C)]):
    x = load(X.tile((BR, BC), (block.x, 0)))
    m = row_max(x)
    e = exp(x - unsqueeze(m, 1))
    total = row_sum(e)
    store(Y.tile((BR, BC), (block.x, 0)), e / unsqueeze(total, 1))
