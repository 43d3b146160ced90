"""stmatrix helpers (sm_90, PTX ISA 9.7.14.5.16): x4, plain and transposed."""

from __future__ import annotations

TEXT = r"""
// ---- stmatrix (PTX ISA 9.7.14.5.16): lane l gives the address of row l % 8 of matrix
// l / 8; register i of every lane holds its two elements of matrix i (row l / 4, columns
// 2 * (l % 4) and +1; `.trans` stores them at column l / 4, rows 2 * (l % 4) and +1).
// `v` is 8 consecutive 16-bit elements of a fragment: the registers i = 0..3, low half first.
#ifndef CAKE_STMATRIX_HELPERS
#define CAKE_STMATRIX_HELPERS
#ifndef CAKE_EMULATE  // PTX instructions: the CPU runtime (cake_emulate.h) supplies these
template <typename T>
__device__ __forceinline__ void cake_stmatrix_x4(uint32_t addr, const T* v) {
  static_assert(sizeof(T) == 2, "stmatrix stores 16-bit elements");
  uint32_t r[4];
  memcpy(r, v, sizeof r);
  asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};"
               :: "r"(addr), "r"(r[0]), "r"(r[1]), "r"(r[2]), "r"(r[3]) : "memory");
}
template <typename T>
__device__ __forceinline__ void cake_stmatrix_x4_trans(uint32_t addr, const T* v) {
  static_assert(sizeof(T) == 2, "stmatrix stores 16-bit elements");
  uint32_t r[4];
  memcpy(r, v, sizeof r);
  asm volatile("stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [%0], {%1, %2, %3, %4};"
               :: "r"(addr), "r"(r[0]), "r"(r[1]), "r"(r[2]), "r"(r[3]) : "memory");
}
#endif  // CAKE_EMULATE
#endif
"""
