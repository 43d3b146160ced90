"""The CUDA helpers every generated file carries: one small inline function per instruction.

Generated kernels call these instead of spelling inline PTX at every use, so each op of a
kernel lowers to one readable line.  The helpers are grouped by hardware feature and only
the groups a kernel uses are written.  Every PTX string here has been assembled by ptxas
13.0 for the archs that use it; the comments cite the PTX ISA sections whose semantics
they rely on.
"""

from __future__ import annotations

from cake_core.ir.types import DType

HEADER = """\
#include <cuda.h>            // CUtensorMap and its enums (types only: nothing links -lcuda)
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <stdint.h>
#include <string.h>
"""

COMMON = r"""
// ---- common --------------------------------------------------------------------------
#ifndef CAKE_COMMON_HELPERS
#define CAKE_COMMON_HELPERS
#define CAKE_FOR(v, n) _Pragma("unroll") for (int v = 0; v < (n); ++v)

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

__device__ __forceinline__ void cake_bar_sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;" :: "r"(id), "r"(threads) : "memory");
}
__device__ __forceinline__ void cake_bar_arrive(int id, int threads) {
  asm volatile("bar.arrive %0, %1;" :: "r"(id), "r"(threads) : "memory");
}
#endif
"""

MBARRIER = r"""
// ---- mbarriers (PTX ISA 9.7.13.15) ----------------------------------------------------
#ifndef CAKE_MBARRIER_HELPERS
#define CAKE_MBARRIER_HELPERS
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

// commit() / release(): arrive on the oldest stage held (full or empty barrier).
// (A predicated arrival, not a branch: see cake_store_global_if.)
__device__ __forceinline__ void cake_pipe_arrive(int& stage, uint32_t bars, int stages,
                                                 bool arrive) {
  asm volatile("{\n\t.reg .pred p;\n\t.reg .b64 st;\n\tsetp.ne.b32 p, %1, 0;\n\t"
               "@p mbarrier.arrive.shared::cta.b64 st, [%0];\n\t}"
               :: "r"(bars + 8 * stage), "r"(arrive ? 1u : 0u) : "memory");
  if (++stage == stages) stage = 0;
}
#endif
"""


def _tma_helpers() -> str:
    out = [r"""
// ---- TMA (PTX ISA 9.7.9.25: cp.async.bulk.tensor) -----------------------------------
#ifndef CAKE_TMA_HELPERS
#define CAKE_TMA_HELPERS
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

// smem `src` to the box at (c0 innermost); out-of-range elements are not written.
__device__ __forceinline__ void cake_tma_store_{rank}d(const CUtensorMap* map, uint32_t src,
                                                  {params}) {{
  asm volatile(
      "cp.async.bulk.tensor.{rank}d.global.shared::cta.bulk_group [%0, {{{coords_store}}}], [%1];"
      :: "l"(reinterpret_cast<uint64_t>(map)), "r"(src){ins} : "memory");
}}
""")
    out.append("#endif\n")
    return "".join(out)


CP_ASYNC = r"""
// ---- cp.async (PTX ISA 9.7.9.21) -------------------------------------------------------
#ifndef CAKE_CP_ASYNC_HELPERS
#define CAKE_CP_ASYNC_HELPERS
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
#endif
"""

LDMATRIX = r"""
// ---- ldmatrix (PTX ISA 9.7.14.5.15): lane l gives the address of row l % 8 of matrix
// l / 8; register i of every lane receives its two elements of matrix i. ----------------
#ifndef CAKE_LDMATRIX_HELPERS
#define CAKE_LDMATRIX_HELPERS
__device__ __forceinline__ void cake_ldmatrix_x4(uint32_t* r, uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr) : "memory");
}
__device__ __forceinline__ void cake_ldmatrix_x2(uint32_t* r, uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];"
               : "=r"(r[0]), "=r"(r[1]) : "r"(addr) : "memory");
}
__device__ __forceinline__ void cake_ldmatrix_x4_trans(uint32_t* r, uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr) : "memory");
}
__device__ __forceinline__ void cake_ldmatrix_x2_trans(uint32_t* r, uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];"
               : "=r"(r[0]), "=r"(r[1]) : "r"(addr) : "memory");
}
#endif
"""

MMA = r"""
// ---- mma.sync m16n8k16 (PTX ISA 9.7.14.5.8): d = a * b + d, f32 accumulators ----------
#ifndef CAKE_MMA_HELPERS
#define CAKE_MMA_HELPERS
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
#endif
"""

