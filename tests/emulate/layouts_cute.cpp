// The CuTe side of test_layouts_independent.py: every layout fact of the CPU runtime that
// CuTe (CUTLASS's layout library) also states, compared element by element.  CuTe is the
// independent implementation: its swizzle functors, canonical GMMA shared-memory layouts and
// descriptors, MMA and ldmatrix fragment layouts are what CUTLASS kernels run on hardware.
//
// Usage: layouts_cute CHECK [ARGS]; prints `mismatch CHECK: ...` (at most a few) and
// `checked CHECK N M` (N comparisons, M mismatches), exits 1 on a mismatch, 2 on bad usage.
//   swizzle                         Swizzle<B,4,3> on addresses vs swizzle_addr
//   gmma BITS SPAN [LBO SBO MODE KSTEP]
//                                   the K-major canonical layout of SPAN (0: interleaved) for
//                                   BITS-bit elements vs operand_addr through CuTe's descriptor
//                                   and, given the lowering's fields, through cake_wgmma_desc
//   tma BITS SPAN                   the same layout vs TMA box placement (encode_tiled, box_smem)
//   wgmma-acc                       CLayout_64xN, N = 8..256, vs wgmma_acc_coord
//   mma                             SM80_16x8x16 A, B, C layouts vs mma_a_slot, mma_b_slot, mma_c_coord
//   ldmatrix                        SM75 LDSM copy traits (x2, x4, .trans) vs ldmatrix_coord
#include <cute/atom/copy_traits_sm75.hpp>
#include <cute/atom/copy_traits_sm90_tma_swizzle.hpp>
#include <cute/atom/mma_traits_sm80.hpp>
#include <cute/atom/mma_traits_sm90_gmma.hpp>
#include <cute/tensor.hpp>
#include <cuda.h>  // the driver API's tensor-map enumerators

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "layouts_probe.h"

using namespace cute;

namespace {

struct Report {
  const char* check;
  long checked = 0, bad = 0;

