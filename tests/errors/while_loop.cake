# expect: CK002 9:5-9:17
BR, BC = 64, 128
R, C = dim("R"), dim("C", max=128)

@kernel(arch="sm_80", grid=(cdiv(R, BR),), warps=4)
def row_scale(X: Tensor[f32, (R, C)], Y: Tensor[f32, (R, C)]):
    x = load(X.tile((BR, BC), (block.x, 0)))
    i = 0
    while i < 4:
        x = x * 0.5
        i = i + 1
    store(Y.tile((BR, BC), (block.x, 0)), x)
