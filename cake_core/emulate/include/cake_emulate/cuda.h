// The CUDA surface a lowered kernel and its launcher use, for a host C++ compiler:
// keywords, vector and index types, the 16- and 8-bit float types with the device's
// rounding, the math intrinsics, and the runtime/driver types and enums of the launcher.
// Nothing here models timing; the semantics that matter (rounding, saturation) follow
// the CUDA headers' documented behaviour: round to nearest even, fp8 saturating to the
// finite range (__NV_SATFINITE).
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <math.h>
#include <stdint.h>
#include <string.h>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __grid_constant__
#define __align__(n) alignas(n)
#define __launch_bounds__(...)
#define __cluster_dims__(...)
#define __shared__

struct uint3 { unsigned int x, y, z; };
struct dim3 {
  unsigned int x, y, z;
  constexpr dim3(unsigned int x_ = 1, unsigned int y_ = 1, unsigned int z_ = 1)
      : x(x_), y(y_), z(z_) {}
};
struct alignas(8) uint2 { unsigned int x, y; };
struct alignas(16) uint4 { unsigned int x, y, z, w; };
struct alignas(8) float2 { float x, y; };
struct alignas(16) float4 { float x, y, z, w; };
struct alignas(8) int2 { int x, y; };
struct alignas(16) int4 { int x, y, z, w; };

// ---- 16-bit floats -----------------------------------------------------------------------
namespace cake_emu {
inline uint32_t f32_bits(float f) { uint32_t u; std::memcpy(&u, &f, 4); return u; }
inline float bits_f32(uint32_t u) { float f; std::memcpy(&f, &u, 4); return f; }

inline uint16_t f32_to_bf16(float f) {
  const uint32_t u = f32_bits(f);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);  // NaN
  const uint32_t rounded = u + 0x7FFFu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(rounded >> 16);
}
inline float bf16_to_f32(uint16_t h) { return bits_f32(static_cast<uint32_t>(h) << 16); }

inline uint16_t f32_to_f16(float f) {
  const uint32_t u = f32_bits(f);
  const uint32_t sign = (u >> 16) & 0x8000u;
  const uint32_t a = u & 0x7FFFFFFFu;
  if (a > 0x7F800000u) return static_cast<uint16_t>(sign | 0x7E00u);
  if (a >= 0x477FF000u) return static_cast<uint16_t>(sign | 0x7C00u);  // rounds past 65504
  if (a < 0x38800000u) {                                               // subnormal or zero
    const float m = bits_f32(a) * 16777216.0f;  // exact: scales by 2^24
    const float r = std::nearbyint(m);          // round half to even at the 2^-24 unit
    return static_cast<uint16_t>(sign | static_cast<uint32_t>(r));
  }
  const uint32_t rounded = a + 0xFFFu + ((a >> 13) & 1u);
  return static_cast<uint16_t>(sign | ((rounded - 0x38000000u) >> 13));
}
inline float f16_to_f32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t e = (h >> 10) & 0x1Fu, m = h & 0x3FFu;
  if (e == 0) {
    const float v = static_cast<float>(m) * (1.0f / 16777216.0f);
    return sign ? -v : v;
  }
  if (e == 31) return bits_f32(sign | 0x7F800000u | (m << 13));
  return bits_f32(sign | ((e + 112u) << 23) | (m << 13));
}

// fp8: `mbits` mantissa bits, exponent bias, the largest finite value; NaN encoding as in
// the OCP formats (e4m3: S.1111.111; e5m2: IEEE-like).  Saturates to the finite range.
template <int EBITS, int MBITS, int BIAS>
inline uint8_t f32_to_fp8(float f, float max_finite, uint8_t nan_bits) {
  if (std::isnan(f)) return nan_bits;
  const uint8_t sign = std::signbit(f) ? 0x80u : 0u;
  float a = std::fabs(f);
  if (a >= max_finite) a = max_finite;
  if (a == 0.0f) return sign;
  int exp;
  std::frexp(a, &exp);             // a = frac * 2^exp, frac in [0.5, 1)
  int e = exp - 1 + BIAS;          // biased exponent of a
  const int min_e = 1;
  float unit;                      // value of one mantissa ulp at a's exponent
  if (e < min_e) { e = 0; unit = std::ldexp(1.0f, min_e - BIAS - MBITS); }
  else unit = std::ldexp(1.0f, e - BIAS - MBITS);
  float q = std::nearbyint(a / unit) * unit;  // round half to even
  if (q > max_finite) q = max_finite;
  // re-encode q
  if (q < std::ldexp(1.0f, min_e - BIAS)) {
    const int mant = static_cast<int>(q / std::ldexp(1.0f, min_e - BIAS - MBITS));
    return static_cast<uint8_t>(sign | mant);
  }
  int qe;
  const float qf = std::frexp(q, &qe);
  const int be = qe - 1 + BIAS;
  const int mant = static_cast<int>((qf * 2.0f - 1.0f) * static_cast<float>(1 << MBITS) + 0.5f);
  return static_cast<uint8_t>(sign | (be << MBITS) | mant);
}
template <int EBITS, int MBITS, int BIAS>
inline float fp8_to_f32(uint8_t b, bool ieee_special) {
  const bool neg = b & 0x80u;
  const int e = (b >> MBITS) & ((1 << EBITS) - 1);
  const int m = b & ((1 << MBITS) - 1);
  float v;
  if (ieee_special && e == (1 << EBITS) - 1) v = m ? NAN : INFINITY;
  else if (!ieee_special && e == (1 << EBITS) - 1 && m == (1 << MBITS) - 1) v = NAN;
  else if (e == 0) v = std::ldexp(static_cast<float>(m), 1 - BIAS - MBITS);
  else v = std::ldexp(1.0f + static_cast<float>(m) / static_cast<float>(1 << MBITS), e - BIAS);
  return neg ? -v : v;
}
}  // namespace cake_emu

