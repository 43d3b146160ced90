# expect: CK104 14:16-14:49
BN, BK, D = 128, 64, 32
N, K = dim("N"), dim("K", multiple_of=64)

@kernel(arch="sm_80", grid=(cdiv(N, BN),), warps=4)
def nearest(X: Tensor[f32, (N, D)], Cn: Tensor[f32, (K, D)], L: Tensor[f32, (N, 1)]):
    x = load(X.tile((BN, D), (block.x, 0)))
    xx = row_sum(x * x)
    best = fragment(f32, (BN,), fill=inf)
    for j in range(K // BK):
        c = load(Cn.tile((BK, D), (j, 0)))
        cc = row_sum(c * c)
        dist = unsqueeze(xx, 1) + unsqueeze(cc, 0)
        best = minimum(unsqueeze(best, 1), dist)
    store(L.tile((BN, 1), (block.x, 0)), unsqueeze(best, 1))
