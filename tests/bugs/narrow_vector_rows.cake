# expect: CK213 8
# bug: 24-byte rows defeat 128-bit loads
BR, W = 128, 6
P = dim("P")

@kernel(arch="sm_80", grid=(cdiv(P, BR),), warps=4)
def point_norms(pts: Tensor[f32, (P, W)], out: Tensor[f32, (P,)]):
    p = load(pts.tile((BR, W), (block.x, 0)))
    store(out.tile((BR,), (block.x,)), sqrt(row_sum(p * p)))
