"""setmaxnreg helpers (sm_90a): raise or lower a warpgroup's register budget."""

from __future__ import annotations

TEXT = r"""
// ---- setmaxnreg (PTX ISA 9.7.19.8): every warp of the warpgroup executes it ------------
#ifndef CAKE_SETMAXNREG_HELPERS
#define CAKE_SETMAXNREG_HELPERS
#ifndef CAKE_EMULATE  // PTX instructions: the CPU runtime (cake_emulate.h) supplies these
template <int N>
__device__ __forceinline__ void cake_setmaxnreg_inc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" :: "n"(N));
}
template <int N>
__device__ __forceinline__ void cake_setmaxnreg_dec() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" :: "n"(N));
}
#endif  // CAKE_EMULATE
#endif
"""
