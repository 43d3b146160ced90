"""Helpers every generated file carries: the unrolled loop, smem addresses and swizzle,
vectorised and guarded (predicated) accesses, element conversions, the row reductions'
shuffles and named barriers.
"""

from __future__ import annotations

TEXT = r"""
// ---- common --------------------------------------------------------------------------
#ifndef CAKE_COMMON_HELPERS
#define CAKE_COMMON_HELPERS
#define CAKE_FOR(v, n) _Pragma("unroll") for (int v = 0; v < (n); ++v)
#ifndef CAKE_EMULATE  // PTX instructions: the CPU runtime (cake_emulate.h) supplies these
// The kernel's dynamic shared memory (a macro so the CPU emulation can give each block its own).
#define CAKE_DYNAMIC_SMEM(name) extern __shared__ __align__(1024) uint8_t name[]
#endif  // CAKE_EMULATE

__host__ __device__ constexpr int cake_cdiv(int a, int b) { return (a + b - 1) / b; }

__device__ __forceinline__ uint32_t cake_smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// Swizzle<B, 4, 3> on a shared-memory byte offset: the 16-byte chunk index (bits 4..4+B)
// is XORed with the 128-byte row index (bits 7..7+B), B = log2(SPAN / 16).  This is the
// address function of the TMA swizzle modes (cuTensorMapEncodeTiled CU_TENSOR_MAP_SWIZZLE_*)
// and of the wgmma descriptor swizzle modes (PTX ISA 9.7.15.5.1), so generic loads and
// stores agree with TMA and wgmma when the smem base is 1024-byte aligned.
template <int SPAN>
__host__ __device__ __forceinline__ uint32_t cake_swizzle(uint32_t off) {
  if constexpr (SPAN == 128) return off ^ (((off >> 7) & 7u) << 4);
  else if constexpr (SPAN == 64) return off ^ (((off >> 7) & 3u) << 4);
  else if constexpr (SPAN == 32) return off ^ (((off >> 7) & 1u) << 4);
  else return off;
}

template <int BYTES> struct cake_vec;
template <> struct cake_vec<1> { using type = uint8_t; };
template <> struct cake_vec<2> { using type = uint16_t; };
template <> struct cake_vec<4> { using type = uint32_t; };
template <> struct cake_vec<8> { using type = uint2; };
template <> struct cake_vec<16> { using type = uint4; };

#ifndef CAKE_EMULATE  // PTX instructions: the CPU runtime (cake_emulate.h) supplies these
// V consecutive elements in one access (the address is V * sizeof(T) aligned).
template <int V, typename T>
__device__ __forceinline__ void cake_load_vec(const T* p, T* out) {
  using Vec = typename cake_vec<V * sizeof(T)>::type;
  const Vec v = *reinterpret_cast<const Vec*>(p);
  T tmp[V];
  memcpy(tmp, &v, sizeof(Vec));
  CAKE_FOR(e, V) out[e] = tmp[e];
}

template <int V, typename T>
__device__ __forceinline__ void cake_store_vec(T* p, const T* in) {
  using Vec = typename cake_vec<V * sizeof(T)>::type;
  T tmp[V];
  CAKE_FOR(e, V) tmp[e] = in[e];
  Vec v;
  memcpy(&v, tmp, sizeof(Vec));
  *reinterpret_cast<Vec*>(p) = v;
}

// Guarded accesses as predicated PTX, not as branches: a branch between a wgmma and its
// wait makes ptxas serialize the whole wgmma pipeline (C7514), and a bounds-checked
// epilogue is exactly such code.  Elements of a guarded-off load read as zero.
template <int V, typename T>
__device__ __forceinline__ void cake_store_global_if(T* p, const T* in, bool ok) {
  constexpr int BYTES = V * int(sizeof(T));
  T tmp[V];
  CAKE_FOR(e, V) tmp[e] = in[e];
  const uint32_t pred = ok ? 1u : 0u;
  if constexpr (BYTES == 16) {
    uint4 v;
    memcpy(&v, tmp, 16);
    asm volatile("{\n\t.reg .pred p;\n\tsetp.ne.b32 p, %5, 0;\n\t"
                 "@p st.global.v4.b32 [%0], {%1, %2, %3, %4};\n\t}"
                 :: "l"(p), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w), "r"(pred) : "memory");
  } else if constexpr (BYTES == 8) {
    uint2 v;
    memcpy(&v, tmp, 8);
    asm volatile("{\n\t.reg .pred p;\n\tsetp.ne.b32 p, %3, 0;\n\t"
                 "@p st.global.v2.b32 [%0], {%1, %2};\n\t}"
                 :: "l"(p), "r"(v.x), "r"(v.y), "r"(pred) : "memory");
  } else if constexpr (BYTES == 4) {
    uint32_t v;
    memcpy(&v, tmp, 4);
    asm volatile("{\n\t.reg .pred p;\n\tsetp.ne.b32 p, %2, 0;\n\t@p st.global.b32 [%0], %1;\n\t}"
                 :: "l"(p), "r"(v), "r"(pred) : "memory");
  } else if constexpr (BYTES == 2) {
    uint16_t v;
    memcpy(&v, tmp, 2);
    asm volatile("{\n\t.reg .pred p;\n\tsetp.ne.b32 p, %2, 0;\n\t@p st.global.b16 [%0], %1;\n\t}"
                 :: "l"(p), "h"(v), "r"(pred) : "memory");
  } else {
    uint8_t b;
    memcpy(&b, tmp, 1);
    const uint16_t v = b;
    asm volatile("{\n\t.reg .pred p;\n\tsetp.ne.b32 p, %2, 0;\n\t@p st.global.b8 [%0], %1;\n\t}"
                 :: "l"(p), "h"(v), "r"(pred) : "memory");
  }
}

template <int V, typename T>
__device__ __forceinline__ void cake_load_global_if(const T* p, T* out, bool ok) {
  constexpr int BYTES = V * int(sizeof(T));
  const uint32_t pred = ok ? 1u : 0u;
  T tmp[V];
  if constexpr (BYTES == 16) {
    uint4 v;
    asm volatile("{\n\t.reg .pred p;\n\tsetp.ne.b32 p, %5, 0;\n\t"
                 "mov.b32 %0, 0;\n\tmov.b32 %1, 0;\n\tmov.b32 %2, 0;\n\tmov.b32 %3, 0;\n\t"
                 "@p ld.global.v4.b32 {%0, %1, %2, %3}, [%4];\n\t}"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p), "r"(pred) : "memory");
    memcpy(tmp, &v, 16);
  } else if constexpr (BYTES == 8) {
    uint2 v;
    asm volatile("{\n\t.reg .pred p;\n\tsetp.ne.b32 p, %3, 0;\n\t"
                 "mov.b32 %0, 0;\n\tmov.b32 %1, 0;\n\t@p ld.global.v2.b32 {%0, %1}, [%2];\n\t}"
                 : "=r"(v.x), "=r"(v.y) : "l"(p), "r"(pred) : "memory");
    memcpy(tmp, &v, 8);
  } else if constexpr (BYTES == 4) {
    uint32_t v;
    asm volatile("{\n\t.reg .pred p;\n\tsetp.ne.b32 p, %2, 0;\n\t"
                 "mov.b32 %0, 0;\n\t@p ld.global.b32 %0, [%1];\n\t}"
                 : "=r"(v) : "l"(p), "r"(pred) : "memory");
    memcpy(tmp, &v, 4);
  } else if constexpr (BYTES == 2) {
    uint16_t v;
    asm volatile("{\n\t.reg .pred p;\n\tsetp.ne.b32 p, %2, 0;\n\t"
                 "mov.b16 %0, 0;\n\t@p ld.global.b16 %0, [%1];\n\t}"
                 : "=h"(v) : "l"(p), "r"(pred) : "memory");
    memcpy(tmp, &v, 2);
  } else {
    uint16_t v;
    asm volatile("{\n\t.reg .pred p;\n\tsetp.ne.b32 p, %2, 0;\n\t"
                 "mov.b16 %0, 0;\n\t@p ld.global.b8 %0, [%1];\n\t}"
                 : "=h"(v) : "l"(p), "r"(pred) : "memory");
    const uint8_t b = static_cast<uint8_t>(v);
    memcpy(tmp, &b, 1);
  }
  CAKE_FOR(e, V) out[e] = tmp[e];
}

// A guarded shared-memory store (one replica of a replicated fragment writes).
template <int V, typename T>
__device__ __forceinline__ void cake_store_shared_if(uint32_t addr, const T* in, bool ok) {
  constexpr int BYTES = V * int(sizeof(T));
  static_assert(BYTES == 4 || BYTES == 8 || BYTES == 16, "guarded smem stores move 4-16 B");
  uint32_t w[BYTES / 4];
  T tmp[V];
  CAKE_FOR(e, V) tmp[e] = in[e];
  memcpy(w, tmp, BYTES);
  const uint32_t pred = ok ? 1u : 0u;
  if constexpr (BYTES == 16) {
    asm volatile("{\n\t.reg .pred p;\n\tsetp.ne.b32 p, %5, 0;\n\t"
                 "@p st.shared.v4.b32 [%0], {%1, %2, %3, %4};\n\t}"
                 :: "r"(addr), "r"(w[0]), "r"(w[1]), "r"(w[2]), "r"(w[3]), "r"(pred) : "memory");
  } else if constexpr (BYTES == 8) {
    asm volatile("{\n\t.reg .pred p;\n\tsetp.ne.b32 p, %3, 0;\n\t"
                 "@p st.shared.v2.b32 [%0], {%1, %2};\n\t}"
                 :: "r"(addr), "r"(w[0]), "r"(w[1]), "r"(pred) : "memory");
  } else {
    asm volatile("{\n\t.reg .pred p;\n\tsetp.ne.b32 p, %2, 0;\n\t@p st.shared.b32 [%0], %1;\n\t}"
                 :: "r"(addr), "r"(w[0]), "r"(pred) : "memory");
  }
}

#endif  // CAKE_EMULATE
// Element conversions (round to nearest even; fp8 saturates to the finite range).
__device__ __forceinline__ float cake_f32(float x) { return x; }
__device__ __forceinline__ float cake_f32(__half x) { return __half2float(x); }
__device__ __forceinline__ float cake_f32(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ __forceinline__ float cake_f32(__nv_fp8_e4m3 x) { return static_cast<float>(x); }
__device__ __forceinline__ float cake_f32(__nv_fp8_e5m2 x) { return static_cast<float>(x); }
__device__ __forceinline__ float cake_f32(int x) { return static_cast<float>(x); }
__device__ __forceinline__ float cake_f32(uint32_t x) { return static_cast<float>(x); }
__device__ __forceinline__ float cake_f32(int8_t x) { return static_cast<float>(x); }
__device__ __forceinline__ float cake_f32(bool x) { return x ? 1.0f : 0.0f; }
template <typename T> __device__ __forceinline__ T cake_cvt(float x);
template <> __device__ __forceinline__ float cake_cvt<float>(float x) { return x; }
template <> __device__ __forceinline__ __half cake_cvt<__half>(float x) {
  return __float2half_rn(x);
}
template <> __device__ __forceinline__ __nv_bfloat16 cake_cvt<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}
template <> __device__ __forceinline__ __nv_fp8_e4m3 cake_cvt<__nv_fp8_e4m3>(float x) {
  return __nv_fp8_e4m3(x);
}
template <> __device__ __forceinline__ __nv_fp8_e5m2 cake_cvt<__nv_fp8_e5m2>(float x) {
  return __nv_fp8_e5m2(x);
}
template <> __device__ __forceinline__ int cake_cvt<int>(float x) { return static_cast<int>(x); }
template <> __device__ __forceinline__ uint32_t cake_cvt<uint32_t>(float x) {
  return static_cast<uint32_t>(x);
}
template <> __device__ __forceinline__ int8_t cake_cvt<int8_t>(float x) {
  return static_cast<int8_t>(x);
}
template <> __device__ __forceinline__ bool cake_cvt<bool>(float x) { return x != 0.0f; }

// Row reductions combine the lanes that share a row with butterfly shuffles.
template <typename T>
__device__ __forceinline__ T cake_shfl_xor(T v, int mask) {
  return __shfl_xor_sync(0xffffffffu, v, mask);
}
// (value, column) pairs: the smaller value wins, the smaller column on ties (numpy argmin).
template <typename T>
__device__ __forceinline__ void cake_argmin_xor(T& v, int& i, int mask) {
  const T ov = __shfl_xor_sync(0xffffffffu, v, mask);
  const int oi = __shfl_xor_sync(0xffffffffu, i, mask);
  if (cake_f32(ov) < cake_f32(v) || (cake_f32(ov) == cake_f32(v) && oi < i)) { v = ov; i = oi; }
}
template <typename T>
__device__ __forceinline__ void cake_argmax_xor(T& v, int& i, int mask) {
  const T ov = __shfl_xor_sync(0xffffffffu, v, mask);
  const int oi = __shfl_xor_sync(0xffffffffu, i, mask);
  if (cake_f32(ov) > cake_f32(v) || (cake_f32(ov) == cake_f32(v) && oi < i)) { v = ov; i = oi; }
}

#ifndef CAKE_EMULATE  // PTX instructions: the CPU runtime (cake_emulate.h) supplies these
__device__ __forceinline__ void cake_bar_sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;" :: "r"(id), "r"(threads) : "memory");
}
__device__ __forceinline__ void cake_bar_arrive(int id, int threads) {
  asm volatile("bar.arrive %0, %1;" :: "r"(id), "r"(threads) : "memory");
}
#endif  // CAKE_EMULATE
#endif
"""
