// The helpers of the lowered code's prelude that spell PTX, with the same names and
// signatures, on the emulated machine.  The prelude's plain-C++ helpers (pipeline
// cursors, descriptors, swizzle, conversions, argmin) are not here: the CPU build compiles
// the lowered file's own text for them, so a defect there shows up under emulation too.
#pragma once

#define CAKE_DYNAMIC_SMEM(name) uint8_t* const name = ::cake_emu::blk().smem

inline size_t __cvta_generic_to_shared(const void* p) { return ::cake_emu::smem_addr(p); }


// ---- vector and guarded accesses -----------------------------------------------------------

template <int V, typename T>
inline void cake_load_vec(const T* p, T* out, CAKE_LOC) {
  const ::cake_emu::Loc loc = ::cake_emu::at({CAKE_LOC_ARGS});
  constexpr int BYTES = V * int(sizeof(T));
  if (reinterpret_cast<uintptr_t>(p) % BYTES != 0) {
    ::cake_emu::fail("fault", ::cake_emu::fmt("a %d-byte vector load from a misaligned address",
                                              BYTES), loc);
  }
  ::cake_emu::generic_smem_read(p, BYTES, loc);
  std::memcpy(out, p, BYTES);
}

template <int V, typename T>
inline void cake_store_vec(T* p, const T* in, CAKE_LOC) {
  const ::cake_emu::Loc loc = ::cake_emu::at({CAKE_LOC_ARGS});
  constexpr int BYTES = V * int(sizeof(T));
  if (reinterpret_cast<uintptr_t>(p) % BYTES != 0) {
    ::cake_emu::fail("fault", ::cake_emu::fmt("a %d-byte vector store to a misaligned address",
                                              BYTES), loc);
  }
  ::cake_emu::generic_smem_write(p, BYTES, loc);
  ::cake_emu::preempt(loc);
  std::memcpy(p, in, BYTES);
}

template <int V, typename T>
inline void cake_store_global_if(T* p, const T* in, bool ok, CAKE_LOC) {
  if (!ok) return;
  const ::cake_emu::Loc loc = ::cake_emu::at({CAKE_LOC_ARGS});
  ::cake_emu::check_global(p, V * sizeof(T), "a guarded global store", loc);
  std::memcpy(p, in, V * sizeof(T));
}

template <int V, typename T>
inline void cake_load_global_if(const T* p, T* out, bool ok, CAKE_LOC) {
  if (!ok) { std::memset(static_cast<void*>(out), 0, V * sizeof(T)); return; }
  const ::cake_emu::Loc loc = ::cake_emu::at({CAKE_LOC_ARGS});
  ::cake_emu::check_global(p, V * sizeof(T), "a guarded global load", loc);
  std::memcpy(static_cast<void*>(out), p, V * sizeof(T));
}

// `__ldg`, the read-only load `load_scalar` lowers to: a bounds-checked read of one element.
template <typename T>
inline T __ldg(const T* p, CAKE_LOC) {
  const ::cake_emu::Loc loc = ::cake_emu::at({CAKE_LOC_ARGS});
  ::cake_emu::check_global(p, sizeof(T), "a read-only global load (load_scalar)", loc);
  T v;
  std::memcpy(static_cast<void*>(&v), p, sizeof(T));
  return v;
}

template <int V, typename T>
inline void cake_store_shared_if(uint32_t addr, const T* in, bool ok, CAKE_LOC) {
  constexpr int BYTES = V * int(sizeof(T));
  static_assert(BYTES == 4 || BYTES == 8 || BYTES == 16, "guarded smem stores move 4-16 B");
  if (!ok) return;
  const ::cake_emu::Loc loc = ::cake_emu::at({CAKE_LOC_ARGS});
  auto& b = ::cake_emu::blk();
  unsigned char* d = ::cake_emu::smem_at(b, addr, BYTES, "a guarded shared store", loc);
  ::cake_emu::mark_generic_write(b, addr, BYTES);
  ::cake_emu::preempt(loc);
  std::memcpy(d, in, BYTES);
}

// ---- barriers ---------------------------------------------------------------------------------
inline void cake_bar_sync(int id, int threads, CAKE_LOC) {
  ::cake_emu::bar_arrive_impl(id, threads, true, ::cake_emu::at({CAKE_LOC_ARGS}));
}
inline void cake_bar_arrive(int id, int threads, CAKE_LOC) {
  ::cake_emu::bar_arrive_impl(id, threads, false, ::cake_emu::at({CAKE_LOC_ARGS}));
}

