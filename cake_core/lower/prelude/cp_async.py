"""cp.async helpers (sm_80, PTX ISA 9.7.9.21): zero-filling 16-byte copies, commit, wait."""

from __future__ import annotations

TEXT = r"""
// ---- cp.async (PTX ISA 9.7.9.21) -------------------------------------------------------
#ifndef CAKE_CP_ASYNC_HELPERS
#define CAKE_CP_ASYNC_HELPERS
#ifndef CAKE_EMULATE  // PTX instructions: the CPU runtime (cake_emulate.h) supplies these
// 16 bytes global -> smem, bypassing L1; bytes past `src_bytes` are zero-filled, so an
// out-of-range chunk is src_bytes = 0 (its source address is never read).
__device__ __forceinline__ void cake_cp_async_16(uint32_t dst, const void* src,
                                                 uint32_t src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;"
               :: "r"(dst), "l"(src), "r"(src_bytes) : "memory");
}
__device__ __forceinline__ void cake_cp_async_commit() {
  asm volatile("cp.async.commit_group;" ::: "memory");
}
template <int N>
__device__ __forceinline__ void cake_cp_async_wait() {
  asm volatile("cp.async.wait_group %0;" :: "n"(N) : "memory");
}
#endif  // CAKE_EMULATE
#endif
"""
