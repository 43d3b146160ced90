# expect: CK404 9
# bug: a column walk over 128-byte rows: 32-way conflicts
T = 32
R, C = dim("R", multiple_of=4), dim("C", multiple_of=4)

@kernel(arch="sm_80", grid=(cdiv(R, T), cdiv(C, T)), warps=4)
def transpose(X: Tensor[f32, (R, C)], Y: Tensor[f32, (C, R)]):
    st = smem(f32, (T, T))
    store(st.T, load(X.tile((T, T), (block.x, block.y))))
    syncthreads()
    store(Y.tile((T, T), (block.y, block.x)), load(st))
