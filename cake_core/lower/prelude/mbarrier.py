"""mbarrier helpers (PTX ISA 9.7.13.15): init, parity wait, arrivals, expect-tx, the
init fence, and the pipeline cursors built on them.
"""

from __future__ import annotations

TEXT = r"""
// ---- mbarriers (PTX ISA 9.7.13.15) ----------------------------------------------------
#ifndef CAKE_MBARRIER_HELPERS
#define CAKE_MBARRIER_HELPERS
#ifndef CAKE_EMULATE  // PTX instructions: the CPU runtime (cake_emulate.h) supplies these
__device__ __forceinline__ void cake_mbar_init(uint32_t bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(bar), "r"(count) : "memory");
}

// Block until the phase with parity `parity` has completed (a fresh barrier counts its
// phase "-1", parity 1, as complete: that is why empty barriers are waited from parity 1).
__device__ __forceinline__ void cake_mbar_wait(uint32_t bar, uint32_t parity) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile(
      "{\n\t.reg .pred p;\n\tCAKE_MBAR_WAIT:\n\t"
      "mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n\t"
      "@!p bra CAKE_MBAR_WAIT;\n\t}" :: "r"(bar), "r"(parity) : "memory");
#else
  asm volatile(
      "{\n\t.reg .pred p;\n\tCAKE_MBAR_WAIT:\n\t"
      "mbarrier.test_wait.parity.shared::cta.b64 p, [%0], %1;\n\t"
      "@!p bra CAKE_MBAR_WAIT;\n\t}" :: "r"(bar), "r"(parity) : "memory");
#endif
}

__device__ __forceinline__ void cake_mbar_arrive(uint32_t bar) {
  asm volatile("{\n\t.reg .b64 st;\n\tmbarrier.arrive.shared::cta.b64 st, [%0];\n\t}"
               :: "r"(bar) : "memory");
}

__device__ __forceinline__ void cake_mbar_arrive_n(uint32_t bar, uint32_t count) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("{\n\t.reg .b64 st;\n\tmbarrier.arrive.shared::cta.b64 st, [%0], %1;\n\t}"
               :: "r"(bar), "r"(count) : "memory");
#else
  for (uint32_t i = 0; i < count; ++i) cake_mbar_arrive(bar);
#endif
}

// Arrive once and add `bytes` to the transaction count of the current phase (sm_90).
__device__ __forceinline__ void cake_mbar_arrive_expect_tx(uint32_t bar, uint32_t bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("{\n\t.reg .b64 st;\n\tmbarrier.arrive.expect_tx.shared::cta.b64 st, [%0], %1;\n\t}"
               :: "r"(bar), "r"(bytes) : "memory");
#endif
}

// Add `bytes` to the transaction count without arriving (sm_90): announced before the
// copies are issued, completed by their complete_tx.
__device__ __forceinline__ void cake_mbar_expect_tx(uint32_t bar, uint32_t bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [%0], %1;"
               :: "r"(bar), "r"(bytes) : "memory");
#endif
}

__device__ __forceinline__ void cake_fence_barrier_init() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
#endif
}

#endif  // CAKE_EMULATE
// One side's cursor over a pipeline ring: the stage it takes next, the parity it waits
// for there, and the stage it took last (the one its copies signal).
struct CakeCursor {
  int stage;
  uint32_t phase;
  int held;
};

// Producer: wait until the next stage is empty, announce the stage's TMA bytes on its
// full barrier, and hand out its index.
__device__ __forceinline__ int cake_pipe_acquire(CakeCursor& c, uint32_t full, uint32_t empty,
                                                 int stages, uint32_t tx_bytes, bool leader) {
  const int s = c.stage;
  cake_mbar_wait(empty + 8 * s, c.phase);
  if (tx_bytes != 0 && leader) cake_mbar_expect_tx(full + 8 * s, tx_bytes);
  c.held = s;
  if (++c.stage == stages) { c.stage = 0; c.phase ^= 1u; }
  return s;
}

// Consumer: wait until the next stage is full and hand out its index.
__device__ __forceinline__ int cake_pipe_wait(CakeCursor& c, uint32_t full, int stages) {
  const int s = c.stage;
  cake_mbar_wait(full + 8 * s, c.phase);
  c.held = s;
  if (++c.stage == stages) { c.stage = 0; c.phase ^= 1u; }
  return s;
}

#ifndef CAKE_EMULATE  // PTX instructions: the CPU runtime (cake_emulate.h) supplies these
// commit() / release(): arrive on the oldest stage held (full or empty barrier).
// (A predicated arrival, not a branch: see cake_store_global_if.)
__device__ __forceinline__ void cake_pipe_arrive(int& stage, uint32_t bars, int stages,
                                                 bool arrive) {
  asm volatile("{\n\t.reg .pred p;\n\t.reg .b64 st;\n\tsetp.ne.b32 p, %1, 0;\n\t"
               "@p mbarrier.arrive.shared::cta.b64 st, [%0];\n\t}"
               :: "r"(bars + 8 * stage), "r"(arrive ? 1u : 0u) : "memory");
  if (++stage == stages) stage = 0;
}
#endif  // CAKE_EMULATE
#endif
"""