// ---- mbarriers ----------------------------------------------------------------------------------
inline void cake_mbar_init(uint32_t bar, uint32_t count, CAKE_LOC) {
  ::cake_emu::mbar_init(bar, count, ::cake_emu::at({CAKE_LOC_ARGS}));
}
inline void cake_mbar_wait(uint32_t bar, uint32_t parity, CAKE_LOC) {
  ::cake_emu::mbar_wait(bar, parity, ::cake_emu::at({CAKE_LOC_ARGS}));
}
inline void cake_mbar_arrive(uint32_t bar, CAKE_LOC) {
  ::cake_emu::mbar_arrive(::cake_emu::blk(), bar, 1, ::cake_emu::at({CAKE_LOC_ARGS}));
}
inline void cake_mbar_arrive_n(uint32_t bar, uint32_t count, CAKE_LOC) {
  ::cake_emu::mbar_arrive(::cake_emu::blk(), bar, count, ::cake_emu::at({CAKE_LOC_ARGS}));
}
inline void cake_mbar_arrive_expect_tx(uint32_t bar, uint32_t bytes, CAKE_LOC) {
  const ::cake_emu::Loc loc = ::cake_emu::at({CAKE_LOC_ARGS});
  ::cake_emu::mbar_expect_tx(::cake_emu::blk(), bar, bytes, loc);
  ::cake_emu::mbar_arrive(::cake_emu::blk(), bar, 1, loc);
}
inline void cake_mbar_expect_tx(uint32_t bar, uint32_t bytes, CAKE_LOC) {
  ::cake_emu::mbar_expect_tx(::cake_emu::blk(), bar, bytes, ::cake_emu::at({CAKE_LOC_ARGS}));
}
inline void cake_fence_barrier_init() {}
// The predicated arrive of commit() / release(): one arrival when `arrive` holds.
inline void cake_pipe_arrive(int& stage, uint32_t bars, int stages, bool arrive, CAKE_LOC) {
  if (arrive) {
    ::cake_emu::mbar_arrive(::cake_emu::blk(), bars + 8 * stage, 1,
                            ::cake_emu::at({CAKE_LOC_ARGS}));
  }
  if (++stage == stages) stage = 0;
}

// ---- TMA and bulk groups --------------------------------------------------------------------------
inline void cake_prefetch_tmap(const CUtensorMap* map, CAKE_LOC) {
  ::cake_emu::check_map(map, ::cake_emu::at({CAKE_LOC_ARGS}));
}
inline void cake_fence_proxy_async() { ::cake_emu::proxy_fence(); }
inline void cake_bulk_commit() { ::cake_emu::bulk_commit(); }
template <int N>
inline void cake_bulk_wait_read(CAKE_LOC) {
  ::cake_emu::bulk_wait_read(N, ::cake_emu::at({CAKE_LOC_ARGS}));
}
#define CAKE_EMU_TMA(RANK, PARAMS, COORDS)                                                      \
  inline void cake_tma_load_##RANK##d(uint32_t dst, const CUtensorMap* map, uint32_t bar,       \
                                      PARAMS, CAKE_LOC) {                                       \
    const int c[] = {COORDS};                                                                   \
    ::cake_emu::tma_load(dst, map, bar, c, RANK, ::cake_emu::at({CAKE_LOC_ARGS}));              \
  }                                                                                             \
  inline void cake_tma_load_mc_##RANK##d(uint32_t dst, const CUtensorMap* map, uint32_t bar,    \
                                         uint16_t mask, PARAMS, CAKE_LOC) {                      \
    const int c[] = {COORDS};                                                                   \
    ::cake_emu::tma_load(dst, map, bar, c, RANK, ::cake_emu::at({CAKE_LOC_ARGS}), mask);        \
  }                                                                                             \
  inline void cake_tma_store_##RANK##d(const CUtensorMap* map, uint32_t src, PARAMS, CAKE_LOC) { \
    const int c[] = {COORDS};                                                                   \
    ::cake_emu::tma_store(map, src, c, RANK, ::cake_emu::at({CAKE_LOC_ARGS}));                  \
  }
#define CAKE_EMU_COMMA ,
CAKE_EMU_TMA(1, int c0, c0)
CAKE_EMU_TMA(2, int c0 CAKE_EMU_COMMA int c1, c0 CAKE_EMU_COMMA c1)
CAKE_EMU_TMA(3, int c0 CAKE_EMU_COMMA int c1 CAKE_EMU_COMMA int c2,
             c0 CAKE_EMU_COMMA c1 CAKE_EMU_COMMA c2)
CAKE_EMU_TMA(4, int c0 CAKE_EMU_COMMA int c1 CAKE_EMU_COMMA int c2 CAKE_EMU_COMMA int c3,
             c0 CAKE_EMU_COMMA c1 CAKE_EMU_COMMA c2 CAKE_EMU_COMMA c3)
CAKE_EMU_TMA(5, int c0 CAKE_EMU_COMMA int c1 CAKE_EMU_COMMA int c2 CAKE_EMU_COMMA int c3
                    CAKE_EMU_COMMA int c4,
             c0 CAKE_EMU_COMMA c1 CAKE_EMU_COMMA c2 CAKE_EMU_COMMA c3 CAKE_EMU_COMMA c4)
