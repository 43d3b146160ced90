"""c = a + b over N f32 values: 4 warps per block, 1024 values per block (a memory-bound kernel)."""
BLK = 1024
N = dim("N")

@kernel(arch="sm_90a", grid=(cdiv(N, BLK),), warps=4)
def vector_add(A: Tensor[f32, (N,)], B: Tensor[f32, (N,)], C: Tensor[f32, (N,)]):
    a = load(A.tile((BLK,), (block.x,)))
    b = load(B.tile((BLK,), (block.x,)))
    store(C.tile((BLK,), (block.x,)), a + b)