WGMMA = r"""
// ---- wgmma (PTX ISA 9.7.15) -------------------------------------------------------------
#ifndef CAKE_WGMMA_HELPERS
#define CAKE_WGMMA_HELPERS
// Shared-memory matrix descriptor (PTX ISA 9.7.15.5.1, "Matrix Descriptor Format"):
//   bits  0-13  start address >> 4         bits 16-29  leading dimension byte offset >> 4
//   bits 32-45  stride dimension byte offset >> 4
//   bits 49-51  base offset (0: every operand starts at a multiple of the swizzle repeat)
//   bits 62-63  swizzle mode: 0 none, 1 = 128B, 2 = 64B, 3 = 32B
// K-major swizzled operands: rows of one swizzle span, 8-row groups `sbo` = 8 * span bytes
// apart; the leading offset is unused (the K extent of one wgmma fits in the span) and set
// to 1, as CUTLASS does.  Successive K steps advance the start address inside the span.
__host__ __device__ __forceinline__ uint64_t cake_wgmma_desc(uint32_t addr, uint32_t lbo,
                                                             uint32_t sbo, uint32_t mode) {
  return static_cast<uint64_t>((addr & 0x3FFFFu) >> 4)
       | (static_cast<uint64_t>((lbo & 0x3FFFFu) >> 4) << 16)
       | (static_cast<uint64_t>((sbo & 0x3FFFFu) >> 4) << 32)
       | (static_cast<uint64_t>(mode) << 62);
}
__device__ __forceinline__ void cake_wgmma_fence() {
  asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
}
__device__ __forceinline__ void cake_wgmma_commit() {
  asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
}
template <int N>
__device__ __forceinline__ void cake_wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;" :: "n"(N) : "memory");
}
// Pin accumulator registers at this point of the program: no read or write of them
// moves across an in-flight wgmma (CUTLASS's warpgroup_fence_operand).
template <int N>
__device__ __forceinline__ void cake_fence_regs(float (&r)[N]) {
  CAKE_FOR(i, N) asm volatile("" : "+f"(r[i]) :: "memory");
}

#endif
"""

SETMAXNREG = r"""
// ---- setmaxnreg (PTX ISA 9.7.19.8): every warp of the warpgroup executes it ------------
#ifndef CAKE_SETMAXNREG_HELPERS
#define CAKE_SETMAXNREG_HELPERS
template <int N>
__device__ __forceinline__ void cake_setmaxnreg_inc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" :: "n"(N));
}
template <int N>
__device__ __forceinline__ void cake_setmaxnreg_dec() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" :: "n"(N));
}
#endif
"""

CLUSTER = r"""
// ---- cluster indices ---------------------------------------------------------------------
#ifndef CAKE_CLUSTER_HELPERS
#define CAKE_CLUSTER_HELPERS
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
#endif
"""

#: wgmma input dtype -> (PTX type, K per instruction)
WGMMA_TYPES = {DType.BF16: ("bf16", 16), DType.F16: ("f16", 16), DType.E4M3: ("e4m3", 32),
               DType.E5M2: ("e5m2", 32)}


def wgmma_helper_name(n: int, dtype: DType) -> str:
    ptx, k = WGMMA_TYPES[dtype]
    return f"cake_wgmma_m64n{n}k{k}_{ptx}"


def wgmma_helper(n: int, dtype: DType) -> str:
    """One `wgmma.mma_async` with both operands from smem descriptors, K-major.

    Operand order (PTX ISA 9.7.15.5.2): d, a-desc, b-desc, scale-d, imm-scale-a,
    imm-scale-b[, imm-trans-a, imm-trans-b] (16-bit types only have the transpose flags;
    0 = K-major).  scale-d 1 accumulates into d.
    """
    ptx, k = WGMMA_TYPES[dtype]
    regs = n // 2
    d = ", ".join(f"%{i}" for i in range(regs))
    outs = ", ".join(f'"+f"(d[{i}])' for i in range(regs))
    trans = ", 0, 0" if k == 16 else ""
    name = wgmma_helper_name(n, dtype)
    return f"""
#ifndef CAKE_HELPER_{name.upper()}
#define CAKE_HELPER_{name.upper()}
__device__ __forceinline__ void {name}(float* d, uint64_t desc_a, uint64_t desc_b) {{
  asm volatile(
      "{{\\n\\t.reg .pred p;\\n\\tsetp.ne.b32 p, %{regs + 2}, 0;\\n\\t"
      "wgmma.mma_async.sync.aligned.m64n{n}k{k}.f32.{ptx}.{ptx} {{{d}}}, %{regs}, %{regs + 1}, "
      "p, 1, 1{trans};\\n\\t}}"
      : {outs}
      : "l"(desc_a), "l"(desc_b), "r"(1));
}}
#endif
"""


GROUPS = {"common": COMMON, "mbarrier": MBARRIER, "cp_async": CP_ASYNC, "ldmatrix": LDMATRIX,
          "mma": MMA, "wgmma": WGMMA, "setmaxnreg": SETMAXNREG, "cluster": CLUSTER}
ORDER = ("common", "mbarrier", "tma", "cp_async", "ldmatrix", "mma", "wgmma", "setmaxnreg",
         "cluster")


def render_prelude(groups: set[str], wgmma_shapes: set[tuple[int, DType]]) -> str:
    parts = []
    for g in ORDER:
        if g != "common" and g not in groups:
            continue
        parts.append(_tma_helpers() if g == "tma" else GROUPS[g])
    for n, dt in sorted(wgmma_shapes, key=lambda x: (x[1].value, x[0])):
        parts.append(wgmma_helper(n, dt))
    return "".join(parts)
