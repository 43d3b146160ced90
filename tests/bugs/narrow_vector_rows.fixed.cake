# fixed twin of narrow_vector_rows.cake: points padded to 8 floats
BR, W = 128, 8
P = dim("P")

@kernel(arch="sm_80", grid=(cdiv(P, BR),), warps=4)
def point_norms(pts: Tensor[f32, (P, W)], out: Tensor[f32, (P,)]):
    p = load(pts.tile((BR, W), (block.x, 0)))
    store(out.tile((BR,), (block.x,)), sqrt(row_sum(p * p)))
