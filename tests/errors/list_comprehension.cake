# expect: CK002 7:14-9:6
BR, BC = 64, 128
R, C = dim("R"), dim("C")

@kernel(arch="sm_80", grid=(cdiv(R, BR),), warps=4)
def scale_columns(X: Tensor[f32, (R, C)], Y: Tensor[f32, (R, C)]):
    scales = [
        0.5 * j for j in range(4)
    ]
    for j in range(4):
        x = load(X.tile((BR, BC), (block.x, j)))
        store(Y.tile((BR, BC), (block.x, j)), x * scales[j])
