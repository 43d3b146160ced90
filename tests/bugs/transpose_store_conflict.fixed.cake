# fixed twin of transpose_store_conflict.cake: padded(1)
T = 32
R, C = dim("R", multiple_of=4), dim("C", multiple_of=4)

@kernel(arch="sm_80", grid=(cdiv(R, T), cdiv(C, T)), warps=4)
def transpose(X: Tensor[f32, (R, C)], Y: Tensor[f32, (C, R)]):
    st = smem(f32, (T, T), layout=padded(1))
    store(st.T, load(X.tile((T, T), (block.x, block.y))))
    syncthreads()
    store(Y.tile((T, T), (block.y, block.x)), load(st))