#undef CAKE_EMU_TMA

// ---- cp.async ---------------------------------------------------------------------------------------
inline void cake_cp_async_16(uint32_t dst, const void* src, uint32_t src_bytes, CAKE_LOC) {
  ::cake_emu::cp_async(dst, src, 16, src_bytes, ::cake_emu::at({CAKE_LOC_ARGS}));
}
inline void cake_cp_async_commit() { ::cake_emu::cp_async_commit(); }
template <int N>
inline void cake_cp_async_wait(CAKE_LOC) {
  ::cake_emu::cp_async_wait(N, ::cake_emu::at({CAKE_LOC_ARGS}));
}

// ---- ldmatrix and mma.sync ------------------------------------------------------------------------------
inline void cake_ldmatrix_x4(uint32_t* r, uint32_t addr, CAKE_LOC) {
  ::cake_emu::ldmatrix(r, addr, 4, false, ::cake_emu::at({CAKE_LOC_ARGS}));
}
inline void cake_ldmatrix_x2(uint32_t* r, uint32_t addr, CAKE_LOC) {
  ::cake_emu::ldmatrix(r, addr, 2, false, ::cake_emu::at({CAKE_LOC_ARGS}));
}
inline void cake_ldmatrix_x4_trans(uint32_t* r, uint32_t addr, CAKE_LOC) {
  ::cake_emu::ldmatrix(r, addr, 4, true, ::cake_emu::at({CAKE_LOC_ARGS}));
}
inline void cake_ldmatrix_x2_trans(uint32_t* r, uint32_t addr, CAKE_LOC) {
  ::cake_emu::ldmatrix(r, addr, 2, true, ::cake_emu::at({CAKE_LOC_ARGS}));
}
template <typename T>
inline void cake_stmatrix_x4(uint32_t addr, const T* v, CAKE_LOC) {
  static_assert(sizeof(T) == 2, "stmatrix stores 16-bit elements");
  uint32_t r[4];
  std::memcpy(r, static_cast<const void*>(v), sizeof r);
  ::cake_emu::stmatrix(addr, r, 4, false, ::cake_emu::at({CAKE_LOC_ARGS}));
}
template <typename T>
inline void cake_stmatrix_x4_trans(uint32_t addr, const T* v, CAKE_LOC) {
  static_assert(sizeof(T) == 2, "stmatrix stores 16-bit elements");
  uint32_t r[4];
  std::memcpy(r, static_cast<const void*>(v), sizeof r);
  ::cake_emu::stmatrix(addr, r, 4, true, ::cake_emu::at({CAKE_LOC_ARGS}));
}
inline void cake_mma_m16n8k16_f16(float* d, const uint32_t* a, const uint32_t* b, CAKE_LOC) {
  ::cake_emu::mma_m16n8k16(d, a, b, 1, ::cake_emu::at({CAKE_LOC_ARGS}));
}
inline void cake_mma_m16n8k16_bf16(float* d, const uint32_t* a, const uint32_t* b, CAKE_LOC) {
  ::cake_emu::mma_m16n8k16(d, a, b, 0, ::cake_emu::at({CAKE_LOC_ARGS}));
}

// ---- wgmma ---------------------------------------------------------------------------------------------
inline void cake_wgmma_fence() {}
inline void cake_wgmma_commit() { ::cake_emu::wgmma_commit(); }
template <int N>
inline void cake_wgmma_wait(CAKE_LOC) {
  ::cake_emu::wgmma_wait(N, ::cake_emu::at({CAKE_LOC_ARGS}));
}
template <int N>
inline void cake_fence_regs(float (&)[N]) {}
template <int N>
inline void cake_fence_regs(uint32_t (&)[N]) {}
#define CAKE_EMU_WGMMA(N, K, NAME, KIND)                                                   \
  inline void cake_wgmma_m64n##N##k##K##_##NAME(float* d, uint64_t a, uint64_t b,            \
                                                int scale_d = 1, CAKE_LOC) {                 \
    ::cake_emu::wgmma(d, a, b, N, KIND, ::cake_emu::at({CAKE_LOC_ARGS}), nullptr, scale_d);  \
  }                                                                                         \
  inline void cake_wgmma_m64n##N##k##K##_##NAME##_zd(float* d, uint64_t a, uint64_t b,       \
                                                     CAKE_LOC) {                            \
    ::cake_emu::wgmma(d, a, b, N, KIND, ::cake_emu::at({CAKE_LOC_ARGS}), nullptr, 0);        \
  }
