"""Cluster helpers (sm_90): the block's coordinates and rank in its cluster."""

from __future__ import annotations

TEXT = r"""
// ---- cluster indices ---------------------------------------------------------------------
#ifndef CAKE_CLUSTER_HELPERS
#define CAKE_CLUSTER_HELPERS
#ifndef CAKE_EMULATE  // PTX instructions: the CPU runtime (cake_emulate.h) supplies these
__device__ __forceinline__ int cake_cluster_ctaid(int d) {
  uint32_t x, y, z;
  asm volatile("mov.u32 %0, %%cluster_ctaid.x;" : "=r"(x));
  asm volatile("mov.u32 %0, %%cluster_ctaid.y;" : "=r"(y));
  asm volatile("mov.u32 %0, %%cluster_ctaid.z;" : "=r"(z));
  return static_cast<int>(d == 0 ? x : d == 1 ? y : z);
}
__device__ __forceinline__ int cake_cluster_rank() {
  uint32_t r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return static_cast<int>(r);
}
// Every thread of every block of the cluster: release its earlier writes (mbarrier inits
// included), then acquire the peers'.
__device__ __forceinline__ void cake_cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;" ::: "memory");
  asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory");
}
// `count` arrivals on block `cta`'s mbarrier at the offset of this block's `bar` (release
// at cluster scope: this thread's earlier reads of the stage are ordered before them).
__device__ __forceinline__ void cake_mbar_arrive_cluster(uint32_t bar, int cta, uint32_t count) {
  uint32_t remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(bar), "r"(cta));
  for (uint32_t i = 0; i < count; ++i) {
    asm volatile("mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%0];"
                 :: "r"(remote) : "memory");
  }
}
#endif  // CAKE_EMULATE
#endif
"""
