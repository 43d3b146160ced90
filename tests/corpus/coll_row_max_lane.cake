# expect: CK314 12
# bug: the row reduction (shuffles) runs in the first lanes only
BR, W = 64, 128
R = dim("R")

@kernel(arch="sm_90a", grid=(cdiv(R, BR),), warps=4)
def softmax_rows(X: Tensor[f32, (R, W)], Y: Tensor[f32, (R, W)]):
    with role("rows", warps=range(0, 4)):
        x = load(X.tile((BR, W), (block.x, 0)))
        m = fragment(f32, (BR,), fill=-inf)
        if lane.id < 8:
            m = row_max(x)
        e = exp(x - unsqueeze(m, 1))
        s = row_sum(e)
        store(Y.tile((BR, W), (block.x, 0)), e / unsqueeze(s, 1))
