"""mma.sync helpers (sm_80): m16n8k16 with f16 or bf16 operands and f32 accumulators."""

from __future__ import annotations

TEXT = r"""
// ---- mma.sync m16n8k16 (PTX ISA 9.7.14.5.8): d = a * b + d, f32 accumulators ----------
#ifndef CAKE_MMA_HELPERS
#define CAKE_MMA_HELPERS
#ifndef CAKE_EMULATE  // PTX instructions: the CPU runtime (cake_emulate.h) supplies these
__device__ __forceinline__ void cake_mma_m16n8k16_f16(float* d, const uint32_t* a,
                                                      const uint32_t* b) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%0, %1, %2, %3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
__device__ __forceinline__ void cake_mma_m16n8k16_bf16(float* d, const uint32_t* a,
                                                       const uint32_t* b) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%0, %1, %2, %3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
#endif  // CAKE_EMULATE
#endif
"""