#define CAKE_EMU_WGMMA_RS(N, NAME, KIND)                                                    \
  inline void cake_wgmma_m64n##N##k16_##NAME##_rs(float* d, uint32_t a0, uint32_t a1,        \
                                                  uint32_t a2, uint32_t a3, uint64_t b,      \
                                                  int scale_d = 1, CAKE_LOC) {               \
    const uint32_t a[4] = {a0, a1, a2, a3};                                                 \
    ::cake_emu::wgmma(d, 0, b, N, KIND, ::cake_emu::at({CAKE_LOC_ARGS}), a, scale_d);       \
  }                                                                                         \
  inline void cake_wgmma_m64n##N##k16_##NAME##_rs_zd(float* d, uint32_t a0, uint32_t a1,     \
                                                     uint32_t a2, uint32_t a3, uint64_t b,   \
                                                     CAKE_LOC) {                            \
    const uint32_t a[4] = {a0, a1, a2, a3};                                                 \
    ::cake_emu::wgmma(d, 0, b, N, KIND, ::cake_emu::at({CAKE_LOC_ARGS}), a, 0);             \
  }
#define CAKE_EMU_WGMMA_ALL(N)                                                               \
  CAKE_EMU_WGMMA(N, 16, bf16, 0) CAKE_EMU_WGMMA(N, 16, f16, 1)                              \
  CAKE_EMU_WGMMA(N, 32, e4m3, 2) CAKE_EMU_WGMMA(N, 32, e5m2, 3)                              \
  CAKE_EMU_WGMMA_RS(N, bf16, 0) CAKE_EMU_WGMMA_RS(N, f16, 1)
CAKE_EMU_WGMMA_ALL(8) CAKE_EMU_WGMMA_ALL(16) CAKE_EMU_WGMMA_ALL(24) CAKE_EMU_WGMMA_ALL(32)
CAKE_EMU_WGMMA_ALL(40) CAKE_EMU_WGMMA_ALL(48) CAKE_EMU_WGMMA_ALL(56) CAKE_EMU_WGMMA_ALL(64)
CAKE_EMU_WGMMA_ALL(72) CAKE_EMU_WGMMA_ALL(80) CAKE_EMU_WGMMA_ALL(88) CAKE_EMU_WGMMA_ALL(96)
CAKE_EMU_WGMMA_ALL(104) CAKE_EMU_WGMMA_ALL(112) CAKE_EMU_WGMMA_ALL(120) CAKE_EMU_WGMMA_ALL(128)
CAKE_EMU_WGMMA_ALL(136) CAKE_EMU_WGMMA_ALL(144) CAKE_EMU_WGMMA_ALL(152) CAKE_EMU_WGMMA_ALL(160)
CAKE_EMU_WGMMA_ALL(168) CAKE_EMU_WGMMA_ALL(176) CAKE_EMU_WGMMA_ALL(184) CAKE_EMU_WGMMA_ALL(192)
CAKE_EMU_WGMMA_ALL(200) CAKE_EMU_WGMMA_ALL(208) CAKE_EMU_WGMMA_ALL(216) CAKE_EMU_WGMMA_ALL(224)
CAKE_EMU_WGMMA_ALL(232) CAKE_EMU_WGMMA_ALL(240) CAKE_EMU_WGMMA_ALL(248) CAKE_EMU_WGMMA_ALL(256)
#undef CAKE_EMU_WGMMA_ALL
#undef CAKE_EMU_WGMMA

// ---- setmaxnreg and clusters -----------------------------------------------------------------------------
template <int N>
inline void cake_setmaxnreg_inc(CAKE_LOC) {
  ::cake_emu::setmaxnreg(N, true, ::cake_emu::at({CAKE_LOC_ARGS}));
}
template <int N>
inline void cake_setmaxnreg_dec(CAKE_LOC) {
  ::cake_emu::setmaxnreg(N, false, ::cake_emu::at({CAKE_LOC_ARGS}));
}
inline int cake_cluster_ctaid(int d) {
  const uint3 c = ::cake_emu::blk().cluster_idx;
  return static_cast<int>(d == 0 ? c.x : d == 1 ? c.y : c.z);
}
inline int cake_cluster_rank() { return ::cake_emu::blk().cluster_rank; }
inline void cake_mbar_arrive_cluster(uint32_t bar, int cta, uint32_t count, CAKE_LOC) {
  const ::cake_emu::Loc loc = ::cake_emu::at({CAKE_LOC_ARGS});
  for (const auto& b : ::cake_emu::g_launch->blocks) {
    if (b->cluster_rank == cta) { ::cake_emu::mbar_arrive(*b, bar, count, loc); return; }
  }
  ::cake_emu::fail("fault", ::cake_emu::fmt("an mbarrier arrival on cluster rank %d, outside "
                                            "the cluster", cta), loc);
}
inline void cake_cluster_sync(CAKE_LOC) { ::cake_emu::cluster_sync(::cake_emu::at({CAKE_LOC_ARGS})); }
