"""TMA helpers (PTX ISA 9.7.9.25): tensor-map prefetch, the async-proxy fence, bulk group
commit and wait, and tensor loads and stores for ranks 1 to 5.
"""

from __future__ import annotations


def _tma_helpers() -> str:
    out = [r"""
// ---- TMA (PTX ISA 9.7.9.25: cp.async.bulk.tensor) -----------------------------------
#ifndef CAKE_TMA_HELPERS
#define CAKE_TMA_HELPERS
#ifndef CAKE_EMULATE  // PTX instructions: the CPU runtime (cake_emulate.h) supplies these
__device__ __forceinline__ void cake_prefetch_tmap(const CUtensorMap* map) {
  asm volatile("prefetch.tensormap [%0];" :: "l"(reinterpret_cast<uint64_t>(map)) : "memory");
}

// Order this thread's generic-proxy smem writes before later async-proxy (TMA) reads.
__device__ __forceinline__ void cake_fence_proxy_async() {
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}

__device__ __forceinline__ void cake_bulk_commit() {
  asm volatile("cp.async.bulk.commit_group;" ::: "memory");
}

// Wait until at most N bulk groups of this thread still read their smem source.
template <int N>
__device__ __forceinline__ void cake_bulk_wait_read() {
  asm volatile("cp.async.bulk.wait_group.read %0;" :: "n"(N) : "memory");
}
"""]
    for rank in range(1, 6):
        params = ", ".join(f"int c{i}" for i in range(rank))
        coords_load = ", ".join(f"%{3 + i}" for i in range(rank))
        coords_mc = ", ".join(f"%{4 + i}" for i in range(rank))
        coords_store = ", ".join(f"%{2 + i}" for i in range(rank))
        ins = "".join(f', "r"(c{i})' for i in range(rank))
        out.append(f"""
// Box of a {rank}-D tensor map at element coordinates (c0 innermost) into smem `dst`;
// completion adds the box's bytes to `bar`'s transaction count.  Out-of-range elements
// are zero-filled (the map is encoded with CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE).
__device__ __forceinline__ void cake_tma_load_{rank}d(uint32_t dst, const CUtensorMap* map,
                                                 uint32_t bar, {params}) {{
  asm volatile(
      "cp.async.bulk.tensor.{rank}d.shared::cluster.global.mbarrier::complete_tx::bytes"
      " [%0], [%1, {{{coords_load}}}], [%2];"
      :: "r"(dst), "l"(reinterpret_cast<uint64_t>(map)), "r"(bar){ins} : "memory");
}}

// The same box delivered to the same smem offset in every block of the cluster whose rank
// is set in `mask`; each receiver's barrier at `bar`'s offset gets the box's bytes.
__device__ __forceinline__ void cake_tma_load_mc_{rank}d(uint32_t dst, const CUtensorMap* map,
                                                    uint32_t bar, uint16_t mask, {params}) {{
  asm volatile(
      "cp.async.bulk.tensor.{rank}d.shared::cluster.global.mbarrier::complete_tx::bytes"
      ".multicast::cluster [%0], [%1, {{{coords_mc}}}], [%2], %3;"
      :: "r"(dst), "l"(reinterpret_cast<uint64_t>(map)), "r"(bar), "h"(mask){ins}
      : "memory");
}}

// smem `src` to the box at (c0 innermost); out-of-range elements are not written.
__device__ __forceinline__ void cake_tma_store_{rank}d(const CUtensorMap* map, uint32_t src,
                                                  {params}) {{
  asm volatile(
      "cp.async.bulk.tensor.{rank}d.global.shared::cta.bulk_group [%0, {{{coords_store}}}], [%1];"
      :: "l"(reinterpret_cast<uint64_t>(map)), "r"(src){ins} : "memory");
}}
""")
    out.append("#endif  // CAKE_EMULATE\n#endif\n")
    return "".join(out)


TEXT = _tma_helpers()