struct __half {
  uint16_t __x;
  __half() = default;
  explicit __half(float f) : __x(cake_emu::f32_to_f16(f)) {}
  explicit operator float() const { return cake_emu::f16_to_f32(__x); }
};
struct __nv_bfloat16 {
  uint16_t __x;
  __nv_bfloat16() = default;
  explicit __nv_bfloat16(float f) : __x(cake_emu::f32_to_bf16(f)) {}
  explicit operator float() const { return cake_emu::bf16_to_f32(__x); }
};
struct __nv_fp8_e4m3 {
  uint8_t __x;
  __nv_fp8_e4m3() = default;
  explicit __nv_fp8_e4m3(float f) : __x(cake_emu::f32_to_fp8<4, 3, 7>(f, 448.0f, 0x7F)) {}
  explicit operator float() const { return cake_emu::fp8_to_f32<4, 3, 7>(__x, false); }
};
struct __nv_fp8_e5m2 {
  uint8_t __x;
  __nv_fp8_e5m2() = default;
  explicit __nv_fp8_e5m2(float f) : __x(cake_emu::f32_to_fp8<5, 2, 15>(f, 57344.0f, 0x7F)) {}
  explicit operator float() const { return cake_emu::fp8_to_f32<5, 2, 15>(__x, true); }
};
inline float __half2float(__half h) { return static_cast<float>(h); }
inline __half __float2half_rn(float f) { return __half(f); }
inline float __bfloat162float(__nv_bfloat16 h) { return static_cast<float>(h); }
inline __nv_bfloat16 __float2bfloat16_rn(float f) { return __nv_bfloat16(f); }
inline unsigned short __half_as_ushort(__half h) { return h.__x; }
inline unsigned short __bfloat16_as_ushort(__nv_bfloat16 h) { return h.__x; }

// ---- math intrinsics (IEEE, round to nearest; the build passes -ffp-contract=off) -------
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fdiv_rn(float a, float b) { return a / b; }
inline float __fmaf_rn(float a, float b, float c) { return std::fma(a, b, c); }
inline float __expf(float x) { return std::exp(x); }
inline float __logf(float x) { return std::log(x); }
inline float __fdividef(float a, float b) { return a / b; }
// CUDA's rsqrtf has no host counterpart in <cmath>; the exact value stands in for MUFU.RSQ
inline float rsqrtf(float x) { return 1.0f / std::sqrt(x); }
using std::isinf;
using std::isnan;
// CUDA's integer min/max (host and device): index arithmetic folds `min(a, b)` to them
inline int min(int a, int b) { return a < b ? a : b; }
inline int max(int a, int b) { return a < b ? b : a; }

// ---- runtime and driver types the launcher names ----------------------------------------
enum cudaError_t : int {
  cudaSuccess = 0,
  cudaErrorInvalidValue = 1,
  cudaErrorLaunchOutOfResources = 701,
  cudaErrorLaunchFailure = 719,
  cudaErrorNotSupported = 801,
};
using cudaStream_t = void*;
enum cudaFuncAttribute : int { cudaFuncAttributeMaxDynamicSharedMemorySize = 8 };
enum cudaDeviceAttr : int { cudaDevAttrMultiProcessorCount = 16 };
using cuuint32_t = uint32_t;
using cuuint64_t = uint64_t;
enum CUtensorMapDataType : int {
  CU_TENSOR_MAP_DATA_TYPE_UINT8 = 0, CU_TENSOR_MAP_DATA_TYPE_UINT16, CU_TENSOR_MAP_DATA_TYPE_UINT32,
  CU_TENSOR_MAP_DATA_TYPE_INT32, CU_TENSOR_MAP_DATA_TYPE_UINT64, CU_TENSOR_MAP_DATA_TYPE_INT64,
  CU_TENSOR_MAP_DATA_TYPE_FLOAT16, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, CU_TENSOR_MAP_DATA_TYPE_FLOAT64,
  CU_TENSOR_MAP_DATA_TYPE_BFLOAT16,
};
enum CUtensorMapSwizzle : int {
  CU_TENSOR_MAP_SWIZZLE_NONE = 0, CU_TENSOR_MAP_SWIZZLE_32B, CU_TENSOR_MAP_SWIZZLE_64B,
  CU_TENSOR_MAP_SWIZZLE_128B,
};
// The emulated tensor map: what cuTensorMapEncodeTiled validated, in the 128-byte opaque slot.
struct alignas(64) CUtensorMap {
  uint32_t magic;
  int32_t rank;
  int32_t elem_bytes;
  int32_t swizzle_span;  // 0, 32, 64 or 128
  const void* base;
  uint64_t dims[5];
  uint64_t strides[5];  // bytes; strides[0] = element size
  uint32_t box[5];
};
static_assert(sizeof(CUtensorMap) <= 192, "tensor map record");
