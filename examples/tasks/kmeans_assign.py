"""Flash-KMeans assignment: out[b, n] = argmin_k ||X[b, n] - C[b, k]||^2.

X (B, N, D) bf16 points, C (B, K, D) bf16 centroids, Cn (B, K) f32 squared centroid
norms (computed from the bf16 centroids), out (B, N) i32.  bf16 in, f32 accumulation.
Ties go to the smallest index, as numpy's argmin.  An index that differs from the
reference passes only when its distance is within tolerance of the best distance: on a
near-tie the f32 arithmetic of a kernel may legitimately pick the other centroid.
"""

from __future__ import annotations

import numpy as np

from cake_core.tasks import Comparison, KernelEntry, Shape, Task, Tolerance, as_dtype

#: Distances are compared relative to ||x||^2 + ||c||^2, the size of the terms the kernel
#: cancels; f32 accumulation of a D = 128 dot product is good to a few 1e-7 of that.
REL_TOL = 1e-5


def inputs(dims, rng: np.random.Generator) -> dict[str, np.ndarray]:
    b, n, k, d = dims["B"], dims["N"], dims["K"], 128
    c = as_dtype(rng.standard_normal((b, k, d)), "bf16")
    # points near centroids, so the argmin is meaningful rather than noise
    pick = rng.integers(0, k, size=(b, n))
    x = np.take_along_axis(c, pick[..., None], axis=1) + 0.5 * rng.standard_normal((b, n, d))
    x = as_dtype(x, "bf16")
    cn = (c.astype(np.float64) ** 2).sum(-1).astype(np.float32)
    return {"X": x, "C": c, "Cn": cn}


def _distances(x: np.ndarray, c: np.ndarray) -> np.ndarray:
    """||x - c||^2 for every pair, in float64 (x: (n, D), c: (k, D))."""
    x64, c64 = x.astype(np.float64), c.astype(np.float64)
    return ((x64 ** 2).sum(-1)[:, None] + (c64 ** 2).sum(-1)[None, :]
            - 2.0 * x64 @ c64.T)


def reference(t: dict[str, np.ndarray], dims) -> dict[str, np.ndarray]:
    x, c = t["X"], t["C"]
    b, n = x.shape[:2]
    out = np.empty((b, n), dtype=np.int32)
    chunk = 4096  # the headline shape's full distance matrix would not fit in memory
    for i in range(b):
        for s in range(0, n, chunk):
            out[i, s:s + chunk] = _distances(x[i, s:s + chunk], c[i]).argmin(-1)
    return {"out": out}


def compare(name: str, got: np.ndarray, want: np.ndarray, t: dict[str, np.ndarray],
            dims) -> Comparison:
    g = np.asarray(got)
    if g.shape != want.shape:
        return Comparison(False, float("inf"), float("inf"), int(want.size),
                          detail=f"shape {g.shape} != reference {want.shape}")
    k = t["C"].shape[1]
    differ = np.argwhere(g != want)
    worst, worst_rel, bad, first = 0.0, 0.0, 0, None
    for b, n in differ:
        j = int(g[b, n])
        if not 0 <= j < k:
            bad += 1
            first = first or (int(b), int(n))
            worst = worst_rel = float("inf")
            continue
        x = t["X"][b, n][None, :]
        d = _distances(x, t["C"][b, [j, int(want[b, n])]])[0]
        scale = float((x.astype(np.float64) ** 2).sum() + t["Cn"][b, int(want[b, n])])
        gap = float(d[0] - d[1])
        worst, worst_rel = max(worst, gap), max(worst_rel, gap / max(scale, 1e-30))
        if gap > REL_TOL * scale:
            bad += 1
            first = first or (int(b), int(n))
    detail = f"{len(differ)} indices differ from the reference; {bad} beyond tolerance"
    if bad == 0:
        return Comparison(True, worst, worst_rel, 0, detail=detail if len(differ) else "")
    assert first is not None
    return Comparison(False, worst, worst_rel, bad, first, float(g[first]), float(want[first]),
                      detail)


TASK = Task(
    name="kmeans_assign",
    description=__doc__.strip().splitlines()[0],
    # the seed first (`cake evolve` starts from it), then its double-buffered and ping-pong
    # forms, and the ping-pong with 128 rows per warpgroup that `cake evolve` found
    kernels=(KernelEntry("../kmeans_assign_sm90.cake", "kmeans_assign_sm90"),
             KernelEntry("../kmeans_assign_sm90_dbuf.cake", "kmeans_assign_sm90_dbuf"),
             KernelEntry("../kmeans_assign_sm90_pingpong.cake", "kmeans_assign_sm90_pingpong"),
             KernelEntry("../kmeans_assign_sm90_pingpong128.cake",
                         "kmeans_assign_sm90_pingpong128")),
    inputs=inputs,
    reference=reference,
    outputs=("out",),
    shapes=(Shape({"B": 32, "N": 65536, "K": 1024}, 1.0, "headline"),
            Shape({"B": 8, "N": 65536, "K": 4096}, 0.5),
            Shape({"B": 32, "N": 16000, "K": 256}, 0.5, "ragged N")),
    # K must be a multiple of 128 (the kernel's centroid chunk); N is ragged on purpose
    sim_shapes=(Shape({"B": 2, "N": 256, "K": 256}),
                Shape({"B": 2, "N": 200, "K": 256}, label="ragged N"),
                Shape({"B": 1, "N": 100, "K": 128}, label="one partial block")),
    tolerances={"i32": Tolerance(0.0, 0.0)},
    baseline="torch: (Cn[:, None, :] - 2 * X @ C.transpose(1, 2)).argmin(-1) on bf16 CUDA "
             "tensors with f32 accumulation, same shapes",
    compare=compare,
)