  template <class... A>
  void expect(bool ok, const char* fmt, A... args) {
    ++checked;
    if (ok) return;
    if (++bad <= 8) {
      std::printf("mismatch %s: ", check);
      std::printf(fmt, args...);
      std::printf("\n");
    }
  }
  int finish() const {
    std::printf("checked %s %ld %ld\n", check, checked, bad);
    return bad ? 1 : 0;
  }
};

// ---- swizzle ------------------------------------------------------------------------------
template <int B>
void check_swizzle(Report& r, int span) {
  const Swizzle<B, 4, 3> sw{};
  auto one = [&](uint32_t a) {
    const uint32_t want = sw(a), got = cake_probe::swizzle(a, span);
    r.expect(got == want, "span %d address %u: CAKE %u, CuTe Swizzle<%d,4,3> %u", span, a, got,
             B, want);
  };
  for (uint32_t a = 0; a < (1u << 18); ++a) one(a);  // every 18-bit shared-window address
  for (uint64_t a = 1u << 18; a < (1ull << 32); a += 65537u * 3u) one(static_cast<uint32_t>(a));
}

// ---- canonical K-major GMMA operands ----------------------------------------------------------
constexpr int ROWS = 256;  // the largest wgmma N; A's 64 rows are a prefix

// One buffer aligned to 2^18, so the byte offset of an element is its address's low bits and
// CuTe's swizzle (which acts on address bits) sees the offset's.
unsigned char* arena() {
  static unsigned char* p = static_cast<unsigned char*>(std::aligned_alloc(1u << 18, 1u << 18));
  return p;
}

uint32_t offset_of(const void* p) {
  return static_cast<uint32_t>(reinterpret_cast<uintptr_t>(p) -
                               reinterpret_cast<uintptr_t>(arena()));
}

struct Lowering { uint32_t lbo, sbo, mode, kstep; };

template <class T, int SPAN>
auto k_atom() {
  if constexpr (SPAN == 128) return GMMA::Layout_K_SW128_Atom<T>{};
  else if constexpr (SPAN == 64) return GMMA::Layout_K_SW64_Atom<T>{};
  else if constexpr (SPAN == 32) return GMMA::Layout_K_SW32_Atom<T>{};
  else return GMMA::Layout_K_INTER_Atom<T>{};
}

template <class T, int SPAN, int KBYTES, class Order>
void check_gmma(Report& r, const Lowering* low, Order order, const char* order_name) {
  constexpr int EB = sizeof_bits_v<T> / 8;
  constexpr int KT = KBYTES / EB;  // elements of K in the tile
  constexpr int KB = 32 / EB;      // elements of one wgmma K step (32 bytes)
  auto layout = tile_to_shape(k_atom<T, SPAN>(), make_shape(Int<ROWS>{}, Int<KT>{}), order);
  Tensor s = make_tensor(make_smem_ptr(reinterpret_cast<T*>(arena())), layout);
  const uint32_t bases[2] = {1024u, SPAN ? 1024u + 3u * 8u * SPAN : 1024u + 112u};
  if (low && KT / KB > 1 && low->kstep == 0) {
    r.expect(false, "the lowering emits one K step, the tile holds %d", KT / KB);
  }
  for (int kb = 0; kb < KT / KB; ++kb) {
    Tensor blk = local_tile(s, make_shape(Int<ROWS>{}, Int<KB>{}), make_coord(0, kb));
    // CuTe's descriptor for this K step.  On the host cast_smem_ptr_to_uint has no shared
    // window (it prints a notice and gives 0), so the start address is set here from the
    // step's unswizzled offset, as the device conversion would give it.
    GmmaDescriptor cute_desc = GMMA::make_gmma_desc<GMMA::Major::K>(blk);
    const uint32_t start = offset_of(raw_pointer_cast(blk.data()));
    for (uint32_t base : bases) {
      cute_desc.bitfield.start_address_ = static_cast<uint16_t>((base + start) >> 4);
      const uint64_t cd = cute_desc.desc_;
      uint64_t ld = 0;
      if (low) {
        ld = cake_probe::lowering_desc(base + static_cast<uint32_t>(kb) * low->kstep, low->lbo,
                                       low->sbo, low->mode);
        const cake_probe::Desc a = cake_probe::decode(cd), b = cake_probe::decode(ld);
        r.expect(a.start == b.start && a.sbo == b.sbo && a.span == b.span,
                 "K step %d at %u: CuTe's descriptor decodes to start %u SBO %u span %d, the "
                 "lowering's to start %u SBO %u span %d", kb, base, a.start, a.sbo, a.span,
                 b.start, b.sbo, b.span);
      }
      for (int row = 0; row < ROWS; ++row) {
        for (int k = 0; k < KB; ++k) {
          const uint32_t want = offset_of(&blk(row, k));
          const uint32_t got = cake_probe::operand_addr(cd, row, k * EB) - base;
          r.expect(got == want, "%s order, K step %d, base %u, (row %d, k %d): operand_addr "
                   "through CuTe's descriptor (LBO %u SBO %u) gives +%u, CuTe's layout +%u",
                   order_name, kb, base, row, k, unsigned(cute_desc.bitfield.leading_byte_offset_) * 16,
                   unsigned(cute_desc.bitfield.stride_byte_offset_) * 16, got, want);
          if (low) {
            const uint32_t lgot = cake_probe::operand_addr(ld, row, k * EB) - base;
            r.expect(lgot == want, "K step %d, base %u, (row %d, k %d): operand_addr through "
                     "the lowering's descriptor gives +%u, CuTe's layout +%u", kb, base, row, k,
                     lgot, want);
          }
        }
      }
    }
  }
}

template <class T, int SPAN>
void gmma_for(Report& r, const Lowering* low) {
  if constexpr (SPAN == 0) {  // two core matrices per K step; both tilings CuTe accepts
    check_gmma<T, 0, 64>(r, nullptr, Step<_1, _2>{}, "M-first");
    check_gmma<T, 0, 64>(r, nullptr, Step<_2, _1>{}, "K-first");
  } else {
    check_gmma<T, SPAN, SPAN>(r, low, Step<_1, _2>{}, "M-first");
  }
}

template <class T>
bool gmma_span(Report& r, int span, const Lowering* low) {
  switch (span) {
    case 128: gmma_for<T, 128>(r, low); return true;
    case 64: gmma_for<T, 64>(r, low); return true;
    case 32: gmma_for<T, 32>(r, low); return true;
    case 0: gmma_for<T, 0>(r, low); return true;
    default: return false;
  }
}

// ---- TMA box placement ----------------------------------------------------------------------
// A box of ROWS rows of one swizzle span (16 bytes unswizzled) loaded by TMA lands in the
// canonical K-major layout CuTe pairs with that tensor-map swizzle (its make_tma_copy derives
// the map's swizzle from the shared-memory layout's).
// CuTe's TMA::to_CUtensorMapSwizzle for 16-byte swizzle bases; CuTe compiles it only under
// nvcc, so its pairing of swizzle bits and driver enumerators is spelled here, with the
// driver header's values.
int tma_swizzle(TMA::SmemSwizzleBits bits) {
  switch (bits) {
    case TMA::SmemSwizzleBits::B32: return CU_TENSOR_MAP_SWIZZLE_32B;
    case TMA::SmemSwizzleBits::B64: return CU_TENSOR_MAP_SWIZZLE_64B;
    case TMA::SmemSwizzleBits::B128: return CU_TENSOR_MAP_SWIZZLE_128B;
    default: return CU_TENSOR_MAP_SWIZZLE_NONE;
  }
}

template <class T, int SPAN>
void check_tma(Report& r) {
  constexpr int EB = sizeof_bits_v<T> / 8;
  constexpr int KT = (SPAN ? SPAN : 16) / EB;
  auto layout = tile_to_shape(k_atom<T, SPAN>(), make_shape(Int<ROWS>{}, Int<KT>{}));
  Tensor s = make_tensor(make_smem_ptr(reinterpret_cast<T*>(arena())), layout);
  const int dtype = EB == 2 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_UINT8;
  const int swz = tma_swizzle(detail::get_tma_swizzle_bits(layout));
  int eb = 0, span = 0;
  const char* err = cake_probe::encode_2d(dtype, swz, KT, ROWS, &eb, &span);
  r.expect(err == nullptr && eb == EB && span == SPAN,
           "encode_tiled(dtype %d, swizzle %d, box %dx%d): %s, %d-byte elements, span %d "
           "(CuTe: %d-byte elements, span %d)", dtype, swz, KT, ROWS, err ? err : "ok", eb, span,
           EB, SPAN);
  if (err) return;
  for (uint32_t base : {1024u, 1024u + 3u * 8u * (SPAN ? SPAN : 16)}) {
    for (int row = 0; row < ROWS; ++row) {
      for (int k = 0; k < KT; ++k) {
        const uint32_t want = offset_of(&s(row, k));
        const uint32_t got = cake_probe::box_smem(dtype, swz, KT, ROWS, base,
                                                  static_cast<uint32_t>(row * KT + k)) - base;
        r.expect(got == want, "span %d, base %u, box (row %d, k %d): box_smem +%u, CuTe +%u",
                 SPAN, base, row, k, got, want);
      }
    }
  }
}

template <class T>
bool tma_span(Report& r, int span) {
  switch (span) {
    case 128: check_tma<T, 128>(r); return true;
    case 64: check_tma<T, 64>(r); return true;
    case 32: check_tma<T, 32>(r); return true;
    case 0: check_tma<T, 0>(r); return true;
    default: return false;
  }
}

// ---- wgmma accumulators -----------------------------------------------------------------------
// CLayout_64xN: (thread, value) -> m + 64 n.
template <int N>
void check_wgmma_n(Report& r) {
  const GMMA::CLayout_64xN<N> c{};
  for (int t = 0; t < 128; ++t) {
    for (int v = 0; v < N / 2; ++v) {
      const int idx = c(t, v);
      const cake_probe::Coord got = cake_probe::wgmma_acc(t, v);
      r.expect(got.row == idx % 64 && got.col == idx / 64,
               "m64n%dk*: thread %d register %d: CAKE (row %d, col %d), CuTe (%d, %d)", N, t, v,
               got.row, got.col, idx % 64, idx / 64);
    }
  }
}

template <int... I>
void check_wgmma(Report& r, std::integer_sequence<int, I...>) {
  (check_wgmma_n<8 * (I + 1)>(r), ...);
}

// ---- mma.sync m16n8k16 ------------------------------------------------------------------------
// A: (thread, value) -> m + 16 k; B: -> n + 8 k; C: -> m + 16 n.  Value v of A and B is half
// v % 2 of register v / 2 (a0..a3, b0..b1).
template <class Op>
void check_mma(Report& r, const char* name) {
  using Tr = MMA_Traits<Op>;
  const typename Tr::ALayout a{};
  const typename Tr::BLayout b{};
  const typename Tr::CLayout c{};
  for (int t = 0; t < 32; ++t) {
    for (int v = 0; v < 8; ++v) {
      const int idx = a(t, v), m = idx % 16, k = idx / 16;
      const cake_probe::Slot s = cake_probe::mma_a(m, k);
      r.expect(s.lane == t && s.reg == v / 2 && s.half == v % 2,
               "%s A (m %d, k %d): CAKE lane %d a%d half %d, CuTe lane %d a%d half %d", name, m,
               k, s.lane, s.reg, s.half, t, v / 2, v % 2);
    }
    for (int v = 0; v < 4; ++v) {
      const int idx = b(t, v), n = idx % 8, k = idx / 8;
      const cake_probe::Slot s = cake_probe::mma_b(k, n);
      r.expect(s.lane == t && s.reg == v / 2 && s.half == v % 2,
               "%s B (k %d, n %d): CAKE lane %d b%d half %d, CuTe lane %d b%d half %d", name, k,
               n, s.lane, s.reg, s.half, t, v / 2, v % 2);
      const int ci = c(t, v);
      const cake_probe::Coord d = cake_probe::mma_c(t, v);
      r.expect(d.row == ci % 16 && d.col == ci / 16,
               "%s C lane %d d%d: CAKE (row %d, col %d), CuTe (%d, %d)", name, t, v, d.row, d.col,
               ci % 16, ci / 16);
    }
  }
}

// ---- ldmatrix -------------------------------------------------------------------------------
// DstLayout: (lane, value bit) -> bit of the source; SrcLayout: (lane, bit) -> bit, lane l's
// 128 bits being the 8 elements of the row whose address it gives.  Half j of register i is
// value bits 32 i + 16 j .. +15.
template <class Op>
void check_ldsm(Report& r, const char* name, int nmat, bool trans) {
  using Tr = Copy_Traits<Op>;
  const typename Tr::SrcLayout src{};
  const typename Tr::DstLayout dst{};
  std::vector<std::pair<int, int>> owner(32 * 128, {-1, -1});  // bit -> (lane, row bit)
  for (int l = 31; l >= 0; --l) {  // the lowest lane that supplies a row owns it
    for (int v = 0; v < 128; ++v) owner[static_cast<size_t>(src(l, v))] = {l, v};
  }
  for (int t = 0; t < 32; ++t) {
    for (int i = 0; i < nmat; ++i) {
      for (int j = 0; j < 2; ++j) {
        const int first = dst(t, 32 * i + 16 * j);
        bool whole = first % 16 == 0;
        for (int bit = 1; bit < 16; ++bit) whole &= dst(t, 32 * i + 16 * j + bit) == first + bit;
        const auto [lane, rbit] = owner[static_cast<size_t>(first)];
        const cake_probe::Coord c = cake_probe::ldmatrix(t, j, trans);
        r.expect(whole && i * 8 + c.row == lane && c.col == rbit / 16,
                 "%s lane %d register %d half %d: CAKE row of lane %d element %d, CuTe lane %d "
                 "element %d", name, t, i, j, i * 8 + c.row, c.col, lane, rbit / 16);
      }
    }
  }
}

int usage() {
  std::fprintf(stderr, "usage: layouts_cute swizzle|gmma|tma|wgmma-acc|mma|ldmatrix [ARGS]\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return usage();
  const std::string what = argv[1];
  Report r{argv[1]};
  if (what == "swizzle") {
    check_swizzle<3>(r, 128);
    check_swizzle<2>(r, 64);
    check_swizzle<1>(r, 32);
    check_swizzle<0>(r, 0);
  } else if (what == "gmma" || what == "tma") {
    if (argc != 4 && !(what == "gmma" && argc == 8)) return usage();
    const int bits = std::atoi(argv[2]), span = std::atoi(argv[3]);
    Lowering low{};
    const Lowering* lp = nullptr;
    if (argc == 8) {
      low = {static_cast<uint32_t>(std::atoi(argv[4])), static_cast<uint32_t>(std::atoi(argv[5])),
             static_cast<uint32_t>(std::atoi(argv[6])), static_cast<uint32_t>(std::atoi(argv[7]))};
      lp = &low;
    }
    bool ok;
    if (what == "gmma") {
      ok = bits == 16 ? gmma_span<bfloat16_t>(r, span, lp)
           : bits == 8 ? gmma_span<uint8_t>(r, span, lp) : false;
    } else {
      ok = bits == 16 ? tma_span<bfloat16_t>(r, span) : bits == 8 ? tma_span<uint8_t>(r, span)
                                                                   : false;
    }
    if (!ok) return usage();
  } else if (what == "wgmma-acc") {
    check_wgmma(r, std::make_integer_sequence<int, 32>{});
  } else if (what == "mma") {
    check_mma<SM80_16x8x16_F32BF16BF16F32_TN>(r, "SM80_16x8x16_F32BF16BF16F32_TN");
    check_mma<SM80_16x8x16_F32F16F16F32_TN>(r, "SM80_16x8x16_F32F16F16F32_TN");
  } else if (what == "ldmatrix") {
    check_ldsm<SM75_U32x4_LDSM_N>(r, "ldmatrix.x4 (SM75_U32x4_LDSM_N)", 4, false);
    check_ldsm<SM75_U32x2_LDSM_N>(r, "ldmatrix.x2 (SM75_U32x2_LDSM_N)", 2, false);
    check_ldsm<SM75_U16x8_LDSM_T>(r, "ldmatrix.x4.trans (SM75_U16x8_LDSM_T)", 4, true);
    check_ldsm<SM75_U16x4_LDSM_T>(r, "ldmatrix.x2.trans (SM75_U16x4_LDSM_T)", 2, true);
  } else {
    return usage();
  }
  return r.finish();
}
